"""Executors run a sweep's episodes: the local one (threads in this process) is
built in; Ray and Slurm come from the ``rgym-executors`` plugin.

Every executor is registered through the ``rgym_register_executors`` hook as an
:class:`ExecutorSpec` and gets :class:`EpisodeJob` objects (a cell, its
:class:`~rgym_core.runner.RunConfig` with ``run_dir`` set to the cell's folder,
the attempt number).  The sweep engine calls :meth:`Executor.submit` while
:attr:`Executor.capacity` allows and :meth:`Executor.poll` for
:class:`JobUpdate` objects; a job's run directory must appear in its final place
whole (written there by the runner, or moved there in one ``rename``), so a
killed sweep never leaves a half-copied run that looks finished.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import queue
import threading
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core.sweep.matrix import Cell


@define
class EpisodeJob:
    """One attempt at one cell."""

    cell: Cell
    #: The episode's :class:`~rgym_core.runner.RunConfig` (``run_dir``: the cell's folder).
    config: Any
    attempt: int = 1
    #: Continue the interrupted episode in ``config.run_dir`` (``rgym run --resume``)
    #: instead of starting one; only sent to an executor whose class sets
    #: ``resumes_in_place``.
    resume: bool = False

    @property
    def key(self) -> str:
        return self.cell.key


@define
class JobUpdate:
    """What an executor reports about a job: ``started``, ``step`` (with the cost so
    far) or ``finished`` (with ``error`` when the episode could not produce a result)."""

    key: str
    kind: str
    step: int | None = None
    cost_usd: float | None = None
    error: str | None = None
    detail: dict[str, Any] = field(factory=dict)


@define
class ExecutorOptions:
    """What every executor is given (``options``: ``--executor-option KEY=VALUE``)."""

    max_parallel: int = 4
    max_connections: int | None = None
    address: str | None = None
    sweep_dir: Path | None = None
    options: dict[str, Any] = field(factory=dict)


class Executor:
    """The interface of an executor (subclass it)."""

    name = "executor"
    #: True when the executor runs ``EpisodeJob(resume=True)``: it continues the cell's
    #: interrupted run directory where it lies (this machine, the sweep's folder).
    #: Otherwise the sweep moves an interrupted cell aside and runs it again.
    resumes_in_place = False

    def __init__(self, options: ExecutorOptions) -> None:
        self.options = options

    @property
    def capacity(self) -> int:
        """How many jobs may be in flight at once."""
        return max(1, self.options.max_parallel)

    def start(self, registry: Any) -> None:
        """Connect or start workers (called once, before the first job)."""

    def submit(self, job: EpisodeJob) -> None:
        raise NotImplementedError

    def adopt(self, cells: list[Cell]) -> list[str]:
        """Take over jobs of ``cells`` that an earlier, killed invocation left queued or
        running (a batch system's jobs outlive the sweep's process); returns their keys,
        which the engine then watches instead of submitting them again."""
        return []

    def poll(self, timeout: float) -> list[JobUpdate]:
        """Updates since the last call, waiting up to ``timeout`` seconds for the first."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop the jobs in flight as soon as possible (they end ``cancelled`` where the
        episode can still write its result); later polls report them finished."""

    def close(self) -> None:
        """Release workers and connections."""

    def describe(self) -> str:
        return self.name


@define(frozen=True)
class ExecutorSpec:
    """A registered executor: ``factory(options) -> Executor``."""

    name: str
    factory: Callable[[ExecutorOptions], Executor]
    description: str = ""


# ------------------------------------------------------------------------ shared helpers


@define(frozen=True)
class JobRequirements:
    """What one episode asks of a cluster, from its task (and profile) and the sweep's
    options: CPUs, memory, GPUs, and a wall-clock limit for the whole job."""

    cpus: float = 1.0
    memory_mb: int | None = None
    gpus: int = 0
    #: The episode's time budget plus its grading and a set-up margin (``None``: unlimited).
    time_limit_s: float | None = None


#: Seconds added to an episode's budget for the sandbox set-up, archiving and start-up.
SETUP_MARGIN_S = 300.0


def job_requirements(registry: Any, config: Any) -> JobRequirements:
    """The :class:`JobRequirements` of the episode ``config`` describes."""
    task = registry.task(config.task).with_profile(config.profile)
    res = task.resources
    cpus = config.cpus if config.cpus is not None else (res.cpus or 1.0)
    memory = config.memory_mb if config.memory_mb is not None else res.memory_mb
    gpus = res.gpus
    if config.gpus not in (None, ""):
        gpus = int(config.gpus) if str(config.gpus).isdigit() else gpus
    budget = task.budget.merged(time_limit_s=config.time_limit_s)
    limit = None
    if budget.time_limit_s is not None:
        grading = float(getattr(task.grader, "timeout_s", None) or 0.0)
        limit = float(budget.time_limit_s) + grading * 2 + SETUP_MARGIN_S
    return JobRequirements(cpus=float(cpus), memory_mb=int(memory) if memory else None, gpus=int(gpus),
                           time_limit_s=limit)


def lock_root() -> Path:
    """Where machine-wide sweep locks live (in rgym's cache folder)."""
    from rgym_core.datasets import cache_root

    return cache_root() / "locks"


@contextmanager
def file_lock(name: str) -> Iterator[None]:
    """A machine-wide exclusive lock (``flock`` on a file in :func:`lock_root`),
    between threads and processes alike: each acquisition opens the file anew."""
    folder = lock_root()
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def dataset_ids(episode: Any) -> list[str]:
    """The datasets an episode prepares (the task's, and ``--dataset`` replacements)."""
    ids = {m.id for m in episode.task.datasets}
    for name in getattr(episode.config, "datasets", {}).values():
        try:
            ids.add(episode.registry.dataset(name).id)
        except Exception:  # noqa: BLE001 - preflight reports unknown names
            ids.add(str(name))
    return sorted(ids)


@contextmanager
def preparing(episode: Any) -> Iterator[None]:
    """Hold the locks of the episode's datasets while it prepares them, so two
    episodes (threads, processes, workers of one machine) never write one cache
    at the same time."""
    with ExitStack() as stack:
        for dataset in dataset_ids(episode):
            digest = hashlib.sha256(dataset.encode()).hexdigest()[:16]
            stack.enter_context(file_lock(f"dataset-{digest}.lock"))
        yield


class ConnectionLimiter:
    """At most ``limit`` concurrent requests per model (``provider/model``) in this process."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()
        self.active: dict[str, int] = {}
        self.peak: dict[str, int] = {}

    @contextmanager
    def slot(self, model: str) -> Iterator[None]:
        if self.limit is None:
            yield
            return
        with self._lock:
            sem = self._slots.setdefault(model, threading.BoundedSemaphore(self.limit))
        with sem:
            with self._lock:
                self.active[model] = self.active.get(model, 0) + 1
                self.peak[model] = max(self.peak.get(model, 0), self.active[model])
            try:
                yield
            finally:
                with self._lock:
                    self.active[model] -= 1

    def wrap(self, agent: Any) -> None:
        """Route every request of the agent's model clients through :meth:`slot`."""
        if self.limit is None or agent is None:
            return
        from rgym_core.models import model_clients_of

        for client in model_clients_of(agent):
            original = client.complete
            if getattr(original, "_rgym_limited", False):
                continue
            name = f"{getattr(client, 'provider', '') or ''}/{getattr(client, 'model', '?')}"

            def complete(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
                with self.slot(_name):
                    return _original(*args, **kwargs)

            complete._rgym_limited = True  # type: ignore[attr-defined]
            try:
                client.complete = complete
            except AttributeError:  # a client with __slots__ or a read-only attribute
                continue


def prepared_agent(episode: Any) -> Any:
    """The agent a prepared :class:`~rgym_core.runner.Episode` built (``Episode.agent``)."""
    return getattr(episode, "agent", None)


def raise_in_thread(thread_id: int, exc_type: type[BaseException]) -> bool:
    """Raise ``exc_type`` in another Python thread at its next bytecode (how a sweep
    stops an episode blocked in a long action)."""
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc_type))
    if done > 1:  # should not happen: undo
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)
        return False
    return done == 1


