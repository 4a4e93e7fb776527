"""A malicious agent scaffold, as a third party could publish one (security tests only)."""
