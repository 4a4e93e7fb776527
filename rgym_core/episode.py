"""What lifecycle hooks receive about a running episode, and how they are called.

The lifecycle hooks (``rgym_episode_start``, ``rgym_step``, ``rgym_episode_end``;
see :mod:`rgym_core.hookspecs`) are called through pluggy, so plugins get
pluggy's whole contract: an implementation names only the arguments it wants
(``def rgym_step(step)``), ``tryfirst``/``trylast`` order the calls, and
``wrapper=True`` (or old-style ``hookwrapper=True``) implementations wrap the
others.  On top of that, :class:`LifecycleHooks` isolates every implementation:
an observer that raises is reported (``on_error``) and the other observers and
the episode go on.  It does so by registering, in a private plugin manager, one
guarded copy of each plugin's lifecycle implementations (same name, same
signature, same options) and calling the hook there: the calling itself is
pluggy's.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pluggy
from attrs import define, field

from rgym_core import hookspecs
from rgym_core.agents import EpisodeStatus
from rgym_core.specs import Budget, TaskSpec

#: The hooks the runner calls during an episode.
LIFECYCLE_HOOKS = ("rgym_episode_start", "rgym_step", "rgym_episode_end")

#: ``on_error(hook, plugin name, exception)``.
ErrorHandler = Callable[[str, str, BaseException], None]


@define
class EpisodeInfo:
    """Facts about one episode, passed to every lifecycle hook."""

    run_id: str
    run_dir: Path
    task: TaskSpec
    agent: str
    model: str | None
    sandbox: str
    budget: Budget
    seed: int | None
    status: EpisodeStatus
    tools: list[str] = field(factory=list)
    extras: dict[str, Any] = field(factory=dict)
    profile: str | None = None


def _impl_opts(impl: Any) -> dict[str, Any]:
    opts = dict(getattr(impl, "opts", {}) or {})
    opts.pop("specname", None)
    return opts


def _guard_plain(hook: str, plugin: str, function: Callable[..., Any],
                 on_error: ErrorHandler) -> Callable[..., Any]:
    @functools.wraps(function)
    def guarded(*args: Any) -> Any:
        try:
            return function(*args)
        except Exception as exc:  # noqa: BLE001 - an observer never ends an episode
            on_error(hook, plugin, exc)
            return None

    return guarded


def _guard_wrapper(hook: str, plugin: str, function: Callable[..., Any],
                   on_error: ErrorHandler) -> Callable[..., Any]:
    """A generator that runs ``function``'s wrapper generator, isolating its errors
    before and after the ``yield``; works for ``wrapper=True`` (the value sent in is
    the result, the generator's return value replaces it) and for old-style
    ``hookwrapper=True`` (the value sent in is pluggy's ``Result``)."""

    @functools.wraps(function)
    def guarded(*args: Any) -> Generator[None, Any, Any]:
        try:
            inner = function(*args)
            next(inner)
        except StopIteration:
            on_error(hook, plugin, RuntimeError("the wrapper did not yield"))
            inner = None
        except Exception as exc:  # noqa: BLE001
            on_error(hook, plugin, exc)
            inner = None
        try:
            sent = yield
        except BaseException as exc:  # an inner failure that pluggy throws in
            if inner is None:
                raise
            try:
                inner.throw(exc)
            except StopIteration as stop:
                return stop.value
            raise
        if inner is None:
            return sent
        try:
            inner.send(sent)
        except StopIteration as stop:
            return stop.value
        except Exception as exc:  # noqa: BLE001
            on_error(hook, plugin, exc)
            return sent
        inner.close()
        on_error(hook, plugin, RuntimeError("the wrapper yielded more than once"))
        return sent

    return guarded


class LifecycleHooks:
    """Calls the lifecycle hooks of every plugin through pluggy, each implementation
    isolated (see the module docstring); ``on_error(hook, plugin, exception)``
    receives each failure.

    With a registry whose hooks are already isolated (``Registry.call_hook``) the
    calls go there; otherwise guarded copies of the plugins' lifecycle
    implementations are registered in a private plugin manager.
    """

    def __init__(self, registry: Any, on_error: ErrorHandler) -> None:
        self._on_error = on_error
        self._registry_call = getattr(registry, "call_hook", None)
        self._pm: pluggy.PluginManager | None = None
        if not callable(self._registry_call):
            self._registry_call = None
            self._pm = _guarded_manager(registry.plugin_manager, on_error)

    def call(self, hook: str, **kwargs: Any) -> list[Any]:
        """Call ``hook`` with ``kwargs`` (pluggy passes each implementation the
        arguments it names); returns the non-``None`` results."""
        if hook not in LIFECYCLE_HOOKS:
            raise ValueError(f"{hook!r} is not a lifecycle hook ({', '.join(LIFECYCLE_HOOKS)})")
        try:
            if self._registry_call is not None:
                def failed(failure: Any) -> None:
                    self._on_error(failure.hook, failure.plugin, failure.exception)

                return list(self._registry_call(hook, on_failure=failed, **kwargs) or [])
            assert self._pm is not None
            return list(getattr(self._pm.hook, hook)(**kwargs) or [])
        except Exception as exc:  # noqa: BLE001 - e.g. a wrapper that broke pluggy's protocol
            self._on_error(hook, "(pluggy)", exc)
            return []


def _guarded_manager(source: pluggy.PluginManager, on_error: ErrorHandler) -> pluggy.PluginManager:
    """A plugin manager holding a guarded copy of each plugin's lifecycle hooks."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    marker = f"{hookspecs.PROJECT}_impl"
    for name, plugin in source.list_name_plugin():
        if plugin is None:  # blocked
            continue
        proxy = types.SimpleNamespace()
        for hook in LIFECYCLE_HOOKS:
            caller = getattr(source.hook, hook, None)
            if caller is None:
                continue
            for impl in caller.get_hookimpls():
                if impl.plugin is not plugin:
                    continue
                opts = _impl_opts(impl)
                guard = _guard_wrapper if opts.get("wrapper") or opts.get("hookwrapper") else _guard_plain
                function = guard(hook, name, impl.function, on_error)
                setattr(function, marker, opts)
                setattr(proxy, hook, function)
        if vars(proxy):
            try:
                pm.register(proxy, name=name)
            except Exception as exc:  # noqa: BLE001 - pluggy refused the plugin
                on_error("register", name, exc)
    return pm
