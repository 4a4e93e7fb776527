"""Plugin discovery and the registry of tasks, datasets, tools, agents, sandboxes
and model providers.

Plugins are found through the entry-point group ``rgym``.  A plugin that fails
to import (or whose registration hook raises) produces one warning naming its
distribution; the rest keep working.  Which plugins load can be restricted with
``RGYM_PLUGINS`` / ``--plugins`` (only these, comma-separated entry-point or
distribution names) and ``RGYM_DISABLE_PLUGINS`` / ``--disable-plugin``.
The built-in plugin :mod:`rgym_core.builtin` always loads.
"""

from __future__ import annotations

import importlib.metadata
import os
import warnings
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

import pluggy
from attrs import define, field

from rgym_core import hookspecs

T = TypeVar("T")

ENTRY_POINT_GROUP = "rgym"
BUILTIN = "builtin"
KINDS = ("tasks", "datasets", "tools", "agents", "sandboxes", "model_providers")


class RegistryError(LookupError):
    """A name could not be resolved, or two distributions registered one name."""


class PluginLoadWarning(UserWarning):
    """A plugin failed to import or to register; it was skipped."""


@define(frozen=True)
class Registered(Generic[T]):
    """A registered item with the plugin and distribution that provided it."""

    name: str
    item: T
    plugin: str
    distribution: str


@define
class PluginInfo:
    """A discovered plugin and whether it loaded."""

    name: str
    distribution: str
    version: str
    loaded: bool
    error: str | None = None


#: Where the names of rgym's own packs come from, for "unknown name" messages.
_PACKS = {
    "rgym-sandbox-docker": ("plugins/sandbox-docker", ["docker"]),
    "rgym-agent-react": ("agents/react", ["react"]),
    "rgym-agent-baseline": ("agents/baseline", ["baseline"]),
    "rgym-llm": ("plugins/llm", ["openai-compatible", "openai", "anthropic", "vllm", "ollama",
                                 "openrouter", "litellm"]),
    "rgym-tools-literature": ("plugins/literature", ["literature", "literature_search"]),
    "rgym-tools-pdf": ("plugins/pdf", ["pdf", "read_pdf"]),
    "rgym-tools-memory": ("plugins/memory", ["memory", "memory_read", "memory_write"]),
    "rgym-task-gametheory": ("task-packs/gametheory", ["prisoners-dilemma", "battle-of-sexes",
                                                        "blotto"]),
    "rgym-task-sat": ("task-packs/sat", ["3sat"]),
    "rgym-task-tabular": ("task-packs/tabular", ["house-price", "titanic"]),
}
_SINGULAR = {"tasks": "task", "datasets": "dataset", "tools": "tool", "agents": "agent",
             "sandboxes": "sandbox", "model_providers": "model provider"}
_LIST_WORD = {"model_providers": "models"}


def install_hint(name: str) -> str:
    """``; it comes with ...`` when ``name`` belongs to one of rgym's own packs."""
    short = name.split("/", 1)[-1]
    for dist, (folder, names) in _PACKS.items():
        if short in names or name in names:
            return f"; it comes with the {dist} pack: pip install {dist} (or ./{folder} in a checkout)"
    return ""


def _name_of(kind: str, item: Any) -> str:
    if kind in ("tasks", "datasets"):
        return item.id
    if kind == "tools":
        return item.qualified_name
    return item.name


def _split_env(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@define
class Registry:
    """Everything the installed plugins registered.  Build with :func:`load_registry`."""

    plugin_manager: pluggy.PluginManager
    plugins: list[PluginInfo] = field(factory=list)
    tasks: dict[str, Registered[Any]] = field(factory=dict)
    datasets: dict[str, Registered[Any]] = field(factory=dict)
    tools: dict[str, Registered[Any]] = field(factory=dict)
    agents: dict[str, Registered[Any]] = field(factory=dict)
    sandboxes: dict[str, Registered[Any]] = field(factory=dict)
    model_providers: dict[str, Registered[Any]] = field(factory=dict)
    warnings: list[str] = field(factory=list)

    @property
    def hook(self) -> Any:
        return self.plugin_manager.hook

    def table(self, kind: str) -> dict[str, Registered[Any]]:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        return getattr(self, kind)

    def resolve(self, kind: str, name: str) -> Registered[Any]:
        """Find an item by its full name (``mlgym/blotto``) or, when unambiguous,
        by the part after the slash (``blotto``)."""
        table = self.table(kind)
        if name in table:
            return table[name]
        matches = [r for key, r in table.items() if key.split("/", 1)[-1] == name]
        if len(matches) == 1:
            return matches[0]
        singular = _SINGULAR[kind]
        if matches:
            names = ", ".join(sorted(r.name for r in matches))
            raise RegistryError(f"{singular} '{name}' is ambiguous: {names}; use the full name")
        known = ", ".join(sorted(table)) or "none installed"
        hint = install_hint(name) or f"; `rgym list {_LIST_WORD.get(kind, kind)}` shows what is installed"
        raise RegistryError(f"unknown {singular} '{name}' (installed: {known}){hint}")

    def task(self, name: str) -> Any:
        return self.resolve("tasks", name).item

    def dataset(self, name: str) -> Any:
        return self.resolve("datasets", name).item

    def agent(self, name: str) -> Any:
        return self.resolve("agents", name).item

    def sandbox(self, name: str) -> Any:
        return self.resolve("sandboxes", name).item

    def tool(self, name: str) -> Any:
        return self.resolve("tools", name).item

    def model_provider(self, name: str) -> Any:
        return self.resolve("model_providers", name).item

    def cli_commands(self) -> list[Any]:
        commands: list[Any] = []
        for impl in self.plugin_manager.hook.rgym_cli_commands.get_hookimpls():
            try:
                commands.extend(impl.function() or [])
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the CLI
                self._warn(f"plugin '{impl.plugin_name}' failed to add CLI commands: {exc!r}")
        return commands

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        warnings.warn(message, PluginLoadWarning, stacklevel=3)


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)


