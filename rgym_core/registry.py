"""Plugin discovery and the registry of tasks, datasets, tools, agents, sandboxes,
model providers and CLI commands.

Plugins are found through the entry-point group ``rgym``.  Every hook is called
through pluggy (each implementation gets only the arguments it names, in
pluggy's order, with ``wrapper=True`` implementations around the rest), and
each implementation is isolated: one that raises produces one warning naming its
plugin and distribution, and the others' answers are kept.  A plugin that fails
to import is skipped the same way.

Which plugins load can be restricted with ``RGYM_PLUGINS`` / ``--plugins``
(only these, comma-separated entry-point or distribution names) and
``RGYM_DISABLE_PLUGINS`` / ``--disable-plugin``.  The built-in plugin
:mod:`rgym_core.builtin` always loads.

Loading the registry imports the plugin modules only (which must be light: see
CONTRIBUTING.md, "fast start-up"); each kind of item (tasks, tools...) is
registered the first time it is asked for, so ``rgym --help`` calls no
registration hook and ``rgym list tasks`` only ``rgym_register_tasks``.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import importlib
import importlib.metadata
import inspect
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pluggy
from attrs import define, field

from rgym_core import hookspecs

if TYPE_CHECKING:
    from rgym_core.models import ModelClient, ModelProviderSpec

T = TypeVar("T")

ENTRY_POINT_GROUP = "rgym"
BUILTIN = "builtin"
#: The built-in plugin's module, which rgym-core's own ``rgym`` entry point names.
BUILTIN_MODULE = "rgym_core.builtin"
CORE_DISTRIBUTION = "rgym-core"
KINDS = ("tasks", "datasets", "tools", "agents", "sandboxes", "model_providers")


class RegistryError(LookupError):
    """A name could not be resolved, or two distributions registered one name."""


class PluginLoadWarning(UserWarning):
    """A plugin failed to import, to register or to run a hook; it was skipped."""


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


@define(frozen=True)
class HookFailure:
    """One hook implementation that raised (it was skipped; the call went on)."""

    hook: str
    plugin: str
    distribution: str
    error: str
    exception: BaseException = field(eq=False, repr=False)


_SINGULAR = {"tasks": "task", "datasets": "dataset", "tools": "tool", "agents": "agent",
             "sandboxes": "sandbox", "model_providers": "model provider"}
_LIST_WORD = {"model_providers": "models"}

#: Where a failing hook implementation is reported, for the call in progress.
_failure_handler: contextvars.ContextVar[Callable[[HookFailure], None] | None] = \
    contextvars.ContextVar("rgym_hook_failure_handler", default=None)
#: Receives ``(plugin name, answer)`` from each implementation, for the call in progress.
_answer_sink: contextvars.ContextVar[Callable[[str, Any], None] | None] = \
    contextvars.ContextVar("rgym_hook_answer_sink", default=None)


def _summary(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _name_of(kind: str, item: Any) -> str:
    if kind in ("tasks", "datasets"):
        return str(item.id)
    if kind == "tools":
        return str(item.qualified_name)
    return str(item.name)


def _split_env(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


# --------------------------------------------------------------------------- isolation


class _GuardedPlugin:
    """A plugin as registered with pluggy: its hook implementations wrapped so that
    one that raises is reported (a :class:`HookFailure`) instead of ending the call.

    pluggy still does the calling: the wrappers keep the signature (pluggy reads it
    through ``__wrapped__``) and the ``hookimpl`` options, so argument selection,
    ``tryfirst``/``trylast`` and ``wrapper=True`` work as pluggy documents.
    """

    def __init__(self, plugin: Any, name: str, distribution: str, registry: Registry) -> None:
        self.rgym_plugin = plugin
        for attr in dir(plugin):
            if not attr.startswith("rgym_"):
                continue
            try:
                method = getattr(plugin, attr)
            except Exception:  # noqa: BLE001, S112 - a property that raises is no hook
                continue
            opts = getattr(method, f"{hookspecs.PROJECT}_impl", None)
            if not inspect.isroutine(method) or not isinstance(opts, dict):
                continue
            setattr(self, attr, _guard(method, attr, name, distribution, registry, opts))

    def __dir__(self) -> list[str]:
        """Only this object's own attributes: pluggy looks for hook implementations in
        ``dir(plugin)`` and would otherwise inspect every attribute of ``object`` too."""
        return sorted(vars(self))


def _guard(method: Any, hook: str, plugin: str, distribution: str, registry: Registry,
           opts: dict[str, Any]) -> Callable[..., Any]:
    def report(exc: BaseException) -> None:
        registry._hook_failed(HookFailure(hook, plugin, distribution, _summary(exc), exc))

    if opts.get("wrapper") or opts.get("hookwrapper"):
        @functools.wraps(method)
        def guarded_wrapper(*args: Any, **kwargs: Any) -> Any:
            gen = method(*args, **kwargs)
            try:
                next(gen)
            except Exception as exc:  # noqa: BLE001 - a broken wrapper is skipped
                report(exc)
                gen = None
            try:
                inner = yield
            except BaseException as exc:  # the call failed: let the wrapper see it
                if gen is None:
                    raise
                try:
                    gen.throw(exc)
                except StopIteration as stop:
                    return stop.value
                raise RuntimeError(f"hook wrapper {plugin}.{hook} did not stop after an exception") from exc
            if gen is None:
                return inner
            try:
                gen.send(inner)
            except StopIteration as stop:
                return inner if opts.get("hookwrapper") else stop.value
            except Exception as exc:  # noqa: BLE001
                report(exc)
                return inner
            gen.close()
            report(RuntimeError("the wrapper yielded more than once"))
            return inner

        return guarded_wrapper

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            answer = method(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - one broken plugin never stops the others
            report(exc)
            return None
        sink = _answer_sink.get()
        if sink is not None:
            sink(plugin, answer)
        return answer

    return guarded


# --------------------------------------------------------------------------- registry


class Registry:
    """Everything the installed plugins registered.  Build with :func:`load_registry`.

    The tables (``tasks``, ``tools``...) map full names to :class:`Registered`
    items; each is built by its registration hook the first time it is read.
    Raises :class:`RegistryError` then if two distributions register one name.
    """

    def __init__(self, plugin_manager: pluggy.PluginManager) -> None:
        self.plugin_manager = plugin_manager
        self.plugins: list[PluginInfo] = []
        self.warnings: list[str] = []
        self.failures: list[HookFailure] = []
        self.distributions: dict[str, str] = {}  # plugin name -> distribution
        self._tables: dict[str, dict[str, Registered[Any]]] = {}
        self._commands: list[Registered[Any]] | None = None

    # -- hooks -----------------------------------------------------------------

    @property
    def hook(self) -> Any:
        """pluggy's hook relay; calls through it are isolated per implementation."""
        return self.plugin_manager.hook

    def call_hook(self, name: str, *, on_failure: Callable[[HookFailure], None] | None = None,
                  **kwargs: Any) -> list[Any]:
        """Call hook ``name`` through pluggy with keyword arguments; return the
        implementations' answers (pluggy's list, ``None`` answers left out).

        An implementation that raises is skipped: ``on_failure`` receives the
        :class:`HookFailure` (by default: a warning naming the plugin and its
        distribution, and an entry in :attr:`failures`).
        """
        caller = getattr(self.plugin_manager.hook, name)
        with self.reporting(on_failure):
            result = caller(**kwargs)
        return list(result or []) if isinstance(result, list) else [result]

    @contextlib.contextmanager
    def reporting(self, on_failure: Callable[[HookFailure], None] | None) -> Iterator[None]:
        """Within this block, failing hook implementations go to ``on_failure``."""
        token = _failure_handler.set(on_failure)
        try:
            yield
        finally:
            _failure_handler.reset(token)

    def _hook_failed(self, failure: HookFailure) -> None:
        self.failures.append(failure)
        handler = _failure_handler.get()
        if handler is not None:
            handler(failure)
            return
        if failure.hook.startswith("rgym_register_"):
            what = f"failed to register its {failure.hook.removeprefix('rgym_register_')}"
        elif failure.hook == "rgym_cli_commands":
            what = "failed to add its CLI commands"
        else:
            what = f"failed in {failure.hook}"
        self._warn(f"rgym: plugin '{failure.plugin}' from distribution '{failure.distribution}' "
                   f"{what} ({failure.error})")

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        warnings.warn(message, PluginLoadWarning, stacklevel=3)

    # -- tables ----------------------------------------------------------------

    def _build(self, kind: str) -> dict[str, Registered[Any]]:
        table: dict[str, Registered[Any]] = {}
        hook_name = f"rgym_register_{kind}"
        answers, origin = self._attributed_call(hook_name, key=lambda item: _name_of(kind, item))
        for items in answers:
            for item in _as_list(items):
                plugin = origin(item)
                dist = self.distributions.get(plugin, plugin)
                name = _name_of(kind, item)
                if "/" not in name:
                    self._warn(f"rgym: {_SINGULAR[kind]} '{name}' from '{dist}' is not namespaced "
                               f"as 'pack/name'; skipped")
                    continue
                if name in table and table[name].distribution != dist:
                    other = table[name].distribution
                    raise RegistryError(
                        f"{_SINGULAR[kind]} '{name}' is registered by both '{other}' and "
                        f"'{dist}'; uninstall one, or restrict plugins with --plugins / RGYM_PLUGINS")
                table[name] = Registered(name, item, plugin, dist)
        return table

    def _attributed_call(self, hook_name: str, key: Callable[[Any], str] | None = None
                         ) -> tuple[list[Any], Callable[[Any], str]]:
        """Call a registration hook; return its answers and a function naming the
        plugin each returned item came from.  A wrapper may add, drop, reorder or
        replace items: a replaced item keeps its plugin when it keeps its name
        (``key``); an added one is credited to the wrapper's plugin."""
        by_id: dict[int, str] = {}
        by_key: dict[str, str] = {}
        keep: list[Any] = []  # keeps the answers alive so that their ids stay unique

        def sink(plugin: str, answer: Any) -> None:
            keep.append(answer)
            for item in _as_list(answer):
                by_id.setdefault(id(item), plugin)
                if key is not None:
                    try:
                        by_key.setdefault(key(item), plugin)
                    except Exception:  # noqa: BLE001, S110 - a malformed item is reported later
                        pass

        hook = getattr(self.plugin_manager.hook, hook_name)
        wrappers = [i.plugin_name for i in hook.get_hookimpls() if i.wrapper or i.hookwrapper]
        fallback = wrappers[0] if wrappers else BUILTIN
        token = _answer_sink.set(sink)
        try:
            answers = self.call_hook(hook_name)
        finally:
            _answer_sink.reset(token)

        def origin(item: Any) -> str:
            if id(item) in by_id:
                return by_id[id(item)]
            if key is not None:
                try:
                    return by_key.get(key(item), fallback)
                except Exception:  # noqa: BLE001
                    return fallback
            return fallback

        return answers, origin

    def table(self, kind: str) -> dict[str, Registered[Any]]:
        """The table of one kind (``tasks``, ``tools``...), built on first use."""
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        if kind not in self._tables:
            self._tables[kind] = self._build(kind)
        return self._tables[kind]

    @property
    def tasks(self) -> dict[str, Registered[Any]]:
        return self.table("tasks")

    @property
    def datasets(self) -> dict[str, Registered[Any]]:
        return self.table("datasets")

    @property
    def tools(self) -> dict[str, Registered[Any]]:
        return self.table("tools")

    @property
    def agents(self) -> dict[str, Registered[Any]]:
        return self.table("agents")

    @property
    def sandboxes(self) -> dict[str, Registered[Any]]:
        return self.table("sandboxes")

    @property
    def model_providers(self) -> dict[str, Registered[Any]]:
        return self.table("model_providers")

    def load_all(self) -> Registry:
        """Build every table now (raising :class:`RegistryError` on a conflict)."""
        for kind in KINDS:
            self.table(kind)
        return self

    # -- lookups ---------------------------------------------------------------

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
        raise RegistryError(self._unknown(kind, name))

    def _unknown(self, kind: str, name: str) -> str:
        """The one-line message for a name of ``kind`` that no plugin registered: a
        guess when one is close, the packs that failed to load, and where the name
        comes from when a pack declares it (:mod:`rgym_core.provides`)."""
        table = self.table(kind)
        hint = self.install_hint(name)
        message = f"unknown {_SINGULAR[kind]} '{name}'"
        guesses = suggestions(name, table, namespaces=kind == "tools")
        if guesses:
            message += f"; did you mean {' or '.join(guesses)}?"
        notes = [f"pack {dist} failed to load: {error}" for dist, error in self._load_failures(kind)
                 if f"the {dist} pack" not in hint]
        if not guesses and not hint:
            notes.append(f"installed: {', '.join(sorted(table)) or 'none'}")
        if notes:
            message += f" ({'; '.join(notes)})"
        return message + (hint or f"; `rgym list {_LIST_WORD.get(kind, kind)}` shows what is installed")

    def _load_failures(self, kind: str) -> list[tuple[str, str]]:
        """``(distribution, error)`` of each plugin that failed to import, and of each
        whose ``rgym_register_<kind>`` hook raised: what they would have registered is missing."""
        out = [(p.distribution, p.error) for p in self.plugins
               if not p.loaded and p.error is not None and p.error != "disabled"]
        out += [(f.distribution, f.error) for f in self.failures if f.hook == f"rgym_register_{kind}"]
        return list(dict.fromkeys(out))

    def install_hint(self, name: str) -> str:
        """``; it comes with ...`` when a pack declares ``name`` (see :mod:`rgym_core.provides`)."""
        from rgym_core.provides import install_hint

        return install_hint(name, self.plugins)

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

    def create_model_client(self, name: str, *, base_url: str | None = None,
                            **options: Any) -> ModelClient:
        """Build a client for ``provider/model`` through this registry's providers
        (the runner hands this method to agents as ``AgentConfig.create_model_client``).

        Raises :class:`RegistryError` for an unknown provider."""
        if "/" not in name:
            raise ValueError(f"model '{name}' must be named 'provider/model' "
                             f"(e.g. openai-compatible/{name})")
        provider, model = name.split("/", 1)
        spec: ModelProviderSpec = self.model_provider(provider)
        return spec.factory(model, base_url=base_url, **options)

    def cli_commands(self) -> list[Any]:
        """The ``click`` commands plugins add (``rgym_cli_commands``), in pluggy's order."""
        return [r.item for r in self.cli_command_table()]

    def cli_command_table(self) -> list[Registered[Any]]:
        """The plugins' commands with the plugin and distribution of each."""
        if self._commands is None:
            commands: list[Registered[Any]] = []
            answers, origin = self._attributed_call("rgym_cli_commands",
                                                    key=lambda c: str(getattr(c, "name", "")))
            for items in answers:
                for command in _as_list(items):
                    plugin = origin(command)
                    commands.append(Registered(str(getattr(command, "name", "") or ""), command, plugin,
                                               self.distributions.get(plugin, plugin)))
            self._commands = commands
        return self._commands