class SweepInterrupt(KeyboardInterrupt):
    """Raised inside an episode's thread when the sweep is stopped (the runner records
    the episode as cancelled, as for Ctrl-C)."""

    def __str__(self) -> str:
        return "SIGINT"


# ------------------------------------------------------------------------ local executor


#: Episode phases (the runner's last progress event) in which an episode may be
#: interrupted at once: inside the runner's agent loop, which records it as cancelled.
_INTERRUPTIBLE = ("start", "action", "step")


class _Running:
    def __init__(self, job: EpisodeJob) -> None:
        self.job = job
        self.thread_id: int | None = None
        self.phase = "queued"
        self.interrupted = False


class LocalExecutor(Executor):
    """Episodes as threads of this process: one registry, one set of imports, no
    start-up per episode.  ``--max-parallel`` threads; ``--max-connections``
    requests at once per model.  Each episode has its own run directory, sandbox
    (its own workspace, and under bubblewrap its own leased uid and network
    namespace, so no shared port), event loop and model clients; dataset caches
    are prepared under a machine-wide lock."""

    name = "local"
    resumes_in_place = True

    def __init__(self, options: ExecutorOptions) -> None:
        super().__init__(options)
        self.limiter = ConnectionLimiter(options.max_connections)
        self._updates: queue.Queue[JobUpdate] = queue.Queue()
        self._pool: ThreadPoolExecutor | None = None
        self._running: dict[str, _Running] = {}
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self.registry: Any = None

    def start(self, registry: Any) -> None:
        self.registry = registry
        registry.load_all()  # every table built once, before threads read them
        self._pool = ThreadPoolExecutor(max_workers=self.capacity, thread_name_prefix="rgym-episode")

    def submit(self, job: EpisodeJob) -> None:
        assert self._pool is not None, "start() first"
        running = _Running(job)
        with self._lock:
            self._running[job.key] = running
        self._pool.submit(self._run, running)

    def poll(self, timeout: float) -> list[JobUpdate]:
        out: list[JobUpdate] = []
        try:
            out.append(self._updates.get(timeout=timeout))
            while True:
                out.append(self._updates.get_nowait())
        except queue.Empty:
            pass
        return out

    def cancel(self) -> None:
        self._cancelled.set()
        with self._lock:
            running = list(self._running.values())
        for item in running:
            # an episode in its agent loop (waiting for the model, or inside a tool call)
            # is stopped there; one setting up or grading stops at its next step (the
            # progress callback raises), so writing the result is never cut
            if item.phase in _INTERRUPTIBLE and item.thread_id is not None and not item.interrupted:
                item.interrupted = True
                raise_in_thread(item.thread_id, SweepInterrupt)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def describe(self) -> str:
        limit = self.options.max_connections
        return (f"local, {self.capacity} at a time"
                + (f", {limit} request(s) at a time per model" if limit else ""))

    # -- in the worker thread ---------------------------------------------------------
    def _progress(self, running: _Running) -> Callable[[str, dict[str, Any]], None]:
        key = running.job.key

        def update(event: str, data: dict[str, Any]) -> None:
            if event in ("action", "step", "start") and self._cancelled.is_set():
                running.phase = "stopping"
                raise SweepInterrupt()
            running.phase = event
            status = data.get("status")
            if event == "step" and status is not None:
                self._updates.put(JobUpdate(key, "step", step=getattr(status, "steps", None),
                                            cost_usd=status.usage.cost_usd))
            elif event == "grading":
                self._updates.put(JobUpdate(key, "grading"))

        return update

    def _run(self, running: _Running) -> None:
        from rgym_core.runner import Episode, RunError

        job = running.job
        running.thread_id = threading.get_ident()
        try:
            if self._cancelled.is_set():
                self._updates.put(JobUpdate(job.key, "finished", error="cancelled before it started",
                                            detail={"cancelled": True}))
                return
            self._updates.put(JobUpdate(job.key, "started"))
            try:
                resume = None
                if job.resume:
                    from rgym_core.resume import ResumeError, plan_resume

                    try:
                        resume = plan_resume(job.config.run_dir, self.registry)
                    except ResumeError as exc:
                        raise RunError(str(exc)) from None
                episode = Episode(resume.run_config if resume is not None else job.config,
                                  self.registry, progress=self._progress(running), resume=resume)
                with preparing(episode):
                    episode.prepare()
                self.limiter.wrap(prepared_agent(episode))
                running.phase = "setup"
                result = episode.run()
            except RunError as exc:
                self._updates.put(JobUpdate(job.key, "finished", error=f"{exc}"))
                return
            except KeyboardInterrupt:
                self._updates.put(JobUpdate(job.key, "finished", error="cancelled",
                                            detail={"cancelled": True}))
                return
            except Exception as exc:  # noqa: BLE001 - one episode's crash never stops the sweep
                self._updates.put(JobUpdate(job.key, "finished", error=f"{type(exc).__name__}: {exc}",
                                            detail={"traceback": traceback.format_exc()}))
                return
            self._updates.put(JobUpdate(job.key, "finished", cost_usd=result.cost_usd,
                                        detail={"status": result.status.value}))
        except KeyboardInterrupt:  # an interrupt that arrived after the episode had ended
            self._updates.put(JobUpdate(job.key, "finished", detail={"late_interrupt": True}))
        finally:
            running.phase = "done"
            with self._lock:
                self._running.pop(job.key, None)


