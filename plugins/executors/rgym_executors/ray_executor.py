"""``rgym sweep --executor ray --address ADDR``: each episode a Ray task.

The sweep's process joins an existing cluster (``--address HOST:PORT``, or
``auto`` for one started on this machine with ``ray start``) and submits one
task per episode, asking for the CPUs, memory and GPUs its task (and profile)
declares (:func:`rgym_core.sweep.executors.job_requirements`).  A task runs the
episode with rgym's runner on whichever node Ray picks, writes its run
directory to a private temporary folder there and returns it as a tar archive;
the sweep's process unpacks it beside the sweep folder and moves it into the
cell's place in one rename.  So nodes need rgym and the same packs installed,
but no shared file system.  A request no node can satisfy (more GPUs or memory
than any node has) is an error before anything is submitted, not a task that
waits forever.

Options (``--executor-option KEY=VALUE``): ``namespace`` (Ray namespace),
``max_retries`` (Ray's own retries of a task whose worker died, default 0: the
sweep's ``--retry-errors`` decides), ``runtime_env`` (JSON, passed to
``ray.init``).
"""

from __future__ import annotations

import json
from typing import Any

from rgym_core.sweep.executors import (
    EpisodeJob,
    Executor,
    ExecutorOptions,
    JobUpdate,
    job_requirements,
)
from rgym_core.sweep.folder import SweepFolder
from rgym_core.sweep.worker import job_payload, plugin_names, run_job, unpack_run


def ray_job(payload: dict[str, Any]) -> dict[str, Any]:
    """The Ray task: :func:`~rgym_core.sweep.worker.run_job`, plus the node it ran on."""
    import ray

    out = run_job(payload)
    try:
        out["node"] = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - informative only
        pass
    return out


class RayExecutor(Executor):
    """Episodes as Ray tasks on an existing cluster (see the module's documentation)."""

    name = "ray"

    def __init__(self, options: ExecutorOptions) -> None:
        super().__init__(options)
        self._ray: Any = None
        self._remote: Any = None
        self._refs: dict[Any, EpisodeJob] = {}
        self._registry: Any = None
        self._plugins: list[str] = []
        self._nodes: list[dict[str, float]] = []
        self._pending_updates: list[JobUpdate] = []
        self._cancelled = False
        if options.sweep_dir is None:
            raise ValueError("the ray executor needs the sweep folder")
        self.folder = SweepFolder(options.sweep_dir)

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
        if opts.get("namespace"):
            init["namespace"] = str(opts["namespace"])
        if opts.get("runtime_env"):
            env = opts["runtime_env"]
            init["runtime_env"] = json.loads(env) if isinstance(env, str) else env
        try:
            ray.init(**init)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ValueError(f"cannot join the Ray cluster at {init['address']}: {exc}; start one with "
                             "`ray start --head` or pass --address HOST:PORT") from None
        self._nodes = [dict(n.get("Resources", {})) for n in ray.nodes() if n.get("Alive")]
        self._remote = ray.remote(ray_job)

    def _options(self, job: EpisodeJob) -> dict[str, Any]:
        need = job_requirements(self._registry, job.config)
        options: dict[str, Any] = {"num_cpus": need.cpus, "num_gpus": need.gpus,
                                   "max_retries": int(self.options.options.get("max_retries", 0)),
                                   "name": f"rgym-episode:{job.key}"}
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
        ref = self._remote.options(**options).remote(payload)
        self._refs[ref] = job
        self._pending_updates.append(JobUpdate(job.key, "started"))

    def poll(self, timeout: float) -> list[JobUpdate]:
        out, self._pending_updates = self._pending_updates, []
        if not self._refs:
            return out
        ready, _ = self._ray.wait(list(self._refs), num_returns=1, timeout=0 if out else timeout)
        if ready:
            more, _ = self._ray.wait(list(self._refs), num_returns=len(self._refs), timeout=0)
            ready = list(dict.fromkeys([*ready, *more]))
        for ref in ready:
            job = self._refs.pop(ref)
            out.append(self._collect(ref, job))
        return out

    def _collect(self, ref: Any, job: EpisodeJob) -> JobUpdate:
        ray = self._ray
        try:
            answer = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            return JobUpdate(job.key, "finished", error="cancelled", detail={"cancelled": True})
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
        for ref in list(self._refs):
            try:
                self._ray.cancel(ref)
            except Exception:  # noqa: BLE001 - best effort; the poll reports what happened
                pass

    def close(self) -> None:
        if self._ray is not None:
            try:
                self._ray.shutdown()
            finally:
                self._ray = None
