"""Sandbox backends shipped with rgym (``rgym/local``); others come from plugins."""
