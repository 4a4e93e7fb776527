"""The error a spec file (or value) raises when it is invalid.

Its own module, below both :mod:`rgym_core.specs` (whose validators raise it)
and :mod:`rgym_core.serialization` (which turns cattrs' errors into it), so
neither imports the other to reach it.
"""

from __future__ import annotations


class SpecError(ValueError):
    """A spec file (or value) is invalid.  ``str(err)`` is one line naming the
    file, the field and what is wrong."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = source
        self.field = field or "(top level)"
        self.message = message
        super().__init__(f"{source}: {self.field}: {message}")


__all__ = ["SpecError"]
