"""A test plugin that uses pluggy's documented contract: implementations naming a
subset of a hook's arguments, a ``wrapper=True`` implementation, ``tryfirst``,
and one broken registration hook.  Lifecycle calls are appended to the file
named by ``RGYM_OBSERVER_LOG``."""

from __future__ import annotations

import json
import os

import attrs

from rgym_core import hookimpl


def _log(event: str, **data: object) -> None:
    path = os.environ.get("RGYM_OBSERVER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"event": event, **data}) + "\n")


@hookimpl(wrapper=True)
def rgym_register_tasks():  # type: ignore[no-untyped-def]
    """Sees every plugin's tasks and tags them: wrappers run around the others."""
    answers = yield
    return [[attrs.evolve(t, tags=[*t.tags, "observed"]) for t in answer] for answer in answers]


@hookimpl
def rgym_register_agents():  # type: ignore[no-untyped-def]
    raise RuntimeError("this registration hook is broken on purpose")


@hookimpl(tryfirst=True)
def rgym_episode_start(episode):  # type: ignore[no-untyped-def]
    _log("start", task=episode.task.id if hasattr(episode.task, "id") else str(episode.task))


@hookimpl
def rgym_step(step):  # type: ignore[no-untyped-def]
    """Names only ``step``: pluggy passes only that."""
    _log("step", tool=step.action.tool)


@hookimpl(wrapper=True)
def rgym_episode_end(result):  # type: ignore[no-untyped-def]
    _log("end-before", status=str(result.status))
    outcome = yield
    _log("end-after")
    return outcome
