"""Lazy package exports, for fast start-up.

A plugin package that re-exports its public names from heavy modules (httpx,
numpy, faiss, pypdf...) imports them all whenever rgym imports its plugin
module, and every ``rgym`` command pays for it.  With :func:`lazy_exports` each
name is imported from its module the first time it is used::

    # my_pack/__init__.py
    from typing import TYPE_CHECKING

    from rgym_core.lazy import lazy_exports

    _EXPORTS = {"MyTool": "my_pack.tool", "make_index": "my_pack.index"}
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
    __all__ = sorted(_EXPORTS)

    if TYPE_CHECKING:  # for type checkers and IDEs
        from my_pack.index import make_index
        from my_pack.tool import MyTool
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package`` that import each name of
    ``exports`` (name -> module) on first access and cache it in the package."""
    table = dict(exports)

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module protocol's name
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__


__all__ = ["lazy_exports"]
