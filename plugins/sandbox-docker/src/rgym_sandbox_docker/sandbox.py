"""The ``docker`` sandbox: one container per episode.

* The container runs ``sleep infinity`` under ``docker-init`` from the task's image
  (``resources.image``, ``--image``, or the layered image of
  :mod:`rgym_sandbox_docker.images`, built on demand), labelled with the run id.
* Limits: memory (no extra swap), CPUs and process count from the task's resources
  (or the CLI); network ``none`` unless allowed; GPUs as device requests;
  ``no-new-privileges``.
* The workspace ``/home/agent/workspace`` belongs to ``agent`` (uid 1000); datasets
  are copied in at ``<workspace>/<mount>`` owned by root, read-only.  The grader's
  files never enter this container.
* Commands go to one persistent shell (:mod:`rgym_sandbox_docker.shell`); file reads
  and writes run as the agent so permissions are the agent's; ``copy_in`` and
  ``copy_out`` move tar archives.
* :meth:`DockerSandbox.grade` runs a grader in a separate short-lived container.
"""

from __future__ import annotations

import contextlib
import posixpath
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rgym_core.sandbox import (
    DEFAULT_OUTPUT_LIMIT,
    TIMEOUT_EXIT_CODE,
    ExecResult,
    Sandbox,
    SandboxConfig,
    SandboxError,
    WorkspaceLayout,
    truncate_output,
)
from rgym_sandbox_docker import archives, images, lifecycle
from rgym_sandbox_docker.execstream import StreamClosed, run_collect
from rgym_sandbox_docker.shell import KILLER, ShellSession

WORKSPACE = "/home/agent/workspace"
AGENT = "agent"
EVAL_DIR = "/eval"
#: Exit status of a process killed by SIGKILL (the OOM killer's signal).
KILLED_EXIT_CODE = 137
_FORK_FAILURES = ("fork: retry", "fork: Resource temporarily unavailable",
                  "Cannot allocate memory", "can't start new thread")


def _agent_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {"HOME": WORKSPACE, "USER": AGENT, "LOGNAME": AGENT, "SHELL": "/bin/bash"}
    env.update(extra)
    return env


def _merged(argv: list[str]) -> list[str]:
    """``argv`` with stderr sent to stdout inside the container: the engine carries
    the two on separate pipes and does not keep their relative order."""
    return ["sh", "-c", 'exec "$@" 2>&1', "sh", *argv]


