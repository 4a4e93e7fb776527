"""The ``docker`` sandbox: one container per episode.

* The container runs ``sleep infinity`` under ``docker-init`` from the task's image
  (``resources.image``, ``--image``, or the layered image of
  :mod:`rgym_sandbox_docker.images`, built on demand), labelled with the run id and
  its owner (:mod:`rgym_sandbox_docker.lifecycle`).
* Limits (:mod:`rgym_sandbox_docker.limits`): memory (no extra swap), processes and
  workspace size always, from the task, the command line or safe defaults; CPUs
  when asked; network ``none`` unless allowed; GPUs as device requests;
  ``no-new-privileges``; every capability dropped except the few the trusted
  supervisor needs (the agent user never has any).
* The workspace ``/home/agent/workspace`` belongs to ``agent`` (uid 1000).  Datasets
  live in per-episode volumes mounted at ``<workspace>/<mount>``, root-owned and
  read-only to the agent.  The grader's files never enter this container.
* Commands go to the agent's shell through a root supervisor inside the container
  (:mod:`rgym_sandbox_docker.shell`, :mod:`rgym_sandbox_docker.supervisor`), which
  measures exit codes, working directories and timeouts itself.
* Files move in and out as single tar streams through the supervisor, read and
  written as the agent user (sparse files stay sparse); what comes out is
  unpacked by the core's :func:`rgym_core.workspace_export.extract_archive`
  (hostile names, links, quota, holes).
* :meth:`DockerSandbox.grade` runs a grader in a separate short-lived container.
* :meth:`~DockerSandbox.freeze`/:meth:`~DockerSandbox.thaw` and
  :meth:`~DockerSandbox.kill_processes` go through the supervisor, which needs no new
  process for them (the agent may hold every pid); :func:`reap` stops what a killed
  run's container still runs and :func:`export_left_workspace` copies its workspace.
  A fork or copy refused because the agent's processes took the room is the agent's
  doing: ``SandboxError`` reason ``pids``/``oom`` (or an ``OSError`` for a copy),
  never ``engine``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import posixpath
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rgym_core import (
    DEFAULT_OUTPUT_LIMIT,
    TIMEOUT_EXIT_CODE,
    DroppedEntry,
    ExecResult,
    ExportReport,
    Sandbox,
    SandboxConfig,
    SandboxError,
    SandboxFacts,
    WorkspaceExportError,
    WorkspaceLayout,
    WorkspaceQuotaExceeded,
    extract_archive,
    truncate_output,
)
from rgym_sandbox_docker import archives, images, lifecycle
from rgym_sandbox_docker.execstream import StreamClosed, run_collect
from rgym_sandbox_docker.limits import (
    STORAGE_MODES,
    EpisodeLimits,
    episode_limits,
    scratch_mb,
)
from rgym_sandbox_docker.shell import (
    SUPERVISOR_SOURCE,
    ShellSession,
    SupervisorError,
    supervisor_argv,
)

WORKSPACE = "/home/agent/workspace"
AGENT = "agent"
AGENT_UID = 1000
try:
    from rgym_core import EVAL_MOUNT as EVAL_DIR
except ImportError:  # an older core
    EVAL_DIR = "/eval"
#: Exit status of a process killed by SIGKILL (the OOM killer's signal).
KILLED_EXIT_CODE = 137
#: errnos of a fork refused for lack of room: the agent's processes or memory.
_NO_ROOM = (errno.EAGAIN, errno.ENOMEM)
_FORK_FAILURES = ("fork: retry", "fork: Resource temporarily unavailable",
                  "Cannot allocate memory", "can't start new thread")
#: Capabilities of the episode container: what the root supervisor needs (drop to the
#: agent user, kill its processes, read /proc of its non-dumpable shell, fix the
#: owners of dataset mount points, run ahead of the agent's processes on the CPU).
#: The agent user never holds any.
EPISODE_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID", "SYS_PTRACE",
                "SYS_NICE"]
#: Capabilities of a grader container: what the grading supervisor needs to run the
#: grader and the submission's code as two other unprivileged users.
GRADER_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"]
#: MB of the root-only tmpfs of the supervisor (/run/rgym) in tmpfs mode.
RUN_TMPFS_MB = 64
#: Engines (by address) that refused ``--storage-opt size``.
_NO_QUOTA: set[str] = set()
_QUOTA_ERRORS = ("storage-opt", "storage opt", "pquota", "quota")


def _agent_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {"HOME": WORKSPACE, "USER": AGENT, "LOGNAME": AGENT, "SHELL": "/bin/bash"}
    env.update(extra)
    return env


def _merged(argv: list[str]) -> list[str]:
    """``argv`` with stderr sent to stdout inside the container: the engine carries
    the two on separate pipes and does not keep their relative order."""
    return ["sh", "-c", 'exec "$@" 2>&1', "sh", *argv]


class DockerSandbox(Sandbox):
    """An episode's container.  Options (``SandboxConfig.options``, from
    ``--sandbox-option``): ``base`` (the base image when the task image must be
    built), ``storage`` (``auto``, ``quota`` or ``tmpfs``: see
    :mod:`rgym_sandbox_docker.limits`), ``disk_mb`` (the workspace size limit)."""

    workspace = WORKSPACE

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.client: Any = None
        self.container: Any = None
        self.image: str | None = None
        self.shell: ShellSession | None = None
        self.limits: EpisodeLimits = episode_limits(config.effective, dict(config.options))
        self.storage: str | None = None
        self._pending: SandboxError | None = None
        self._seen = {"oom": 0, "pids": 0}
        self._closed = False
        self._lock = threading.RLock()
        mode = str(config.options.get("storage", "auto"))
        if mode not in STORAGE_MODES:
            raise ValueError(f"--sandbox-option storage={mode}: expected one of "
                             f"{', '.join(STORAGE_MODES)}")
        self.storage_option = mode

    # -- creation ----------------------------------------------------------------

    def _limits(self) -> dict[str, Any]:
        """Container options for memory, CPUs, processes and GPUs."""
        lim = self.limits
        kwargs: dict[str, Any] = {
            "mem_limit": f"{lim.memory_mb}m",
            "memswap_limit": f"{lim.memory_mb}m",  # no swap beyond the limit
            "pids_limit": lim.pids,
        }
        if lim.cpus:
            kwargs["nano_cpus"] = int(lim.cpus * 1e9)
        gpus = self.config.effective.gpus
        if gpus:
            import docker.types

            if gpus == "all":
                request = docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])
            elif gpus.isdigit():
                request = docker.types.DeviceRequest(count=int(gpus), capabilities=[["gpu"]])
            else:  # a list of device ids: "0,1"
                request = docker.types.DeviceRequest(device_ids=gpus.split(","),
                                                     capabilities=[["gpu"]])
            kwargs["device_requests"] = [request]
        return kwargs

    def _storage(self, mode: str, *, extra_mb: int = 0, workspace: bool = True) -> dict[str, Any]:
        """Container options that bound what the agent can write (see limits.py)."""
        lim = self.limits
        if mode == "quota":
            return {"storage_opt": {"size": f"{lim.disk_mb + extra_mb + 64}m"}}
        scratch = scratch_mb(lim)
        # Docker's tmpfs default is noexec: the agent runs programs from these
        opts = "exec,nosuid,nodev"
        mounts = {"/tmp": f"size={scratch}m,mode=1777,{opts}",
                  "/var/tmp": f"size={scratch}m,mode=1777,{opts}",
                  "/run/rgym": f"size={RUN_TMPFS_MB}m,mode=0711,{opts}"}
        if workspace:
            mounts[WORKSPACE] = (f"size={lim.disk_mb + extra_mb}m,uid={AGENT_UID},"
                                 f"gid={AGENT_UID},mode=0755,{opts}")
        return {"read_only": True, "tmpfs": mounts}

    def _resolve_image(self) -> str:
        effective = self.config.effective
        if effective.image:
            return effective.image
        return images.task_image(self.client, effective.requirements,
                                 base=self.config.options.get("base"))

    def _engine_id(self) -> str:
        """The engine this client talks to (its address: no request needed)."""
        return str(getattr(self.client.api, "base_url", "") or "engine")

    def _create(self, role: str, network: bool, *, caps: list[str], mounts: list[Any],
                extra_mb: int = 0, workspace: bool = True) -> Any:
        """Create (not start) a container; the storage mode is chosen here."""
        assert self.image is not None
        import docker.errors

        base = dict(image=self.image, command=["sleep", "infinity"], init=True,
                    hostname="rgym", labels=lifecycle.labels_for(self.config.run_id, role,
                                                                 self.config.labels),
                    network_mode="bridge" if network else "none",
                    security_opt=["no-new-privileges"], cap_drop=["ALL"], cap_add=caps,
                    environment=dict(self.config.env), mounts=mounts, **self._limits())
        mode = self.storage_option
        engine = self._engine_id()
        if mode == "auto":
            mode = "tmpfs" if engine in _NO_QUOTA else "quota"
        if mode == "quota":
            try:
                container = self.client.containers.create(
                    **base, **self._storage("quota", extra_mb=extra_mb, workspace=workspace))
                self.storage = "quota"
                return container
            except docker.errors.APIError as exc:
                if not any(s in str(exc).lower() for s in _QUOTA_ERRORS):
                    raise
                if self.storage_option == "quota":
                    raise SandboxError(f"--sandbox-option storage=quota: this Docker engine "
                                       f"cannot limit a container's disk: {exc}",
                                       "config") from exc
                _NO_QUOTA.add(engine)
        container = self.client.containers.create(
            **base, **self._storage("tmpfs", extra_mb=extra_mb, workspace=workspace))
        self.storage = "tmpfs"
        return container

    def start(self, layout: WorkspaceLayout) -> None:
        """Create the container, lay out the workspace and start the shell."""
        from docker.types import Mount

        self.client = lifecycle.docker_client()
        self.image = self._resolve_image()
        lifecycle.track(self)
        try:
            mounts, targets = [], {}
            for mount, prepared in sorted(layout.datasets.items()):
                dest = posixpath.normpath(f"{WORKSPACE}/{mount}")
                if not dest.startswith(WORKSPACE + "/"):
                    raise SandboxError(f"dataset mount '{mount}' leaves the workspace", "layout")
                mounts.append(Mount(target=dest, source=None, type="volume"))
                targets[dest] = prepared
            self.container = self._create("episode", self.config.effective.network,
                                          caps=EPISODE_CAPS, mounts=mounts)
            self.container.start()
            # the datasets go into their volumes while the supervisor starts
            filling = _Background(self._fill_volumes, targets)
            parents = sorted({p for dest in targets
                              for p in archives.parents_below(WORKSPACE, dest)})
            self.shell = ShellSession(self.client.api, self.container.id, user=AGENT,
                                      workdir=WORKSPACE, environment=_agent_env(self.config.env),
                                      read_only_dirs=sorted(targets), agent_dirs=parents)
            if layout.starter is not None and layout.starter.is_dir():
                tar = archives.ArchiveBuilder()
                for entry in sorted(layout.starter.iterdir()):
                    tar.add_tree(entry, entry.name)
                with tar.finish() as data:
                    self.shell.start(data, os.fstat(data.fileno()).st_size)
            else:
                self.shell.start()
            filling.join()
        except BaseException:
            self.cleanup()
            raise

    def _fill_volumes(self, targets: dict[str, Any]) -> None:
        """Copy each dataset into its volume, root-owned and read-only."""
        for dest, prepared in targets.items():
            tar = archives.ArchiveBuilder()
            tar.add_tree(prepared.public, ".", uid=0, gid=0, read_only=True)
            with tar.finish() as data:
                self.container.put_archive(dest, data)

    # -- the shell ---------------------------------------------------------------

    def _check_alive(self) -> None:
        if self.container is None or self._closed:
            raise SandboxError("the sandbox is not running (start() was not called or it was "
                               "cleaned up)", "closed")

    @contextlib.contextmanager
    def _engine_errors(self) -> Iterator[None]:
        """Turn an engine error of a dead container into a :class:`SandboxError`."""
        import docker.errors

        try:
            yield
        except (docker.errors.APIError, StreamClosed, ConnectionError, SupervisorError) as exc:
            failure = self._container_failure()
            if failure is not None:
                raise failure from exc
            if getattr(exc, "errno", None) in _NO_ROOM:  # the agent's processes took the room
                reason = "pids" if exc.errno == errno.EAGAIN else "oom"  # type: ignore[union-attr]
                raise SandboxError(f"the sandbox's {'process' if reason == 'pids' else 'memory'} "
                                   f"limit is exhausted by the agent's processes: {exc}",
                                   reason) from exc
            raise SandboxError(f"the Docker engine failed: {exc}", "engine") from exc

    def run(self, command: str, *, timeout: float | None = None,
            output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        self._check_alive()
        assert self.shell is not None
        restarts = self.shell.restarts
        with self._engine_errors():
            result = self.shell.run(command, timeout=timeout, output_limit=output_limit)
        if self.shell.restarts != restarts:
            failure = self._container_failure()
            if failure is not None:
                raise failure  # the container itself died: not a shell that exited
        problem = self._diagnose(result)
        if problem is not None and problem.reason != "oom":  # the runner reports OOM via health()
            result.output = result.output + ("\n" if result.output and not
                                             result.output.endswith("\n") else "") + f"[{problem}]\n"
        return result

    def _diagnose(self, result: ExecResult) -> SandboxError | None:
        """Explain an OOM or pids-limit kill, and remember it for :meth:`health`."""
        suspicious = result.exit_code in (KILLED_EXIT_CODE, TIMEOUT_EXIT_CODE) or any(
            s in result.output for s in _FORK_FAILURES)
        if not suspicious:
            return None
        counters = self._counters()
        lim = self.limits
        if counters["oom"] > self._seen["oom"]:
            self._seen["oom"] = counters["oom"]
            msg = (f"a process was killed by the out-of-memory killer: the sandbox's memory "
                   f"limit is {lim.memory_mb} MB")
            if self.storage == "tmpfs":
                msg += " (files in the workspace and /tmp count against it)"
            self._pending = SandboxError(msg, "oom")
            return self._pending
        if counters["pids"] > self._seen["pids"]:
            self._seen["pids"] = counters["pids"]
            msg = f"the process-count limit ({lim.pids} processes) was reached; fork failed"
            self._pending = SandboxError(msg, "pids")
            return self._pending
        return None

    def _counters(self) -> dict[str, int]:
        """OOM kills and refused forks so far (cgroup v1 or v2 files): read by the
        supervisor (no process to start: works when the agent took every pid), else by
        a separate exec."""
        if self.shell is not None and self.shell.alive:
            try:
                return self.shell.counters()
            except Exception:  # noqa: BLE001 - an older or broken session: the exec below
                pass
        from rgym_sandbox_docker.supervisor import COUNTER_FILES, parse_counters

        try:
            out = run_collect(
                self.client.api, self.container.id,
                ["sh", "-c", f"cat {' '.join(COUNTER_FILES)} 2>/dev/null; true"],
                user="root", timeout=30).stdout
        except Exception:  # noqa: BLE001 - the engine could not start a process in it
            out = b""
        return parse_counters(out.decode(errors="replace"))

    def health(self) -> SandboxError | None:
        if self.container is None or self._closed:
            return None
        failure = self._container_failure()
        if failure is not None:
            return failure
        pending, self._pending = self._pending, None
        return pending

    def _container_failure(self) -> SandboxError | None:
        """A :class:`SandboxError` when the container itself stopped or vanished."""
        try:
            self.container.reload()
        except Exception as exc:  # noqa: BLE001 - the container vanished
            return SandboxError(f"the container is gone: {exc}", "gone")
        state = self.container.attrs.get("State", {})
        if state.get("OOMKilled") and not state.get("Running"):
            return SandboxError("the container was killed by the out-of-memory killer "
                                f"(memory limit {self.limits.memory_mb} MB)", "oom")
        if not state.get("Running"):
            return SandboxError(f"the container stopped (exit code {state.get('ExitCode')})",
                                "exited")
        return None

    # -- one-shot processes and files --------------------------------------------

    def _abs(self, path: str) -> str:
        return posixpath.normpath(path if path.startswith("/") else f"{WORKSPACE}/{path}")

    def exec(self, argv: list[str], *, timeout: float | None = None, cwd: str | None = None,
             env: Mapping[str, str] | None = None, input: str | None = None,
             output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        self._check_alive()
        assert self.shell is not None
        started = time.monotonic()
        since = self.shell.boot_ticks()
        environment = _agent_env({**self.config.env, **(env or {})})
        with self._engine_errors():
            code, _, _, merged, timed_out = run_collect(
                self.client.api, self.container.id, _merged(argv), user=AGENT,
                workdir=self._abs(cwd) if cwd else WORKSPACE, environment=environment,
                input=input.encode() if input is not None else None, timeout=timeout)
            if timed_out:  # killed by root: the agent cannot stop its killer
                self.shell.kill_young(since)
        text, truncated = truncate_output(merged.decode("utf-8", "replace"), output_limit)
        return ExecResult(TIMEOUT_EXIT_CODE if timed_out else (code if code is not None else 1),
                          text, timed_out=timed_out, truncated=truncated,
                          duration_s=time.monotonic() - started)

    @staticmethod
    def _raise_for(path: str, message: str) -> None:
        if "No such file" in message:
            raise FileNotFoundError(f"{path}: no such file or directory")
        if "Permission denied" in message or "Read-only" in message:
            raise PermissionError(f"{path}: permission denied")
        if "Is a directory" in message:
            raise IsADirectoryError(f"{path}: is a directory")
        if "Not a directory" in message:
            raise NotADirectoryError(f"{path}: a parent is not a directory")
        if "No space left" in message or "Disk quota" in message:
            raise OSError(f"{path}: no space left on the sandbox's disk")
        raise OSError(f"{path}: {message.strip() or 'failed'}")

    def read_file(self, path: str) -> bytes:
        self._check_alive()
        target = self._abs(path)
        with self._engine_errors():
            code, out, err, _, _ = run_collect(self.client.api, self.container.id,
                                               ["cat", "--", target], user=AGENT, timeout=120)
        if code != 0:
            self._raise_for(path, err.decode(errors="replace"))
        return out

    def write_file(self, path: str, data: bytes | str) -> None:
        self._check_alive()
        target = self._abs(path)
        payload = data.encode() if isinstance(data, str) else data
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
        with self._engine_errors():
            code, _, err, _, _ = run_collect(self.client.api, self.container.id,
                                             ["sh", "-c", script, "sh", target], user=AGENT,
                                             input=payload, timeout=120)
        if code != 0:
            self._raise_for(path, err.decode(errors="replace"))

    def copy_in(self, src: Path, dest: str) -> None:
        """Copy a host file or folder to ``dest``, owned by the agent (one archive,
        extracted by the agent user: it can only land where the agent may write)."""
        self._check_alive()
        assert self.shell is not None
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(f"{src}: no such file or directory on the host")
        target = self._abs(dest)
        tar = archives.ArchiveBuilder()
        tar.add_tree(src, posixpath.basename(target))
        with tar.finish() as data, self._engine_errors():
            try:
                self.shell.untar(data, os.fstat(data.fileno()).st_size,
                                 posixpath.dirname(target))
            except OSError as exc:
                self._raise_for(dest, str(exc))

    def _pack(self, root: str, dest: Path, *, include: Sequence[str] | None = None,
              exclude: Sequence[str] = (), quota_bytes: int | None = None,
              label: str) -> ExportReport:
        """One tar stream of ``root`` (as the agent user sees it, filtered inside the
        container) unpacked into the new host path ``dest`` (a folder, or a file when
        ``root`` is one)."""
        assert self.shell is not None
        failure: BaseException | None = None
        report: ExportReport | None = None
        with self._engine_errors():
            try:
                stream = self.shell.pack(root, include=list(include) if include is not None
                                         else None, exclude=list(exclude), quota=quota_bytes)
            except SupervisorError as exc:
                if exc.errno not in _NO_ROOM:
                    raise
                raise OSError(exc.errno, f"{label}: could not be copied out: the agent's own "
                                         f"processes leave no room in the sandbox for the copy "
                                         f"({os.strerror(exc.errno)})") from exc
            with stream:
                try:
                    report = extract_archive(
                        stream, dest, root=stream.root,  # type: ignore[arg-type]
                        exclude=exclude, include=include, quota_bytes=quota_bytes,
                        sandbox_root=root if root.startswith(WORKSPACE) else None)
                except (OSError, WorkspaceExportError) as exc:
                    failure = exc
                stream.finish()
        walk = stream.report
        if walk.get("errno") is not None:
            self._raise_for(label, os.strerror(int(walk["errno"])))
        if walk.get("not_regular"):
            raise OSError(f"{label}: not a regular file or folder (links are never copied out)")
        if walk.get("over_quota") and quota_bytes is not None:
            seen = int(walk.get("bytes", 0))
            raise WorkspaceQuotaExceeded(
                f"the workspace holds more than its quota of {quota_bytes / 2**20:g} MiB "
                f"(resources.disk_mb): at least {seen / 2**20:.1f} MiB of files; delete large "
                f"files (sparse files count at their full size)",
                quota_bytes=quota_bytes, seen_bytes=seen)
        if failure is not None:
            raise failure
        if walk.get("error"):
            raise OSError(f"{label}: copying out failed: {walk['error']}")
        assert report is not None
        for rel, why in walk.get("skipped") or []:
            report.dropped.append(DroppedEntry(rel if rel.isprintable() else ascii(rel)[1:-1],
                                               why))
        return report

    def copy_out(self, src: str, dest: Path) -> None:
        """Copy a file or folder of the sandbox to the host path ``dest`` (regular files
        and folders only, as the agent can read them; links inside a folder become
        copies when they end at a file inside it, others are left out)."""
        self._check_alive()
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        target = self._abs(src)
        with tempfile.TemporaryDirectory(prefix=".rgym-out-", dir=dest.parent) as tmp:
            produced = Path(tmp) / "out"
            self._pack(target, produced, label=src)
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            elif dest.exists() or dest.is_symlink():
                dest.unlink()
            os.rename(produced, dest)

    def export_workspace(self, dest: Path, *, exclude: Sequence[str] = (),
                         include: Sequence[str] | None = None,
                         quota_bytes: int | None = None) -> ExportReport:
        """Copy the workspace into the new host folder ``dest`` in one archive
        (contract 2): ``include``/``exclude`` applied inside the container, dataset
        mounts left out, at most ``quota_bytes`` (default: the workspace's size limit)
        of files counted at their apparent size, sparse files kept sparse, unpacked by
        :func:`rgym_core.workspace_export.extract_archive`.  Raises
        :class:`~rgym_core.workspace_export.WorkspaceQuotaExceeded` past the quota."""
        self._check_alive()
        dest = Path(dest)
        if dest.is_dir() and not dest.is_symlink() and not any(dest.iterdir()):
            dest.rmdir()  # an empty folder made by the caller is fine
        quota = quota_bytes if quota_bytes is not None else self.limits.disk_mb << 20
        try:
            return self._pack(WORKSPACE, dest, include=include, exclude=exclude,
                              quota_bytes=quota, label="the workspace")
        except BaseException:
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest, ignore_errors=True)  # nothing half-copied is left
            raise

    # -- stopping the agent -------------------------------------------------------

    def freeze(self) -> None:
        """Stop every agent process (SIGSTOP from the root supervisor, looped until none
        runs unstopped).  Not ``docker pause``: the copy-out goes through the supervisor's
        exec, which a paused container would freeze too."""
        self._check_alive()
        assert self.shell is not None
        with self._engine_errors():
            self.shell.freeze()

    def thaw(self) -> None:
        """Continue what :meth:`freeze` stopped (nothing without a freeze)."""
        if self.shell is None or self._closed or not self.shell.alive:
            return  # a new session never froze anything (an ended one thawed on exit)
        with self._engine_errors():
            self.shell.thaw()

    def kill_processes(self) -> list[str]:
        """Kill every agent process (the idle shell session stays); the container and
        its workspace stay for the copy-out.  The command lines are read from /proc by
        the supervisor before the kill, ~200 characters each."""
        self._check_alive()
        assert self.shell is not None
        with self._engine_errors():
            return self.shell.kill_all(keep_shell=True)

    def reap_handle(self) -> dict[str, Any]:
        """The container (id and engine), for :func:`reap` after rgym itself died."""
        if self.container is None:
            return {}
        return {"backend": "docker", "container": self.container.id,
                "engine": self._engine_id(), "uid": AGENT_UID, "run_id": self.config.run_id}

    @classmethod
    def attach(cls, handle: Mapping[str, Any], config: SandboxConfig | None = None
               ) -> DockerSandbox:
        """The sandbox of a killed run's container, still running (see :func:`reap`),
        with a fresh supervisor session: :meth:`export_workspace` and
        :meth:`copy_out` work on it; :meth:`cleanup` removes the container."""
        box = cls(config or SandboxConfig(run_id=str(handle.get("run_id") or "reaped")))
        box.client = lifecycle.docker_client()
        box.container = box.client.containers.get(str(handle["container"]))
        box.image = (box.container.image.tags or [box.container.image.id])[0]
        box.shell = ShellSession(box.client.api, box.container.id, user=AGENT,
                                 workdir=WORKSPACE, environment=_agent_env(box.config.env))
        lifecycle.track(box)
        box.shell.start()
        return box

    # -- grading -------------------------------------------------------------------

    def grade(self, eval_dir: Path, argv: list[str], *, timeout: float,
              env: Mapping[str, str]) -> ExecResult:
        """Run ``argv`` as root in a fresh container of the same image (network off, the
        episode's memory, process and disk limits, a copy of ``eval_dir`` at ``/eval``
        in a volume of its own), then copy the scores file back.  Root there is the
        grading supervisor of :mod:`rgym_core.grader_kit`, which runs the grader and
        the submission's code as two other unprivileged users."""
        from docker.types import Mount

        if self.client is None:
            self.client = lifecycle.docker_client()
        if self.image is None:
            self.image = self._resolve_image()
        started = time.monotonic()
        eval_size = sum(p.stat().st_size for p in Path(eval_dir).rglob("*") if p.is_file())
        container = self._create("grader", network=False, caps=GRADER_CAPS,
                                 mounts=[Mount(target=EVAL_DIR, source=None, type="volume")],
                                 extra_mb=eval_size >> 20, workspace=False)
        try:
            tar = archives.ArchiveBuilder()
            tar.add_tree(Path(eval_dir), ".", uid=0, gid=0)
            with tar.finish() as data:
                container.put_archive(EVAL_DIR, data)
            container.start()
            environment = {"HOME": f"{EVAL_DIR}/home", **env}
            code, _, _, merged, timed_out = run_collect(
                self.client.api, container.id, _merged(argv), user="root", workdir=EVAL_DIR,
                environment=environment, timeout=timeout)
            scores = environment.get("RGYM_SCORES_FILE")
            if scores and scores.startswith(EVAL_DIR + "/") and not timed_out:
                self._fetch_scores(container, scores, Path(eval_dir))
            text, truncated = truncate_output(merged.decode("utf-8", "replace"),
                                              DEFAULT_OUTPUT_LIMIT)
            return ExecResult(TIMEOUT_EXIT_CODE if timed_out else (code if code is not None else 1),
                              text, timed_out=timed_out, truncated=truncated,
                              duration_s=time.monotonic() - started)
        finally:
            _remove_quietly(container)

    @staticmethod
    def _fetch_scores(container: Any, scores: str, eval_dir: Path) -> None:
        """Copy the grader's scores file back, as a regular file only (never a link)."""
        rel = posixpath.relpath(scores, EVAL_DIR)
        if rel.startswith("..") or "/" in rel and ".." in rel.split("/"):
            return
        try:
            chunks, _ = container.get_archive(scores)
        except Exception:  # noqa: BLE001 - no scores file: the grader's error
            return
        host = eval_dir / rel
        with tempfile.TemporaryDirectory(prefix=".rgym-scores-", dir=eval_dir) as tmp:
            produced = Path(tmp) / "scores"
            try:
                extract_archive(_ChunkReader(chunks), produced,  # type: ignore[arg-type]
                                root=posixpath.basename(rel),
                                quota_bytes=64 << 20)
            except (OSError, WorkspaceExportError):
                return  # not a regular file: the grader wrote no usable scores
            if produced.is_file() and not produced.is_symlink():
                host.parent.mkdir(parents=True, exist_ok=True)
                if host.is_symlink() or host.exists():
                    host.unlink()
                os.rename(produced, host)

    # -- the end ---------------------------------------------------------------------

    def describe(self) -> SandboxFacts:
        """What the agent is told about its machine: the container's memory, process
        and workspace limits, CPUs, GPUs and network."""
        lim = self.limits
        gpus = self.config.effective.gpus
        memory = f"{lim.memory_mb} MB (the container's limit, no swap)"
        if self.storage == "tmpfs":
            memory += "; files in the workspace and /tmp are held in memory and count against it"
        gpu_count: int | None = None
        if gpus and gpus.isdigit():
            gpu_count = int(gpus)
        elif gpus and gpus != "all":
            gpu_count = len(gpus.split(","))
        return SandboxFacts(
            backend="docker", user=f"{AGENT} (uid {AGENT_UID}, no capabilities)",
            cpus=lim.cpus or float(os.cpu_count() or 1), gpus=gpu_count,
            network="bridge" if self.config.effective.network else "none",
            memory=memory, memory_limit_mb=lim.memory_mb, pids_limit=lim.pids,
            disk_quota_mb=lim.disk_mb, isolation="container", image=self.image,
            workspace=WORKSPACE,
            extras={"storage": self.storage, "limits": lim.describe(self.storage),
                    **({"gpu_devices": gpus} if gpus == "all" else {})})

    def cleanup(self) -> None:
        """Remove the container (every process in it dies). Safe to call twice."""
        if self.shell is not None:
            self.shell.close()
        container, self.container = self.container, None
        self._closed = True
        lifecycle.untrack(self)
        if container is not None:
            _remove_quietly(container)
        client, self.client = self.client, None
        if client is not None:  # its pooled engine connections (a sweep runs thousands)
            with contextlib.suppress(Exception):
                client.close()


def reap(handle: Mapping[str, Any]) -> list[str]:
    """Kill what a killed run's container still runs (``SandboxSpec.reap``), keeping
    the container and its workspace.  Returns the command lines killed.

    A fresh root exec runs the supervisor's ``killall``; when the agent's processes
    leave no room for that exec (pids exhausted), the container is paused (the cgroup
    freezer: nothing forks), the agent's processes are killed from the host by their
    host pids (``docker top``: a local engine), and the exec is tried again."""

    if not handle.get("container"):
        return []
    client = lifecycle.docker_client()
    try:
        return _reap(client, handle)
    finally:
        client.close()


def _reap(client: Any, handle: Mapping[str, Any]) -> list[str]:
    import docker.errors

    try:
        container = client.containers.get(str(handle["container"]))
    except docker.errors.NotFound:
        return []
    if container.status not in ("running", "paused"):
        return []
    uid = str(handle.get("uid", AGENT_UID))
    killed: list[str] = []
    if container.status == "paused":
        container.unpause()
    for attempt in range(3):
        try:
            done = run_collect(client.api, container.id, supervisor_argv("killall", uid),
                               user="root", input=SUPERVISOR_SOURCE, timeout=60)
            if done.exit_code == 0:
                return killed + [str(x) for x in json.loads(done.stdout.decode() or "[]")]
        except (docker.errors.APIError, StreamClosed, ConnectionError, ValueError):
            pass
        if attempt < 2:
            killed += _kill_from_host(container, int(uid))
    raise SandboxError(f"could not stop the processes of container {container.short_id}",
                       "engine")


def export_left_workspace(handle: Mapping[str, Any], dest: Path, *,
                          exclude: Sequence[str] = ()) -> ExportReport:
    """Copy a killed run's workspace out of its container (call :func:`reap` first)
    into the new host folder ``dest``, then remove the container: what ``rgym grade``
    archives for a Docker run whose rgym process died."""
    box = DockerSandbox.attach(handle)
    try:
        return box.export_workspace(dest, exclude=exclude)
    finally:
        box.cleanup()


def _kill_from_host(container: Any, uid: int) -> list[str]:
    """Pause the container, SIGKILL its processes of ``uid`` by host pid (a local
    engine: their /proc is this host's), unpause (the kills land).  Their command
    lines are read from the host's /proc."""
    lines: list[str] = []
    container.pause()
    try:
        top = container.top(ps_args="-eo pid,uid")
        titles = [t.upper() for t in top.get("Titles", [])]
        for row in top.get("Processes") or []:
            info = dict(zip(titles, row, strict=False))
            if str(info.get("UID")) != str(uid) or not str(info.get("PID", "")).isdigit():
                continue
            pid = int(info["PID"])
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    raw = fh.read(800)
                os.kill(pid, 9)
            except OSError:
                continue  # gone, or not this host's process (a remote engine)
            text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
            lines.append(text if len(text) <= 200 else text[:197] + "...")
    finally:
        container.unpause()
    return lines


class _Background:
    """Run ``fn(*args)`` in a thread; :meth:`join` re-raises its exception."""

    def __init__(self, fn: Any, *args: Any) -> None:
        self.error: BaseException | None = None

        def target() -> None:
            try:
                fn(*args)
            except BaseException as exc:  # noqa: BLE001 - re-raised by join()
                self.error = exc

        self.thread = threading.Thread(target=target, name="rgym-docker-layout", daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


class _ChunkReader:
    """A file-like view of an iterator of byte chunks (``get_archive``)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = iter(chunks)
        self.buf = bytearray()

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self.buf) < size:
            try:
                self.buf += next(self.chunks)
            except StopIteration:
                break
        if size < 0:
            size = len(self.buf)
        out = bytes(self.buf[:size])
        del self.buf[:size]
        return out


def _remove_quietly(container: Any) -> None:
    """Remove a container and its volumes; one already gone or being removed is fine."""
    try:
        container.remove(force=True, v=True)
    except Exception as exc:  # noqa: BLE001 - already gone is fine
        if "No such container" not in str(exc) and "already in progress" not in str(exc):
            raise