def local_executor_spec() -> ExecutorSpec:
    return ExecutorSpec(name="rgym/local", factory=LocalExecutor,
                        description="episodes as threads of the rgym process (--max-parallel, "
                                    "--max-connections)")


def find_executor(registry: Any, name: str) -> ExecutorSpec:
    """The registered executor called ``name`` (full or short name); the error lists them."""
    specs: dict[str, ExecutorSpec] = {"rgym/local": local_executor_spec()}
    try:
        answers = registry.call_hook("rgym_register_executors")
    except Exception:  # noqa: BLE001 - a registry without the hook: only the built-in executor
        answers = []
    for answer in answers:
        for spec in answer or ():
            if isinstance(spec, ExecutorSpec):
                specs.setdefault(spec.name, spec)
    if name in specs:
        return specs[name]
    short = [s for full, s in specs.items() if full.split("/", 1)[-1] == name]
    if len(short) == 1:
        return short[0]
    known = ", ".join(sorted(n.split("/", 1)[-1] for n in specs))
    hint = ""
    install_hint = getattr(registry, "install_hint", None)
    if callable(install_hint):  # a pack that declares it (rgym.provides) but is not loaded
        hint = install_hint(name)
    raise ValueError(f"unknown executor '{name}'{hint}; the executors: {known}")


__all__ = ["JobRequirements", "SETUP_MARGIN_S", "job_requirements", "ConnectionLimiter", "EpisodeJob", "Executor", "ExecutorOptions", "ExecutorSpec",
           "JobUpdate", "LocalExecutor", "SweepInterrupt", "dataset_ids", "file_lock",
           "find_executor", "local_executor_spec", "prepared_agent", "preparing", "raise_in_thread"]
