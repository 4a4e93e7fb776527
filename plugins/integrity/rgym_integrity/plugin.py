"""The ``integrity`` plugin: lifecycle hooks that monitor every episode, the check
of a run ``rgym grade`` graded (``rgym_run_graded``), the ``rgym audit`` command,
and a section for ``rgym show RUN_DIR``.

This module imports nothing but the standard library and ``rgym_core.hookimpl``:
the monitor is imported by the first episode that starts.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from rgym_core import hookimpl

#: ``RGYM_INTEGRITY=off`` (or 0, false, no) turns the monitor off.
ENV_SWITCH = "RGYM_INTEGRITY"

_monitors: dict[str, Any] = {}
_lock = threading.Lock()


def enabled(episode: Any = None) -> bool:
    """Whether episodes are monitored (the environment switch, then the task's setting)."""
    if os.environ.get(ENV_SWITCH, "").strip().lower() in ("0", "off", "false", "no", "disabled"):
        return False
    spec = getattr(getattr(episode, "task", None), "integrity", None)
    return bool(getattr(spec, "enabled", True))


def _key(episode: Any) -> str:
    return f"{getattr(episode, 'run_id', '')}:{id(episode)}"


@hookimpl
def rgym_episode_start(episode: Any) -> None:
    if not enabled(episode):
        return
    from rgym_integrity.monitor import EpisodeMonitor

    monitor = EpisodeMonitor.start(episode)
    with _lock:
        _monitors[_key(episode)] = monitor


@hookimpl
def rgym_step(episode: Any, step: Any) -> None:
    with _lock:
        monitor = _monitors.get(_key(episode))
    if monitor is not None:
        monitor.step(step)


@hookimpl
def rgym_episode_end(episode: Any, result: Any) -> None:
    with _lock:
        monitor = _monitors.pop(_key(episode), None)
    if monitor is not None:
        monitor.finish(result)


@hookimpl
def rgym_run_graded(run_dir: Path, result: Any) -> None:
    """``rgym grade`` graded ``run_dir``: check it after the fact (the live monitor's
    record in ``integrity.json`` is kept), write ``integrity.json`` and the summary."""
    if os.environ.get(ENV_SWITCH, "").strip().lower() in ("0", "off", "false", "no", "disabled"):
        return
    from rgym_integrity.analyze import check_graded_run

    check_graded_run(Path(run_dir), result)


@hookimpl
def rgym_cli_commands() -> list[Any]:
    from rgym_core import lazy_command

    return [lazy_command("audit", "rgym_integrity.cli:audit",
                         "Check run directories for forged, leaked or reused results.")]


@hookimpl
def rgym_run_sections(run_dir: Path) -> list[dict[str, Any]]:
    from rgym_integrity.render import run_section

    section = run_section(Path(run_dir))
    return [section] if section is not None else []
