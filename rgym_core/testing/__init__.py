"""Test helpers for plugin authors (the sandbox conformance suite)."""
