"""A minimal rgym task pack."""