def _selected(ep_name: str, dist: str, only: list[str], disabled: list[str]) -> bool:
    if ep_name == BUILTIN:
        return True
    if ep_name in disabled or dist in disabled:
        return False
    return not only or ep_name in only or dist in only


def load_registry(*, only: Iterable[str] | None = None, disabled: Iterable[str] | None = None,
                  extra_plugins: Iterable[tuple[str, Any]] = (), entry_points: bool = True) -> Registry:
    """Discover plugins and build the registry.

    ``only``/``disabled`` default to the ``RGYM_PLUGINS``/``RGYM_DISABLE_PLUGINS``
    environment variables.  ``extra_plugins`` are ``(name, module_or_object)``
    pairs registered as if they came from a distribution of that name (for tests
    and embedding).  Raises :class:`RegistryError` when two distributions
    register one name.
    """
    only_list = list(only) if only is not None else _split_env(os.environ.get("RGYM_PLUGINS"))
    disabled_list = (list(disabled) if disabled is not None
                     else _split_env(os.environ.get("RGYM_DISABLE_PLUGINS")))
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    registry = Registry(plugin_manager=pm)
    dist_of: dict[str, str] = {}

    found = _entry_points() if entry_points else []
    if not any(ep.name == BUILTIN for ep in found):
        # Running from a source tree that is not installed: register the built-ins directly.
        from rgym_core import builtin

        pm.register(builtin, name=BUILTIN)
        dist_of[BUILTIN] = "rgym-core"
        registry.plugins.append(PluginInfo(BUILTIN, "rgym-core", _version("rgym-core"), True))
    for ep in found:
        dist = ep.dist.name if ep.dist is not None else ep.name
        version = ep.dist.version if ep.dist is not None else ""
        if not _selected(ep.name, dist, only_list, disabled_list):
            registry.plugins.append(PluginInfo(ep.name, dist, version, False, "disabled"))
            continue
        if ep.name in dist_of:
            registry._warn(f"rgym: plugin name '{ep.name}' from distribution '{dist}' is already "
                           f"used by '{dist_of[ep.name]}'; skipped")
            continue
        try:
            plugin = ep.load()
            pm.register(plugin, name=ep.name)
        except Exception as exc:  # noqa: BLE001 - any import failure becomes one warning
            summary = f"{type(exc).__name__}: {exc}".splitlines()[0]
            registry._warn(f"rgym: plugin '{ep.name}' from distribution '{dist}' failed to load "
                           f"({summary}); its tasks, tools and agents are unavailable")
            registry.plugins.append(PluginInfo(ep.name, dist, version, False, summary))
            continue
        dist_of[ep.name] = dist
        registry.plugins.append(PluginInfo(ep.name, dist, version, True))
    known_names = {p.name for p in registry.plugins} | {p.distribution for p in registry.plugins}
    for wanted in [*only_list, *disabled_list]:
        if wanted not in known_names:
            registry._warn(f"rgym: no installed plugin is called '{wanted}' (see `rgym list plugins`)")
    for name, plugin in extra_plugins:
        pm.register(plugin, name=name)
        dist_of[name] = name
        registry.plugins.append(PluginInfo(name, name, "", True))

    for kind in KINDS:
        hook = getattr(pm.hook, f"rgym_register_{kind}")
        table = registry.table(kind)
        for impl in hook.get_hookimpls():
            dist = dist_of.get(impl.plugin_name, impl.plugin_name)
            try:
                items = impl.function() or []
            except Exception as exc:  # noqa: BLE001
                summary = f"{type(exc).__name__}: {exc}".splitlines()[0]
                registry._warn(f"rgym: plugin '{impl.plugin_name}' from distribution '{dist}' "
                               f"failed to register its {kind} ({summary})")
                continue
            for item in items:
                name = _name_of(kind, item)
                if "/" not in name:
                    registry._warn(f"rgym: {_SINGULAR[kind]} '{name}' from '{dist}' is not namespaced "
                                   f"as 'pack/name'; skipped")
                    continue
                if name in table and table[name].distribution != dist:
                    other = table[name].distribution
                    raise RegistryError(
                        f"{_SINGULAR[kind]} '{name}' is registered by both '{other}' and "
                        f"'{dist}'; uninstall one, or restrict plugins with --plugins / RGYM_PLUGINS")
                table[name] = Registered(name, item, impl.plugin_name, dist)
    return registry


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "dev"


