"""What packs declare they provide, read without importing them: install hints.

The core knows no pack by name.  A pack may declare the names it provides (tasks,
tools, agents, datasets, sandboxes, model providers: their full ``pack/name``;
CLI commands: ``rgym <command>``) in the entry-point group ``rgym.provides`` of
its ``pyproject.toml``, each pointing at the plugin module that registers it::

    [project.entry-points."rgym.provides"]
    "mlgym/house-price" = "rgym_task_tabular.plugin"
    "mlgym/titanic" = "rgym_task_tabular.plugin"
    "rgym image" = "rgym_sandbox_docker.plugin"

Entry points are distribution metadata: rgym reads them without importing
anything, so a name that is not registered (the pack is installed but disabled,
or it failed to load) gets a message naming the pack and why.  For packs that
are not installed, rgym reads the same tables from the ``pyproject.toml`` files
of a source checkout the core runs from (packs one or two folders below the
checkout's root, e.g. ``task-packs/tabular``), and from the folders listed in
``RGYM_PACK_PATH`` (``os.pathsep``-separated): the hint then says which folder
to ``pip install``.
"""

from __future__ import annotations

import importlib.metadata
import os
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from attrs import define

PROVIDES_GROUP = "rgym.provides"
#: Prefix of the declared names of CLI commands (``"rgym image"``).
COMMAND_PREFIX = "rgym "


@define(frozen=True)
class Provided:
    """One declared name and the pack that provides it."""

    name: str
    distribution: str
    plugin_module: str
    folder: Path | None = None  # set for packs found in a checkout, not installed


def matches(declared: str, wanted: str) -> bool:
    """True when ``wanted`` (a full name, a short name, or ``rgym <command>``)
    names the declared item."""
    if declared == wanted:
        return True
    if declared.startswith(COMMAND_PREFIX) or wanted.startswith(COMMAND_PREFIX):
        return False
    namespace, _, short = declared.partition("/")
    # A short name (`blotto`), or a pack's namespace (`--tool literature`).
    return "/" not in wanted and wanted in (short, namespace)


def installed() -> list[Provided]:
    """Every name declared by an installed distribution."""
    out = []
    for ep in importlib.metadata.entry_points(group=PROVIDES_GROUP):
        dist = ep.dist.name if ep.dist is not None else ep.module
        out.append(Provided(ep.name, dist, ep.value))
    return out


def _checkout_root() -> Path | None:
    """The source checkout the core runs from, when it runs from one."""
    root = Path(__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    try:
        name = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    return root if name == "rgym-core" else None


def _pack_folders() -> Iterator[Path]:
    roots = [Path(p) for p in os.environ.get("RGYM_PACK_PATH", "").split(os.pathsep) if p]
    checkout = _checkout_root()
    for root in roots:
        yield root
        yield from sorted(root.glob("*/"))
    if checkout is not None:
        for pattern in ("*/", "*/*/"):
            for folder in sorted(checkout.glob(pattern)):
                if folder.name.startswith((".", "_")) or folder == checkout:
                    continue
                yield folder


def declared_in(folder: Path) -> list[Provided]:
    """The names a pack folder's ``pyproject.toml`` declares (none if it has none)."""
    try:
        data = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []
    project = data.get("project", {})
    table = project.get("entry-points", {}).get(PROVIDES_GROUP, {})
    dist = str(project.get("name", folder.name))
    if not isinstance(table, dict):
        return []
    return [Provided(str(name), dist, str(module), folder.resolve()) for name, module in table.items()]


def in_folders() -> list[Provided]:
    """Names declared by the pack folders rgym can see (checkout and RGYM_PACK_PATH)."""
    out: list[Provided] = []
    seen: set[Path] = set()
    for folder in _pack_folders():
        resolved = folder.resolve()
        if resolved in seen or not (folder / "pyproject.toml").is_file():
            continue
        seen.add(resolved)
        out.extend(declared_in(folder))
    return out


def _folder_hint(folder: Path) -> str:
    try:
        return "./" + str(folder.relative_to(Path.cwd()))
    except ValueError:
        return str(folder)


def install_hint(name: str, plugins: Iterable[Any] = ()) -> str:
    """``"; it comes with the X pack: ..."`` for a name some pack declares, else ``""``.

    ``plugins`` are the registry's :class:`~rgym_core.registry.PluginInfo` records:
    a pack that is installed but disabled or broken is named with the reason.
    """
    state = {p.distribution: p for p in plugins}
    installed_dists = set(state)
    # Installed metadata first; then the checkout's pyproject.toml files, which also
    # cover an editable install whose metadata predates its `rgym.provides` table.
    for provided in [*installed(), *in_folders()]:
        if not matches(provided.name, name) or provided.distribution not in installed_dists:
            continue
        info = state[provided.distribution]
        if info.loaded:
            continue  # loaded: the name it declares is of another kind
        if info.error == "disabled":
            why = "is installed but disabled (--plugins / --disable-plugin, RGYM_PLUGINS / " \
                  "RGYM_DISABLE_PLUGINS)"
        else:
            why = f"is installed but failed to load ({info.error})"
        return f"; it comes with the {provided.distribution} pack, which {why}"
    for provided in in_folders():
        if provided.distribution in installed_dists:
            continue
        if matches(provided.name, name) and provided.folder is not None:
            return (f"; it comes with the {provided.distribution} pack: "
                    f"pip install {_folder_hint(provided.folder)}")
    return ""
