"""One Inspect sample as one rgym episode: the bridge agent and the episode's thread.

:class:`BridgedEpisode` runs :func:`rgym_core.run_episode` in a thread of its own with
an :class:`InspectAgent`, whose ``act`` takes its next action from a queue that the
``rgym`` sandbox's ``exec`` feeds (:meth:`BridgedEpisode.act`).  Each action goes
through rgym's step loop (its tools, budgets, ``trajectory.jsonl``, the plugins'
lifecycle hooks, so the integrity monitor), and its observation comes back to the
waiting ``exec`` from the runner's ``step`` progress event.

:meth:`BridgedEpisode.finish` ends the episode: the agent submits (or, for a sample
that ended without being scored, stops with an error), and the runner does its real
final grading (processes killed, the workspace frozen and archived, the machine's
grader secret, the confined grader) and writes ``result.json``.  An episode that a
budget ended first (steps, wall-clock, cost) answers every later action with
:class:`EpisodeEnded`.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from rgym_core import (
    Action,
    BudgetExceeded,
    EndReason,
    EpisodeResult,
    Observation,
    Registry,
    RunConfig,
    Sandbox,
    TaskContext,
    Usage,
    hookimpl,
    run_episode,
)


class EpisodeEnded(RuntimeError):
    """The rgym episode has ended: nothing more runs in its sandbox."""


class SampleEnded(RuntimeError):
    """Raised by the bridge agent when the Inspect sample ended without a submission;
    the runner records it as the agent's stop and still grades the workspace."""


class _Stop:
    """The last item of the queue: submit (``message`` None) or stop with ``message``;
    ``usage``: the model's usage since the last action."""

    def __init__(self, message: str | None = None, usage: Usage | None = None) -> None:
        self.message = message
        self.usage = usage or Usage()


class InspectAgent:
    """The rgym agent of an Inspect sample: its actions are those Inspect's tools ask
    for, in the order they arrive.  It waits for the next one at most as long as the
    episode's wall-clock budget has left, then stops with ``BudgetExceeded("time")``."""

    def __init__(self) -> None:
        self.requests: queue.Queue[tuple[Action, Future[Observation]] | _Stop] = queue.Queue()
        self.context: TaskContext | None = None
        #: The future of the action the runner is executing (answered by its ``step`` event).
        self.current: Future[Observation] | None = None

    def start(self, context: TaskContext) -> None:
        self.context = context

    def act(self, observation: Observation) -> Action:
        left = self.context.status.time_left_s if self.context is not None else None
        try:
            item = self.requests.get(timeout=left)
        except queue.Empty:
            raise BudgetExceeded(EndReason.TIME, "the wall-clock budget ran out while the "
                                                 "Inspect agent was thinking") from None
        if isinstance(item, _Stop):
            if item.message is None:
                return Action(tool="submit", usage=item.usage)
            raise SampleEnded(item.message)
        action, future = item
        self.current = future
        return action


#: The bridged episode of each episode thread, for :class:`EpisodePlugin`.
_BY_THREAD: dict[int, BridgedEpisode] = {}


class EpisodePlugin:
    """An rgym plugin object (``load_registry(extra_plugins=...)``) that hands each
    bridged episode its sandbox when the episode starts (``rgym_episode_start``)."""

    @hookimpl
    def rgym_episode_start(self, episode: Any) -> None:
        bridged = _BY_THREAD.get(threading.get_ident())
        if bridged is not None:
            bridged.started(episode.sandbox_handle, Path(episode.run_dir))


class BridgedEpisode:
    """One rgym episode whose agent is an Inspect sample, run in its own thread."""

    def __init__(self, config: RunConfig, registry: Registry) -> None:
        self.config = config
        self.registry = registry
        self.agent = InspectAgent()
        #: The episode's sandbox (``None`` before it starts and after it ends).
        self.sandbox: Sandbox | None = None
        self.run_dir: Path | None = None
        self.result: EpisodeResult | None = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._ended = False
        self._ended_why = ""
        self._thread: threading.Thread | None = None

    # -- life ------------------------------------------------------------------

    @property
    def begun(self) -> bool:
        """Whether :meth:`start` was called."""
        return self._thread is not None

    def start(self) -> None:
        """Start the episode (once) and wait until its agent can act; raises the
        runner's ``RunError`` when the episode cannot be set up."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"rgym-episode-{self.config.task}",
                                                daemon=True)
                self._thread.start()
        self._ready.wait()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        _BY_THREAD[threading.get_ident()] = self
        try:
            self.result = run_episode(self.config, self.registry, agent=self.agent, progress=self._progress)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the episode
            self.error = exc
        finally:
            _BY_THREAD.pop(threading.get_ident(), None)
            self._end()

    def started(self, sandbox: Sandbox, run_dir: Path) -> None:
        """The runner started the episode (its sandbox is laid out, the agent next)."""
        self.sandbox, self.run_dir = sandbox, run_dir
        self._ready.set()

    def _progress(self, event: str, data: dict[str, Any]) -> None:
        if event == "step":
            future, self.agent.current = self.agent.current, None
            if future is not None and not future.done():
                future.set_result(data["step"].observation)
        elif event == "end":
            self.result = data["result"]
            self._end()

    def _end(self) -> None:
        """The episode ended: answer every waiting action with :class:`EpisodeEnded`."""
        with self._lock:
            if not self._ended:
                self._ended = True
                self.sandbox = None
                self._ended_why = self._why()
            pending = [self.agent.current] if self.agent.current is not None else []
            self.agent.current = None
            while True:
                try:
                    item = self.agent.requests.get_nowait()
                except queue.Empty:
                    break
                if not isinstance(item, _Stop):
                    pending.append(item[1])
        for future in pending:
            if not future.done():
                future.set_exception(EpisodeEnded(self._ended_why))
        self._ready.set()

    def _why(self) -> str:
        if self.result is None:
            return f"the rgym episode could not run: {self.error}"
        reason = self.result.end_reason.value if self.result.end_reason else self.result.status.value
        return (f"the rgym episode has ended ({reason}): no more commands run in its sandbox; "
                f"the workspace was graded (run directory {self.result.run_dir})")

    # -- actions ---------------------------------------------------------------

    def act(self, action: Action) -> Future[Observation]:
        """Queue ``action`` for the episode; the future gets its observation, or
        :class:`EpisodeEnded`.  Starts the episode first if it has not started."""
        self.start()
        future: Future[Observation] = Future()
        with self._lock:
            if self._ended:
                raise EpisodeEnded(self._ended_why)
            self.agent.requests.put((action, future))
        return future

    def live_sandbox(self) -> Sandbox:
        """The episode's sandbox, for Inspect's file reads and writes (which are not
        steps); raises :class:`EpisodeEnded` once the episode has ended."""
        self.start()
        sandbox = self.sandbox
        if sandbox is None:
            raise EpisodeEnded(self._ended_why)
        return sandbox

    def finish(self, stop_message: str | None = None, usage: Usage | None = None) -> EpisodeResult:
        """End the episode and wait for its final grading: the agent submits
        (``stop_message`` None; ``usage``: the model's since the last action) or stops
        with ``stop_message``.  Returns the result (an episode a budget ended earlier
        is returned as it ended)."""
        self.start()
        with self._lock:
            if not self._ended:
                self.agent.requests.put(_Stop(stop_message, usage))
        assert self._thread is not None
        self._thread.join()
        if self.result is None:
            raise EpisodeEnded(self._why())
        return self.result


__all__ = ["BridgedEpisode", "EpisodeEnded", "EpisodePlugin", "InspectAgent", "SampleEnded"]
