"""``rgym sweep --executor slurm``: each episode a Slurm job, submitted with submitit.

A job asks for what the episode's task (and profile) declares
(:func:`rgym_core.sweep.executors.job_requirements`): ``--cpus-per-task``,
``--mem``, ``--gpus-per-node``, and ``--time`` = the episode's time budget plus
its grading and a set-up margin; the partition is ``partition`` (or
``gpu_partition`` for tasks that need GPUs).  Jobs run rgym's runner on the
compute node and write the run directory straight into the sweep folder, which
must therefore be on a file system the nodes share (submitit's own files live in
``SWEEP_DIR/.sweep/slurm/``, its logs included).

Every submitted job is journaled (``.sweep/slurm/jobs.jsonl``), so a sweep
started again after its process was killed adopts the jobs still queued or
running instead of submitting the same episodes twice.  A job that ends without
a result (killed by Slurm for time or memory, node failure) is reported with the
tail of its log, and ``--retry-errors`` decides whether it runs again.

Options (``--executor-option KEY=VALUE``): ``partition``, ``gpu_partition``,
``account``, ``qos``, ``constraint``, ``time_min`` (the ``--time`` of every job,
minutes; default: from the budget, 1440 when unlimited), ``setup`` (shell lines
run before the episode, JSON list or one line: e.g. activating the venv on the
nodes), ``python`` (the interpreter on the nodes; default this one),
``additional`` (JSON object of other sbatch options).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from rgym_core import (
    Cell,
    EpisodeJob,
    Executor,
    ExecutorOptions,
    JobUpdate,
    SweepFolder,
    job_payload,
    job_requirements,
    plugin_names,
    run_job,
)

#: Slurm job states in which a job may still write its run directory.
ACTIVE_STATES = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
                 "SIGNALING", "STAGE_OUT")
#: States of a job that has not started yet (reported ``queued``; the others ``started``).
WAITING_STATES = ("PENDING", "CONFIGURING", "REQUEUED")
#: Seconds a job may be gone from the queue before its result file must exist.
RESULT_GRACE_S = 15.0
DEFAULT_TIME_MIN = 1440


def _squeue() -> dict[str, str] | None:
    """Job id -> state of every job Slurm knows of (``None``: squeue failed)."""
    try:
        proc = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    out = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out[parts[0]] = parts[1]
    return out


def cluster_problem() -> str | None:
    """Why no Slurm cluster can take jobs from here (``None``: one can)."""
    for tool in ("sbatch", "squeue", "sinfo"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt-get install slurm-client)"
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%P %a %D %t"], capture_output=True, text=True,
                              timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sinfo did not answer ({exc})"
    if proc.returncode != 0:
        text = (proc.stderr or proc.stdout).strip().splitlines()
        return f"no Slurm controller answers: {text[-1] if text else 'sinfo failed'}"
    if not proc.stdout.strip():
        return "the Slurm cluster has no partition"
    return None


class SlurmExecutor(Executor):
    """Episodes as Slurm jobs (see the module's documentation)."""

    name = "slurm"

    def __init__(self, options: ExecutorOptions) -> None:
        super().__init__(options)
        if options.sweep_dir is None:
            raise ValueError("the slurm executor needs the sweep folder")
        self.folder = SweepFolder(options.sweep_dir)
        self.job_dir = self.folder.state_dir / "slurm"
        self.journal = self.job_dir / "jobs.jsonl"
        self._submitit: Any = None
        self._executor: Any = None
        self._registry: Any = None
        self._plugins: list[str] = []
        self._jobs: dict[str, tuple[Any, Cell]] = {}
        self._gone_since: dict[str, float] = {}
        self._started: set[str] = set()  # cells whose job Slurm has started
        self._adopted: set[str] = set()
        self._updates: list[JobUpdate] = []
        self._last_queue = 0.0
        self._queue: dict[str, str] | None = {}

    def describe(self) -> str:
        part = self.options.options.get("partition")
        return f"slurm{f' partition {part}' if part else ''}, {self.capacity} at a time"

    def start(self, registry: Any) -> None:
        problem = cluster_problem()
        if problem is not None:
            raise ValueError(f"the slurm executor cannot submit: {problem}")
        try:
            import submitit
        except ImportError as exc:  # pragma: no cover - the distribution depends on submitit
            raise ValueError(f"the slurm executor needs submitit ({exc}); pip install submitit") from None
        self._submitit = submitit
        self._registry = registry
        self._plugins = plugin_names(registry)
        self.job_dir.mkdir(parents=True, exist_ok=True)
        python = self.options.options.get("python")
        self._executor = submitit.SlurmExecutor(folder=self.job_dir / "%j",
                                                **({"python": str(python)} if python else {}))

    # -- submitting -----------------------------------------------------------------
    def _parameters(self, job: EpisodeJob) -> dict[str, Any]:
        opts = self.options.options
        need = job_requirements(self._registry, job.config)
        if opts.get("time_min") is not None:
            minutes = int(opts["time_min"])
        elif need.time_limit_s is not None:
            minutes = max(1, math.ceil(need.time_limit_s / 60))
        else:
            minutes = DEFAULT_TIME_MIN
        params: dict[str, Any] = {
            "job_name": "rgym-" + re.sub(r"[^A-Za-z0-9._-]+", "_", job.key)[-100:],
            "time": minutes, "nodes": 1, "ntasks_per_node": 1,
            "cpus_per_task": max(1, math.ceil(need.cpus)),
            "signal_delay_s": 60,
        }
        partition = opts.get("gpu_partition") if need.gpus and opts.get("gpu_partition") else opts.get("partition")
        if partition:
            params["partition"] = str(partition)
        if need.memory_mb:
            params["mem"] = f"{int(need.memory_mb)}M"
        if need.gpus:
            params["gpus_per_node"] = int(need.gpus)
        for key in ("account", "qos", "constraint"):
            if opts.get(key):
                params[key] = str(opts[key])
        setup = opts.get("setup")
        if setup:
            params["setup"] = json.loads(setup) if isinstance(setup, str) and setup.startswith("[") else (
                list(setup) if isinstance(setup, list) else [str(setup)])
        extra = opts.get("additional")
        if extra:
            params["additional_parameters"] = json.loads(extra) if isinstance(extra, str) else dict(extra)
        return params

    def submit(self, job: EpisodeJob) -> None:
        assert self._executor is not None, "start() first"
        self._executor.update_parameters(**self._parameters(job))
        payload = job_payload(job.config, plugins=self._plugins, ship=False, cell=job.key)
        try:
            slurm_job = self._executor.submit(run_job, payload)
        except Exception as exc:  # noqa: BLE001 - sbatch refused it: report, let retries decide
            self._updates += [JobUpdate(job.key, "started"),
                              JobUpdate(job.key, "finished", error=f"sbatch refused the job: {exc}")]
            return
        self._track(slurm_job, job.cell)
        with self.journal.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"cell": job.key, "job_id": str(slurm_job.job_id), "attempt": job.attempt,
                                 "time": time.time()}) + "\n")
        self._updates.append(JobUpdate(job.key, "queued", detail={"job_id": str(slurm_job.job_id)}))

    def _track(self, slurm_job: Any, cell: Cell) -> None:
        self._jobs[cell.key] = (slurm_job, cell)
        self._started.discard(cell.key)

    def adopt(self, cells: list[Cell]) -> list[str]:
        """Take over the journaled jobs of ``cells`` that Slurm still queues or runs
        (a sweep whose process was killed); returns their cell keys."""
        if not self.journal.exists():
            return []
        last: dict[str, str] = {}
        for line in self.journal.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
                last[str(record["cell"])] = str(record["job_id"])
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line of a killed sweep
        queue = _squeue() or {}
        adopted = []
        for cell in cells:
            job_id = last.get(cell.key)
            if job_id is None or queue.get(job_id) not in ACTIVE_STATES:
                continue
            slurm_job = self._submitit.SlurmJob(folder=self.job_dir / "%j", job_id=job_id)
            self._track(slurm_job, cell)
            self._adopted.add(cell.key)
            self._updates.append(JobUpdate(cell.key, "queued", detail={"job_id": job_id, "adopted": True,
                                                                       "state": queue[job_id]}))
            adopted.append(cell.key)
        return adopted

    # -- watching -------------------------------------------------------------------
    def poll(self, timeout: float) -> list[JobUpdate]:
        deadline = time.monotonic() + timeout
        while True:
            out, self._updates = self._updates, []
            out += self._check()
            if out or time.monotonic() >= deadline:
                return out
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def _check(self) -> list[JobUpdate]:
        out = []
        now = time.monotonic()
        if now - self._last_queue >= 2.0:
            self._queue = _squeue()
            self._last_queue = now
        for key, (slurm_job, _cell) in list(self._jobs.items()):
            job_id = str(slurm_job.job_id)
            done = slurm_job.paths.result_pickle.exists()
            state = (self._queue or {}).get(job_id)
            if key not in self._started and (done or (state in ACTIVE_STATES and state not in WAITING_STATES)):
                self._started.add(key)  # queued -> running (or finished before a poll saw it run)
                out.append(JobUpdate(key, "started", detail={"job_id": job_id, "state": state,
                                                            **({"adopted": True} if key in self._adopted else {})}))
            if done:
                del self._jobs[key]
                out.append(self._collect(key, slurm_job))
                continue
            if self._queue is None or self._queue.get(job_id) in ACTIVE_STATES:
                self._gone_since.pop(job_id, None)
                continue
            first = self._gone_since.setdefault(job_id, now)
            if now - first >= RESULT_GRACE_S and not slurm_job.paths.result_pickle.exists():
                del self._jobs[key]
                out.append(JobUpdate(key, "finished", detail={"job_id": job_id},
                                     error=f"Slurm job {job_id} ended without a result"
                                           f"{self._log_tail(slurm_job)}"))
        return out

    def _collect(self, key: str, slurm_job: Any) -> JobUpdate:
        job_id = str(slurm_job.job_id)
        try:
            answer = slurm_job.result()
        except Exception as exc:  # noqa: BLE001 - the job raised (submitit re-raises it here)
            text = str(exc).strip().splitlines()
            return JobUpdate(key, "finished", detail={"job_id": job_id},
                             error=f"Slurm job {job_id} failed: {text[-1] if text else exc}")
        return JobUpdate(key, "finished", cost_usd=answer.get("cost_usd"),
                         error=None if answer.get("status") else answer.get("error"),
                         detail={"status": answer.get("status"), "host": answer.get("host"), "job_id": job_id,
                                 "traceback": answer.get("traceback")})

    @staticmethod
    def _log_tail(slurm_job: Any) -> str:
        for path in (slurm_job.paths.stderr, slurm_job.paths.stdout):
            try:
                lines = Path(path).read_text(errors="replace").strip().splitlines()
            except OSError:
                continue
            if lines:
                return f" (log {path}: {lines[-1][:300]})"
        return ""

    def cancel(self) -> None:
        """Queued jobs are removed; running ones get SIGTERM (the episode ends
        ``cancelled`` and still writes its result)."""
        ids = [str(job.job_id) for job, _ in self._jobs.values()]
        if not ids:
            return
        queue = _squeue() or {}
        pending = [i for i in ids if queue.get(i) == "PENDING"]
        running = [i for i in ids if i not in pending]
        if pending:
            subprocess.run(["scancel", *pending], capture_output=True, timeout=30, check=False)
            for job_id in pending:  # no result will come: report them at the next poll
                self._gone_since[job_id] = time.monotonic() - RESULT_GRACE_S
        if running:
            subprocess.run(["scancel", "--signal=TERM", "--full", *running], capture_output=True,
                           timeout=30, check=False)
        self._last_queue = 0.0

    def close(self) -> None:
        self._executor = None
