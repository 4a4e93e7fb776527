"""What lifecycle hooks receive about a running episode, and how they are called.

The lifecycle hooks (``rgym_episode_start``, ``rgym_step``, ``rgym_episode_end``;
see :mod:`rgym_core.hookspecs`) are called through pluggy, so plugins get
pluggy's whole contract: an implementation names only the arguments it wants
(``def rgym_step(step)``), ``tryfirst``/``trylast`` order the calls, and
``wrapper=True`` (or old-style ``hookwrapper=True``) implementations wrap the
others.  On top of that, :class:`LifecycleHooks` isolates every implementation:
an observer that raises is reported (``on_error``) and the other observers and
the episode go on (the registry registers every plugin with each implementation
guarded, and pluggy does the calling).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core.agents import EpisodeStatus
from rgym_core.specs import Budget, PreparedDataset, TaskSpec

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
    #: The live :class:`~rgym_core.sandbox.Sandbox` (read the workspace through its
    #: API: ``exec``, ``read_file``...); ``None`` once it is removed, which happens
    #: before ``rgym_episode_end`` (``workspace.tar.gz`` holds the final workspace).
    sandbox_handle: Any = None
    #: The task's datasets as prepared on the host, by mount (a dataset's
    #: ``private`` part reaches only the grader).
    datasets: dict[str, PreparedDataset] = field(factory=dict)


class LifecycleHooks:
    """Calls the lifecycle hooks of every plugin through the registry's pluggy
    manager (:meth:`~rgym_core.registry.Registry.call_hook`): pluggy selects each
    implementation's arguments, orders the calls and runs the wrappers, and an
    implementation that raises is reported to ``on_error(hook, plugin,
    exception)`` while the others and the episode go on."""

    def __init__(self, registry: Any, on_error: ErrorHandler) -> None:
        self._registry = registry
        self._on_error = on_error

    def _failed(self, failure: Any) -> None:
        self._on_error(failure.hook, failure.plugin, failure.exception)

    def call(self, hook: str, **kwargs: Any) -> list[Any]:
        """Call ``hook`` with ``kwargs``; returns the implementations' answers."""
        if hook not in LIFECYCLE_HOOKS:
            raise ValueError(f"{hook!r} is not a lifecycle hook ({', '.join(LIFECYCLE_HOOKS)})")
        try:
            return list(self._registry.call_hook(hook, on_failure=self._failed, **kwargs))
        except Exception as exc:  # noqa: BLE001 - e.g. a wrapper that broke pluggy's protocol
            self._on_error(hook, "(pluggy)", exc)
            return []