class DockerSandbox(Sandbox):
    """An episode's container.  Options (``SandboxConfig.options``): ``base`` (the
    base image when the task image must be built), ``grace_s``."""

    workspace = WORKSPACE

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.client: Any = None
        self.container: Any = None
        self.image: str | None = None
        self.shell: ShellSession | None = None
        self._pending: SandboxError | None = None
        self._seen = {"oom": 0, "pids": 0}
        self._closed = False

    # -- creation ----------------------------------------------------------------

    def _limits(self) -> dict[str, Any]:
        res = self.config.resources
        kwargs: dict[str, Any] = {}
        if res.memory_mb:
            kwargs["mem_limit"] = f"{int(res.memory_mb)}m"
            kwargs["memswap_limit"] = f"{int(res.memory_mb)}m"  # no swap beyond the limit
        if res.cpus:
            kwargs["nano_cpus"] = int(res.cpus * 1e9)
        if res.pids:
            kwargs["pids_limit"] = int(res.pids)
        gpus = self.config.gpus if self.config.gpus is not None else (str(res.gpus) if res.gpus else None)
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

    def _resolve_image(self) -> str:
        explicit = self.config.image or self.config.resources.image
        if explicit:
            return explicit
        return images.task_image(self.client, self.config.resources.requirements,
                                 base=self.config.options.get("base"))

    def _create(self, role: str, network: bool) -> Any:
        assert self.image is not None
        return self.client.containers.run(
            self.image, ["sleep", "infinity"], detach=True, init=True, hostname="rgym",
            labels=lifecycle.labels_for(self.config.run_id, role, self.config.labels),
            network_mode="bridge" if network else "none", security_opt=["no-new-privileges"],
            environment=dict(self.config.env), **self._limits())

    def start(self, layout: WorkspaceLayout) -> None:
        """Create the container, lay out the workspace and start the shell."""
        self.client = lifecycle.docker_client()
        self.image = self._resolve_image()
        lifecycle.track(self)
        try:
            self.container = self._create("episode", self.config.network_enabled)
            tar = archives.ArchiveBuilder()
            tar.add_dir(WORKSPACE)
            if layout.starter is not None and layout.starter.is_dir():
                for entry in sorted(layout.starter.iterdir()):
                    tar.add_tree(entry, f"{WORKSPACE}/{entry.name}")
            for mount, prepared in sorted(layout.datasets.items()):
                dest = posixpath.normpath(f"{WORKSPACE}/{mount}")
                if not dest.startswith(WORKSPACE + "/"):
                    raise SandboxError(f"dataset mount '{mount}' leaves the workspace", "layout")
                for parent in archives.parents_below(WORKSPACE, dest):
                    tar.add_dir(parent)
                tar.add_tree(prepared.public, dest, uid=0, gid=0, read_only=True)
            with tar.finish() as data:
                self.container.put_archive("/", data)
            self.shell = ShellSession(self.client.api, self.container.id, user=AGENT,
                                      workdir=WORKSPACE, environment=_agent_env(self.config.env))
            self.shell.start()
        except BaseException:
            self.cleanup()
            raise

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
        except (docker.errors.APIError, StreamClosed, ConnectionError) as exc:
            failure = self._container_failure()
            if failure is not None:
                raise failure from exc
            raise SandboxError(f"the Docker engine failed: {exc}", "engine") from exc

    def run(self, command: str, *, timeout: float | None = None,
            output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        self._check_alive()
        assert self.shell is not None
        restarts = self.shell.restarts
        with self._engine_errors():
            result = self.shell.run(command, timeout=timeout, output_limit=output_limit)
        notes = []
        if self.shell.restarts != restarts:
            failure = self._container_failure()
            if failure is not None:
                raise failure  # the container itself died: not a shell that exited
            notes.append(f"[the shell session ended; the next command runs in a new one, in "
                         f"{self.shell.cwd}, without the old shell variables]")
        problem = self._diagnose(result)
        if problem is not None and problem.reason != "oom":  # the runner reports OOM via health()
            notes.append(f"[{problem}]")
        if notes:
            result.output = result.output + ("\n" if result.output and not
                                             result.output.endswith("\n") else "") + "\n".join(notes) + "\n"
        return result

    def _diagnose(self, result: ExecResult) -> SandboxError | None:
        """Explain an OOM or pids-limit kill, and remember it for :meth:`health`."""
        suspicious = result.exit_code == KILLED_EXIT_CODE or any(
            s in result.output for s in _FORK_FAILURES)
        if not suspicious:
            return None
        counters = self._counters()
        res = self.config.resources
        if counters["oom"] > self._seen["oom"]:
            self._seen["oom"] = counters["oom"]
            msg = (f"a process was killed by the out-of-memory killer: the sandbox's memory "
                   f"limit is {res.memory_mb} MB")
            self._pending = SandboxError(msg, "oom")
            return self._pending
        if counters["pids"] > self._seen["pids"]:
            self._seen["pids"] = counters["pids"]
            msg = f"the process-count limit ({res.pids} processes) was reached; fork failed"
            self._pending = SandboxError(msg, "pids")
            return self._pending
        return None

    def _counters(self) -> dict[str, int]:
        """OOM kills and refused forks so far (cgroup v1 or v2 files)."""
        try:
            out = run_collect(
                self.client.api, self.container.id,
                ["sh", "-c", "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/pids.events "
                             "/sys/fs/cgroup/memory/memory.oom_control "
                             "/sys/fs/cgroup/pids/pids.events 2>/dev/null; true"],
                user="root", timeout=30).stdout
        except Exception:  # noqa: BLE001 - the engine could not start a process in it
            out = b""
        counts = {"oom": 0, "pids": 0}
        for line in out.decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                if parts[0] == "oom_kill":
                    counts["oom"] = max(counts["oom"], int(parts[1]))
                elif parts[0] == "max":
                    counts["pids"] = max(counts["pids"], int(parts[1]))
        return counts

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
                                f"(memory limit {self.config.resources.memory_mb} MB)", "oom")
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
        started = time.monotonic()
        t0 = time.time()
        environment = _agent_env({**self.config.env, **(env or {})})
        with self._engine_errors():
            code, _, _, merged, timed_out = run_collect(
                self.client.api, self.container.id, _merged(argv), user=AGENT,
                workdir=self._abs(cwd) if cwd else WORKSPACE, environment=environment,
                input=input.encode() if input is not None else None, timeout=timeout)
            if timed_out:
                self._kill_since(t0)
        text, truncated = truncate_output(merged.decode("utf-8", "replace"), output_limit)
        return ExecResult(TIMEOUT_EXIT_CODE if timed_out else (code if code is not None else 1),
                          text, timed_out=timed_out, truncated=truncated,
                          duration_s=time.monotonic() - started)

    def _kill_since(self, t0: float) -> None:
        """Kill every agent process started since ``t0`` except the shell (from a second exec)."""
        shell_pid = str(self.shell.pid) if self.shell and self.shell.pid else "1"
        run_collect(self.client.api, self.container.id,
                    ["python3", "-c", KILLER, shell_pid, str(t0 - 0.2), "/dev/null", "-", "-1",
                     "/dev/null"], user=AGENT, timeout=30)

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
        self._check_alive()
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(f"{src}: no such file or directory on the host")
        target = self._abs(dest)
        code, _, err, _, _ = run_collect(self.client.api, self.container.id,
                                         ["mkdir", "-p", "--", posixpath.dirname(target)],
                                         user=AGENT, timeout=60)
        if code != 0:
            self._raise_for(dest, err.decode(errors="replace"))
        tar = archives.ArchiveBuilder()
        tar.add_tree(src, target)
        with tar.finish() as data:
            self.container.put_archive("/", data)

    def copy_out(self, src: str, dest: Path) -> None:
        self._check_alive()
        import docker.errors

        target = self._abs(src)
        # the agent's view decides: a path it cannot read is not copied out
        code, out, err, _, _ = run_collect(
            self.client.api, self.container.id,
            ["find", target, "!", "-readable", "-print", "-quit"], user=AGENT, timeout=120)
        if code != 0 or out.strip():
            self._raise_for(src, err.decode(errors="replace") if code != 0
                            else "Permission denied")
        try:
            chunks, _ = self.container.get_archive(target)
        except docker.errors.NotFound as exc:
            raise FileNotFoundError(f"{src}: no such file or directory in the sandbox") from exc
        archives.extract_stream(chunks, Path(dest))

    # -- grading -------------------------------------------------------------------

    def grade(self, eval_dir: Path, argv: list[str], *, timeout: float,
              env: Mapping[str, str]) -> ExecResult:
        """Run ``argv`` in a fresh container of the same image, network off, with a
        copy of ``eval_dir`` at ``/eval``; copy the scores file back."""
        if self.client is None:
            self.client = lifecycle.docker_client()
        if self.image is None:
            self.image = self._resolve_image()
        started = time.monotonic()
        container = self._create("grader", network=False)
        try:
            tar = archives.ArchiveBuilder()
            tar.add_tree(Path(eval_dir), EVAL_DIR)
            with tar.finish() as data:
                container.put_archive("/", data)
            environment = _agent_env({"HOME": EVAL_DIR, **env})
            code, _, _, merged, timed_out = run_collect(
                self.client.api, container.id, _merged(argv), user=AGENT, workdir=EVAL_DIR,
                environment=environment, timeout=timeout)
            scores = environment.get("RGYM_SCORES_FILE")
            if scores and scores.startswith(EVAL_DIR + "/") and not timed_out:
                host = Path(eval_dir) / posixpath.relpath(scores, EVAL_DIR)
                try:
                    chunks, _ = container.get_archive(scores)
                except Exception:  # noqa: BLE001 - no scores file: the grader's error
                    pass
                else:
                    archives.extract_stream(chunks, host)
            text, truncated = truncate_output(merged.decode("utf-8", "replace"),
                                              DEFAULT_OUTPUT_LIMIT)
            return ExecResult(TIMEOUT_EXIT_CODE if timed_out else (code if code is not None else 1),
                              text, timed_out=timed_out, truncated=truncated,
                              duration_s=time.monotonic() - started)
        finally:
            _remove_quietly(container)

    # -- the end ---------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        res = self.config.resources
        return {"backend": "docker", "image": self.image, "memory_mb": res.memory_mb,
                "cpus": res.cpus, "pids": res.pids, "network": self.config.network_enabled,
                "gpus": self.config.gpus or (res.gpus or None)}

    def cleanup(self) -> None:
        """Remove the container (every process in it dies). Safe to call twice."""
        if self.shell is not None:
            self.shell.close()
        container, self.container = self.container, None
        self._closed = True
        lifecycle.untrack(self)
        if container is not None:
            _remove_quietly(container)


def _remove_quietly(container: Any) -> None:
    """Remove a container; one already gone or being removed is fine."""
    try:
        container.remove(force=True, v=True)
    except Exception as exc:  # noqa: BLE001 - already gone is fine
        if "No such container" not in str(exc) and "already in progress" not in str(exc):
            raise