def create_model_client(name: str, *, base_url: str | None = None, registry: Registry | None = None,
                        **options: Any) -> ModelClient:
    """Build a client for ``provider/model`` through ``registry``'s providers.

    An agent in a run uses the factory the runner hands it
    (``AgentConfig.create_model_client``), bound to the run's registry; without a
    registry (a script, a test) one is loaded for this call, honouring
    ``RGYM_PLUGINS``/``RGYM_DISABLE_PLUGINS``.  Raises :class:`RegistryError` for
    an unknown provider."""
    if registry is None:
        if "/" not in name:
            raise ValueError(f"model '{name}' must be named 'provider/model' "
                             f"(e.g. openai-compatible/{name})")
        registry = load_registry(lazy=True)
    return registry.create_model_client(name, base_url=base_url, **options)


def suggestions(name: str, names: Iterable[str], *, namespaces: bool = False, limit: int = 3) -> list[str]:
    """The registered names closest to a mistyped ``name`` (:mod:`difflib`), at most ``limit``.

    A name without a slash is compared with the short names too (``basline`` ->
    ``baseline/baseline``), and with ``namespaces`` with the packs' namespaces
    (``--tool literatur`` -> ``literature``, which enables the whole pack).
    """
    candidates: dict[str, str] = {}  # what is compared -> what is suggested
    for full in sorted(names):
        candidates.setdefault(full, full)
        namespace, _, short = full.partition("/")
        if "/" not in name:
            candidates.setdefault(short, full)
            if namespaces:
                candidates.setdefault(namespace, namespace)
    close = difflib.get_close_matches(name, list(candidates), n=limit * 2, cutoff=0.75)
    return list(dict.fromkeys(candidates[c] for c in close))[:limit]


