"""``rgym sweep --executor ray --address ADDR``: each episode a detached Ray actor.

The sweep's process joins an existing cluster (``--address HOST:PORT``, or
``auto`` for one started on this machine with ``ray start``) and creates one
detached, named actor per episode, asking for the CPUs, memory and GPUs its task
(and profile) declares (:func:`rgym_core.sweep.executors.job_requirements`).
The episode is ``queued`` until Ray has placed its actor, then ``running``.
Detached actors outlive the sweep's process: every actor is journaled
(``.sweep/ray/actors.jsonl``), so a sweep started again after its process was
killed adopts the actors still alive (and collects the results they kept)
instead of running the same episodes twice.  An actor runs the
episode with rgym's runner on whichever node Ray picks, writes its run
directory to a private temporary folder there and returns it as a tar archive;
the sweep's process unpacks it beside the sweep folder and moves it into the
cell's place in one rename.  So nodes need rgym and the same packs installed,
but no shared file system.  A request no node can satisfy (more GPUs or memory
than any node has) is an error before anything is submitted, not a task that
waits forever.

Options (``--executor-option KEY=VALUE``): ``namespace`` (Ray namespace, default
``rgym``: a resumed sweep finds its actors there), ``max_retries`` (Ray's own
restarts of an actor whose worker died, default 0: the sweep's
``--retry-errors`` decides), ``runtime_env`` (JSON, passed to ``ray.init``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

from rgym_core import (
    EpisodeJob,
    Executor,
    ExecutorOptions,
    JobUpdate,
    SweepFolder,
    job_payload,
    job_requirements,
    plugin_names,
    run_job,
    unpack_run,
)


def ray_job(payload: dict[str, Any]) -> dict[str, Any]:
    """The Ray task: :func:`~rgym_core.sweep.worker.run_job`, plus the node it ran on."""
    import ray

    out = run_job(payload)
    try:
        out["node"] = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - informative only
        pass
    return out


class EpisodeActor:
    """One episode in a detached actor: it runs in a thread from creation on, and
    keeps its answer until a sweep (this one, or one started after it was killed)
    asks for it with :meth:`result`."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self._done = threading.Event()
        self._out: dict[str, Any] = {}
        threading.Thread(target=self._run, args=(payload,), daemon=True, name="rgym-episode").start()

    def _run(self, payload: dict[str, Any]) -> None:
        try:
            self._out = ray_job(payload)
        except BaseException as exc:  # noqa: BLE001 - reported to the sweep
            self._out = {"status": None, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            self._done.set()

    def ready(self) -> bool:
        """Answers once Ray has placed the actor (the episode is running)."""
        return True

    def result(self) -> dict[str, Any]:
        self._done.wait()
        return self._out


class RayExecutor(Executor):
    """Episodes as Ray tasks on an existing cluster (see the module's documentation)."""

    name = "ray"

    def __init__(self, options: ExecutorOptions) -> None:
        super().__init__(options)
        self._ray: Any = None
        self._remote: Any = None
        self._refs: dict[Any, EpisodeJob] = {}  # result() of each actor -> its job
        self._ready: dict[Any, str] = {}  # ready() of each actor not yet started -> cell key
        self._actors: dict[str, Any] = {}  # cell key -> actor handle
        self._adopted: set[str] = set()
        self._running: set[str] = set()  # cells whose actor Ray has placed
        self._registry: Any = None
        self._plugins: list[str] = []
        self._nodes: list[dict[str, float]] = []
        self._pending_updates: list[JobUpdate] = []
        self._cancelled = False
        if options.sweep_dir is None:
            raise ValueError("the ray executor needs the sweep folder")
        self.folder = SweepFolder(options.sweep_dir)
        self.journal = self.folder.state_dir / "ray" / "actors.jsonl"
        self.namespace = str(options.options.get("namespace") or "rgym")
        self._prefix = "rgym:" + hashlib.sha256(str(self.folder.path.resolve()).encode()).hexdigest()[:12]

    def describe(self) -> str:
        address = self.options.address or "auto"
        return f"ray at {address}, {self.capacity} at a time"

    def start(self, registry: Any) -> None:
        try:
            import ray
        except ImportError as exc:  # pragma: no cover - the distribution depends on ray
            raise ValueError(f"the ray executor needs ray ({exc}); pip install 'ray>=2.9'") from None
        self._ray = ray
        self._registry = registry
        self._plugins = plugin_names(registry)
        opts = self.options.options
        init: dict[str, Any] = {"address": self.options.address or "auto", "log_to_driver": False,
                                "ignore_reinit_error": True, "logging_level": "error"}
        init["namespace"] = self.namespace
        if opts.get("runtime_env"):
            env = opts["runtime_env"]
            init["runtime_env"] = json.loads(env) if isinstance(env, str) else env
        try:
            ray.init(**init)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ValueError(f"cannot join the Ray cluster at {init['address']}: {exc}; start one with "
                             "`ray start --head` or pass --address HOST:PORT") from None
        self._nodes = [dict(n.get("Resources", {})) for n in ray.nodes() if n.get("Alive")]
        self._remote = ray.remote(EpisodeActor)

    def _options(self, job: EpisodeJob) -> dict[str, Any]:
        need = job_requirements(self._registry, job.config)
        options: dict[str, Any] = {"num_cpus": need.cpus, "num_gpus": need.gpus,
                                   "max_restarts": int(self.options.options.get("max_retries", 0)),
                                   "lifetime": "detached", "max_concurrency": 8,
                                   "name": f"{self._prefix}:{job.key}:{job.attempt}",
                                   "namespace": self.namespace}
        if need.memory_mb:
            options["memory"] = int(need.memory_mb) * 1024 * 1024
        wanted = {"CPU": need.cpus, "GPU": float(need.gpus), "memory": float(options.get("memory", 0))}
        if self._nodes and not any(all(node.get(k, 0.0) >= v for k, v in wanted.items() if v)
                                   for node in self._nodes):
            biggest = ", ".join(f"{k} {max(n.get(k, 0.0) for n in self._nodes):g}" for k in wanted if wanted[k])
            asked = ", ".join(f"{k} {v:g}" for k, v in wanted.items() if v)
            raise ValueError(f"{job.cell.task_label} asks for {asked}, but no node of the Ray cluster has "
                             f"that much (largest: {biggest}); add a node or override with --cpus/--memory")
        return options

    def submit(self, job: EpisodeJob) -> None:
        try:
            options = self._options(job)
        except ValueError as exc:
            self._pending_updates += [JobUpdate(job.key, "started"),
                                      JobUpdate(job.key, "finished", error=str(exc))]
            return
        payload = job_payload(job.config, plugins=self._plugins, ship=True, cell=job.key)
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        with self.journal.open("a", encoding="utf-8") as fh:  # before the actor: a kill never hides one
            fh.write(json.dumps({"cell": job.key, "actor": options["name"], "attempt": job.attempt,
                                 "time": time.time()}) + "\n")
        actor = self._remote.options(**options).remote(payload)
        self._watch(job, actor)
        self._pending_updates.append(JobUpdate(job.key, "queued"))

    def _watch(self, job: EpisodeJob, actor: Any) -> None:
        self._actors[job.key] = actor
        self._running.discard(job.key)
        self._ready[actor.ready.remote()] = job.key
        self._refs[actor.result.remote()] = job

    def adopt(self, cells: list[Any]) -> list[str]:
        """Take over the journaled actors of ``cells`` that are still alive (a sweep
        whose process was killed); actors of other cells, or of superseded attempts,
        are ended (their results are in place already, or will be run again)."""
        if not self.journal.exists():
            return []
        records: list[dict[str, Any]] = []
        for line in self.journal.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
                records.append({"cell": str(record["cell"]), "actor": str(record["actor"]),
                                "attempt": int(record.get("attempt", 1))})
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line of a killed sweep
        last = {r["cell"]: r for r in records}
        by_key = {c.key: c for c in cells}
        adopted = []
        for record in records:
            try:
                actor = self._ray.get_actor(record["actor"], namespace=self.namespace)
            except ValueError:  # gone: ended, killed, or its node died
                continue
            if record is last[record["cell"]] and record["cell"] in by_key:
                cell = by_key[record["cell"]]
                self._watch(EpisodeJob(cell=cell, config=None, attempt=record["attempt"]), actor)
                self._adopted.add(cell.key)
                self._pending_updates.append(JobUpdate(cell.key, "queued", detail={"adopted": True}))
                adopted.append(cell.key)
            else:
                self._kill(actor)
        return adopted

    def _kill(self, actor: Any) -> None:
        try:
            self._ray.kill(actor)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def poll(self, timeout: float) -> list[JobUpdate]:
        out, self._pending_updates = self._pending_updates, []
        if not self._refs:
            return out
        watched = [*self._ready, *self._refs]
        ready, _ = self._ray.wait(watched, num_returns=1, timeout=0 if out else timeout)
        if ready:
            more, _ = self._ray.wait(watched, num_returns=len(watched), timeout=0)
            ready = list(dict.fromkeys([*ready, *more]))
        for ref in ready:  # started first, then finished
            if ref in self._ready:
                key = self._ready.pop(ref)
                try:
                    self._ray.get(ref, timeout=0)
                except Exception:  # noqa: BLE001 - the actor died before it ran: its result says why
                    continue
                out += self._started(key)
        for ref in ready:
            if ref in self._refs:
                job = self._refs.pop(ref)
                out += self._started(job.key)
                out.append(self._collect(ref, job))
                self._kill(self._actors.pop(job.key))  # after its run directory is in place
                self._running.discard(job.key)
        return out

    def _started(self, key: str) -> list[JobUpdate]:
        if key in self._running:
            return []
        self._running.add(key)
        for ref, other in list(self._ready.items()):
            if other == key:
                del self._ready[ref]
        return [JobUpdate(key, "started", detail={"adopted": True} if key in self._adopted else {})]

    def _collect(self, ref: Any, job: EpisodeJob) -> JobUpdate:
        ray = self._ray
        try:
            answer = ray.get(ref)
        except (ray.exceptions.TaskCancelledError, ray.exceptions.RayActorError) as exc:
            if self._cancelled:
                return JobUpdate(job.key, "finished", error="cancelled", detail={"cancelled": True})
            text = str(exc).strip().splitlines()
            return JobUpdate(job.key, "finished", error=f"the Ray actor died: {text[-1] if text else exc}")
        except ray.exceptions.RayError as exc:
            text = str(exc).strip().splitlines()
            return JobUpdate(job.key, "finished", error=f"the Ray task failed: {text[-1] if text else exc}")
        archive = answer.pop("archive", None)
        if archive is not None:
            try:
                unpack_run(archive, self.folder, job.cell)
            except (OSError, ValueError) as exc:
                return JobUpdate(job.key, "finished", error=f"the run directory from {answer.get('host')} "
                                                            f"could not be unpacked: {exc}")
        return JobUpdate(job.key, "finished", cost_usd=answer.get("cost_usd"),
                         error=None if answer.get("status") else answer.get("error"),
                         detail={"status": answer.get("status"), "host": answer.get("host"),
                                 "node": answer.get("node"), "traceback": answer.get("traceback")})

    def cancel(self) -> None:
        self._cancelled = True
        for actor in list(self._actors.values()):  # the poll reports each as cancelled
            self._kill(actor)

    def close(self) -> None:
        if self._ray is not None:
            try:
                self._ray.shutdown()
            finally:
                self._ray = None
