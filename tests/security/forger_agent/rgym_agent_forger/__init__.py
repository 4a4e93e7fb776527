"""A scaffold that lies about its model usage (security tests only)."""