def _as_list(items: Any) -> list[Any]:
    if items is None:
        return []
    if isinstance(items, list | tuple):
        return list(items)
    return [items]


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    """The ``rgym`` entry points that ``importlib.metadata.entry_points(group=...)``
    returns (the first distribution of each name on ``sys.path``), sorted by name.

    Only the distributions whose ``entry_points.txt`` mentions the group have it
    parsed: the standard call parses every installed distribution's entry points,
    most of the discovery time in an environment with many distributions.  Where
    ``importlib.metadata`` lacks the helper that picks one distribution per name,
    the standard call is used.
    """
    unique = getattr(importlib.metadata, "_unique", None)
    if unique is None:
        found = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    else:
        found = []
        for dist in unique(importlib.metadata.distributions()):
            text = dist.read_text("entry_points.txt")
            if text and ENTRY_POINT_GROUP in text:
                found.extend(dist.entry_points.select(group=ENTRY_POINT_GROUP))
    return sorted(found, key=lambda e: e.name)


def _name_and_version(dist: importlib.metadata.Distribution) -> tuple[str, str]:
    """``(dist.name, dist.version)``, read from the plain one-line ``Name:`` and
    ``Version:`` headers of the metadata file (parsing it as email costs more than
    the rest of a plugin's discovery).  Anything unusual (a folded header, a line
    that is no header before both are found, a carriage return) leaves it to
    ``dist.metadata``, which ``dist.name`` and ``dist.version`` read."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    lines = text.split("\n") if "\r" not in text else []
    found: dict[str, str] = {}
    for i, line in enumerate(lines):
        if not line or len(found) == 2:  # the end of the headers, or all we need
            break
        if line[0] in " \t":  # the continuation of another header
            continue
        key, sep, value = line.partition(":")
        if not sep or not _HEADER_NAME.fullmatch(key):
            break
        key = key.lower()
        if key in ("name", "version") and key not in found:
            if lines[i + 1:i + 2] and lines[i + 1][:1] in (" ", "\t"):
                break  # folded
            found[key] = value.lstrip(" \t")
    if len(found) == 2:
        return found["name"], found["version"]
    metadata = dist.metadata
    return metadata["Name"], metadata["Version"]


#: A header name as the email parser recognises one (printable, no space or colon).
_HEADER_NAME = re.compile(r"[\041-\071\073-\176]+")


def _selected(ep_name: str, dist: str, only: list[str], disabled: list[str]) -> bool:
    if ep_name == BUILTIN:
        return True
    if ep_name in disabled or dist in disabled:
        return False
    return not only or ep_name in only or dist in only


def load_registry(*, only: Iterable[str] | None = None, disabled: Iterable[str] | None = None,
                  extra_plugins: Iterable[tuple[str, Any]] = (), entry_points: bool = True,
                  lazy: bool = False) -> Registry:
    """Discover plugins and build the registry.

    ``only``/``disabled`` default to the ``RGYM_PLUGINS``/``RGYM_DISABLE_PLUGINS``
    environment variables.  ``extra_plugins`` are ``(name, module_or_object)``
    pairs registered as if they came from a distribution of that name (for tests
    and embedding).  Unless ``lazy``, every table is built before returning, so a
    name registered by two distributions raises :class:`RegistryError` here; with
    ``lazy`` (the CLI), each table is built when first read.
    """
    only_list = list(only) if only is not None else _split_env(os.environ.get("RGYM_PLUGINS"))
    disabled_list = (list(disabled) if disabled is not None
                     else _split_env(os.environ.get("RGYM_DISABLE_PLUGINS")))
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    registry = Registry(pm)

    def register(plugin: Any, name: str, dist: str) -> None:
        pm.register(_GuardedPlugin(plugin, name, dist, registry), name=name)
        registry.distributions[name] = dist

    found = _entry_points() if entry_points else []
    if not any(ep.name == BUILTIN for ep in found):
        # Running from a source tree that is not installed: register the built-ins directly.
        # Loaded by name, as the entry point would: the built-in plugin sits above the registry.
        register(importlib.import_module(BUILTIN_MODULE), BUILTIN, CORE_DISTRIBUTION)
        registry.plugins.append(PluginInfo(BUILTIN, CORE_DISTRIBUTION, _version(CORE_DISTRIBUTION), True))
    for ep in found:
        dist, version = _name_and_version(ep.dist) if ep.dist is not None else (ep.name, "")
        if not _selected(ep.name, dist, only_list, disabled_list):
            registry.plugins.append(PluginInfo(ep.name, dist, version, False, "disabled"))
            continue
        if ep.name in registry.distributions:
            registry._warn(f"rgym: plugin name '{ep.name}' from distribution '{dist}' is already "
                           f"used by '{registry.distributions[ep.name]}'; skipped")
            continue
        try:
            plugin = ep.load()
            register(plugin, ep.name, dist)
        except Exception as exc:  # noqa: BLE001 - any import failure becomes one warning
            summary = _summary(exc)
            registry._warn(f"rgym: plugin '{ep.name}' from distribution '{dist}' failed to load "
                           f"({summary}); its tasks, tools and agents are unavailable")
            registry.plugins.append(PluginInfo(ep.name, dist, version, False, summary))
            continue
        registry.plugins.append(PluginInfo(ep.name, dist, version, True))
    known_names = {p.name for p in registry.plugins} | {p.distribution for p in registry.plugins}
    for wanted in [*only_list, *disabled_list]:
        if wanted not in known_names:
            registry._warn(f"rgym: no installed plugin is called '{wanted}' (see `rgym list plugins`)")
    for name, plugin in extra_plugins:
        register(plugin, name, name)
        registry.plugins.append(PluginInfo(name, name, "", True))
    if not lazy:
        registry.load_all()
    return registry


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "dev"
