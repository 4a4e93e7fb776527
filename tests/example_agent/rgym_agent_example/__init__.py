"""A minimal third-party rgym agent: an asynchronous scaffold in its own package."""
