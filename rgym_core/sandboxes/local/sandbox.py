"""The ``rgym/local`` sandbox: one episode on this machine, confined as well as
the machine allows (see :mod:`rgym_core.sandboxes.local.confinement`)."""

from __future__ import annotations

import logging
import os
import select
import subprocess
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from attrs import define

from rgym_core.sandbox import (
    DEFAULT_OUTPUT_LIMIT,
    TIMEOUT_EXIT_CODE,
    ExecResult,
    Sandbox,
    SandboxConfig,
    SandboxError,
    SandboxFacts,
    WorkspaceLayout,
)
from rgym_core.sandboxes.local import procs
from rgym_core.sandboxes.local.confinement import (
    MODE_BUBBLEWRAP,
    MODE_NONE,
    MODE_UID,
    SANDBOX_ID_VAR,
    Confinement,
)
from rgym_core.sandboxes.local.files import AgentFiles, os_error
from rgym_core.sandboxes.local.layout import (
    create_root,
    ensure_interpreter_reachable,
    lay_out,
    remove_tree,
)
from rgym_core.sandboxes.local.settings import unenforced_settings, visible_devices
from rgym_core.sandboxes.local.shell import COMMAND_ID_VAR, ShellSession
from rgym_core.sandboxes.output import OutputCollector
from rgym_core.workspace_export import ExportReport

log = logging.getLogger("rgym_core.sandboxes.local")
_READ_SIZE = 1 << 16
MIB = 1 << 20


@define
class _State:
    """What cleanup needs; kept apart from the sandbox so a finalizer can hold it."""

    sandbox_id: str
    conf: Confinement | None = None
    shell: ShellSession | None = None
    root: Path | None = None
    done: bool = False


def _cleanup_state(state: _State) -> None:
    if state.done:
        return
    state.done = True
    sessions: set[int] = set()
    if state.shell is not None:
        sessions = set(state.shell.sessions)
        state.shell.close()
    try:
        if state.conf is not None:
            state.conf.kill_all(sessions)
    finally:
        try:
            if state.root is not None and state.root.exists():
                remove_tree(state.root)
        finally:
            if state.conf is not None:
                state.conf.close()


class LocalSandbox(Sandbox):
    """A workspace on this machine with a persistent bash session.

    ``config.work_root`` is the folder that receives the episode's folder
    (default: the system temp folder).  ``config.options``: ``bubblewrap``
    (``auto`` (default), ``true``: fail without it, ``false``: do not use it),
    ``pids_default`` (process limit when the task sets none, default 2048).
    """

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.sandbox_id = uuid.uuid4().hex[:16]
        self.workspace = ""
        self._state = _State(sandbox_id=self.sandbox_id)
        self._finalizer = weakref.finalize(self, _cleanup_state, self._state)
        self._lock = threading.RLock()
        self._env: dict[str, str] = {}
        self._counter = 0
        self._files: AgentFiles | None = None
        self._unenforced: list[str] = []
        self._frozen: list[procs.Frozen] = []

    # -- lifecycle --------------------------------------------------------------

    @property
    def confinement(self) -> Confinement:
        if self._state.conf is None:
            raise SandboxError("the sandbox is not started: call start(layout) first",
                               reason="not_started")
        return self._state.conf

    @property
    def mode(self) -> str:
        """``bubblewrap``, ``uid`` or ``none`` (see the confinement module)."""
        return self.confinement.mode

    @property
    def has_agent_user(self) -> bool:
        """True when agent commands run as a uid other than rgym's."""
        return self.confinement.separate_user

    @property
    def host_workspace(self) -> Path:
        """The workspace folder on the host (not the agent's view of it)."""
        path = self.confinement.host_workspace
        assert path is not None
        return path

    def start(self, layout: WorkspaceLayout) -> None:
        if self._state.conf is not None:
            raise SandboxError("the sandbox is already started", reason="started")
        conf = Confinement(self.config, self.sandbox_id)
        self._state.conf = conf
        root = create_root(self.config.work_root, self.config.run_id)
        self._state.root = root
        try:
            conf.prepare(root)
            self.workspace = conf.workspace
            binds = lay_out(conf, layout)
            if conf.mode == MODE_UID:
                ensure_interpreter_reachable(conf.uid, conf.gid)
            self._env = self._make_env()
            conf.start(self._env, binds)
            if conf.mode == MODE_UID:
                self._check_workspace_reachable()
            self._unenforced = unenforced_settings(
                self.config, network_isolated=conf.mode == MODE_BUBBLEWRAP)
            for message in self._unenforced:
                log.warning("%s", message)
            shell = ShellSession(conf, self._env, self.workspace, self.sandbox_id)
            self._state.shell = shell
            shell.start()
            self._files = AgentFiles(conf, self.sandbox_id, self.workspace)
        except BaseException:
            self.cleanup()
            raise

    def _check_workspace_reachable(self) -> None:
        probe = self._run_agent(["sh", "-c", 'cd "$1" && test -w .', "probe", self.workspace])
        if probe.returncode != 0:
            raise SandboxError(
                f"the agent user cannot enter the workspace {self.workspace} "
                f"({probe.stderr.decode(errors='replace').strip() or 'not writable'}): a folder "
                "above it is closed to other users; choose a work_root they can traverse "
                "(e.g. under /tmp)", reason="workspace")

    def _run_agent(self, argv: list[str]) -> subprocess.CompletedProcess[bytes]:
        proc = self.confinement.popen(argv, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C",
                                                 SANDBOX_ID_VAR: self.sandbox_id},
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE)
        out, err = proc.communicate()
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def _make_env(self) -> dict[str, str]:
        conf = self.confinement
        ws = self.workspace
        name = "agent" if conf.mode == MODE_BUBBLEWRAP or conf.separate_user else \
            conf._own_name()
        env = {
            "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin",
                                     "/usr/bin", "/bin", f"{ws}/.local/bin"]),
            "HOME": ws, "USER": name, "LOGNAME": name, "SHELL": "/bin/bash",
            "LANG": "C.UTF-8", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat",
            "RGYM_WORKSPACE": ws,
        }
        devices = visible_devices(self.config.effective.requested_gpus)
        if devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = devices
        env.update(self.config.env)
        env[SANDBOX_ID_VAR] = self.sandbox_id
        return env

    def cleanup(self) -> None:
        with self._lock:
            self._finalizer()

    # -- the episode's processes ---------------------------------------------------

    def _agent_process(self, pid: int) -> bool:
        conf = self._state.conf
        return conf is not None and conf.in_sandbox(pid)

    def freeze(self) -> None:
        """SIGSTOP every process of the episode (its pid namespace, leased uid or,
        without either, its marked environment) until :meth:`thaw`."""
        with self._lock:
            self._require_started()
            if self._frozen:
                return
            self._frozen, complete = procs.freeze_matching(self._agent_process)
            if not complete:
                log.warning("rgym/local: a process of the episode did not stop within 5 s "
                            "(uninterruptible sleep); the snapshot is taken anyway")

    def thaw(self) -> None:
        with self._lock:
            frozen, self._frozen = self._frozen, []
            procs.thaw(frozen)

    def kill_processes(self) -> list[str]:
        """Kill every process of the episode, the persistent shell included (the
        workspace stays, so it can still be copied out); return the command lines of
        the agent's own processes that were still running (not the idle shell)."""
        with self._lock:
            if self._state.conf is None or self._state.done:
                return []
            shell = self._state.shell
            shell_pid = shell.pid if shell is not None else None
            self._frozen = []
            named = procs.kill_named(self._agent_process)
            if shell is not None:
                shell.close()
            return [name for pid, name in named if name and pid != shell_pid]

    def reap_handle(self) -> dict[str, object]:
        conf = self._state.conf
        if conf is None:
            return {}
        from rgym_core.sandboxes.local.reap import handle_of

        return handle_of(conf)

    def health(self) -> SandboxError | None:
        conf = self._state.conf
        if conf is not None and not self._state.done and not conf.alive():
            return SandboxError("the local sandbox ended: its namespace's first process is "
                                "gone, and every process of the episode with it",
                                reason="gone")
        return None

    def _require_started(self) -> None:
        if self._state.done:
            raise SandboxError("the sandbox was cleaned up", reason="closed")
        if self._state.shell is None or not self.workspace:
            raise SandboxError("the sandbox is not started: call start(layout) first",
                               reason="not_started")
        failure = self.health()
        if failure is not None:
            raise failure

    # -- the persistent shell ------------------------------------------------------

    def run(self, command: str, *, timeout: float | None = None,
            output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        with self._lock:
            self._require_started()
            shell = self._state.shell
            assert shell is not None
            return shell.run(command, timeout=timeout, output_limit=output_limit)

    # -- one-shot processes ---------------------------------------------------------

    def exec(self, argv: list[str], *, timeout: float | None = None, cwd: str | None = None,
             env: Mapping[str, str] | None = None, input: str | None = None,
             output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        self._require_started()
        conf = self.confinement
        began = time.monotonic()
        workdir = self._resolve(cwd) if cwd else self.workspace
        full_env = dict(self._env)
        full_env.update(env or {})
        with self._lock:
            self._counter += 1
            command_id = f"{self.sandbox_id}.x{self._counter}"
        full_env[COMMAND_ID_VAR] = command_id
        full_env[SANDBOX_ID_VAR] = self.sandbox_id
        if not argv:
            raise ValueError("empty command")
        try:
            proc = conf.popen(argv, env=full_env, cwd=workdir, bufsize=0,
                              start_new_session=True,
                              stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as exc:
            if exc.filename == workdir:
                raise
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            return ExecResult(exit_code=code, output=f"{argv[0]}: {exc.strerror}\n",
                              duration_s=time.monotonic() - began)
        collector = OutputCollector(output_limit)
        deadline = None if timeout is None else began + timeout
        timed_out = not _pump(proc, collector, deadline,
                              (input or "").encode() if input is not None else None)
        if timed_out:
            needle = procs.needle(COMMAND_ID_VAR, command_id)
            procs.kill_matching(lambda p: procs.session_of(p) == proc.pid
                                or procs.environ_has(p, needle))
            proc.wait()
            _pump(proc, collector, time.monotonic() + 0.2, None)
        assert proc.stdout is not None
        proc.stdout.close()
        output, truncated = collector.text()
        if workdir != self.workspace and conf.mode != MODE_NONE and proc.returncode == 125 \
                and "cd: " in output[:2000]:
            raise os_error(output, workdir)
        return ExecResult(exit_code=TIMEOUT_EXIT_CODE if timed_out
                          else procs.exit_code(proc.returncode),
                          output=output, timed_out=timed_out, truncated=truncated,
                          duration_s=time.monotonic() - began)

    # -- files ---------------------------------------------------------------------

    def _resolve(self, path: str) -> str:
        return path if os.path.isabs(path) else os.path.join(self.workspace, path)

    @property
    def files(self) -> AgentFiles:
        self._require_started()
        assert self._files is not None
        return self._files

    def read_file(self, path: str) -> bytes:
        return self.files.read(path)

    def write_file(self, path: str, data: bytes | str) -> None:
        self.files.write(path, data)

    def copy_in(self, src: Path, dest: str) -> None:
        self.files.copy_in(src, dest)

    def copy_out(self, src: str, dest: Path) -> None:
        """Copy the sandbox file or folder ``src`` to the host path ``dest`` (the
        copy's own name), owned by the current user, under the rules of
        :mod:`rgym_core.workspace_export` (only regular files and folders; links
        to outside dropped; the workspace quota applies)."""
        self.files.copy_out(src, Path(dest), quota_bytes=self.config.effective.disk_mb * MIB)

    def export_workspace(self, dest: Path, *, exclude: Sequence[str] = (),
                         include: Sequence[str] | None = None,
                         quota_bytes: int | None = None,
                         timeout: float | None = None) -> ExportReport:
        quota = quota_bytes if quota_bytes is not None else self.config.effective.disk_mb * MIB
        return self.files.export(Path(dest), exclude=exclude, include=include,
                                 quota_bytes=quota,
                                 timeout=timeout if timeout is not None else 1800.0)

    # -- facts -------------------------------------------------------------------

    def describe(self) -> SandboxFacts:
        conf = self.confinement
        res = self.config.effective
        if conf.mode == MODE_BUBBLEWRAP:
            network = "host" if conf.network else "none (loopback only)"
            isolation = ("bubblewrap (own mount, pid and network namespaces)" if not conf.network
                         else "bubblewrap (own mount and pid namespaces; host network)")
        else:
            network = "host"
            isolation = ("separate user, no namespaces (bubblewrap unavailable)"
                         if conf.mode == MODE_UID else "none (bubblewrap unavailable)")
        memory = available = None
        mem = _meminfo()
        if mem:
            avail, total = mem.get("MemAvailable", 0), mem.get("MemTotal", 0)
            memory = f"{avail / 2**20:.1f} GiB available of {total / 2**20:.1f} GiB"
            if res.memory_mb:
                memory += f" ({res.memory_mb} MiB per process)"
            available = avail // 1024
        return SandboxFacts(
            backend="local", user=conf.user_text(), cpus=len(os.sched_getaffinity(0)),
            gpus=_gpu_count(), network=network, memory=memory, memory_available_mb=available,
            memory_limit_mb=res.memory_mb, pids_limit=conf.pids_limit,
            disk_quota_mb=res.disk_mb, isolation=isolation, workspace=self.workspace,
            unenforced=tuple(conf.warnings() + self._unenforced))


def _pump(proc: subprocess.Popen[bytes], collector: OutputCollector, deadline: float | None,
          data: bytes | None) -> bool:
    """Feed ``data`` to the process and collect its output until it exits and its
    output ends; False on reaching the deadline."""
    assert proc.stdout is not None
    out_fd = proc.stdout.fileno()
    os.set_blocking(out_fd, False)
    poll = select.poll()
    poll.register(out_fd, select.POLLIN)
    in_fd = None
    if proc.stdin is not None:
        if data:
            in_fd = proc.stdin.fileno()
            os.set_blocking(in_fd, False)
            poll.register(in_fd, select.POLLOUT)
        else:
            proc.stdin.close()
    view = memoryview(data or b"")
    exited_at: float | None = None
    eof = False
    while True:
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return False
        if eof and proc.poll() is not None:
            return True
        if proc.poll() is not None:
            # Children that outlive it may hold the output open: wait a little only.
            exited_at = exited_at or now
            if now - exited_at > 0.2:
                return True
        wait = 50 if eof or exited_at else 200
        if deadline is not None:
            wait = min(wait, int((deadline - now) * 1000) + 1)
        for fd, _event in poll.poll(wait):
            if fd == out_fd:
                try:
                    chunk = os.read(out_fd, _READ_SIZE)
                except BlockingIOError:
                    continue
                if chunk:
                    collector.feed(chunk)
                else:
                    eof = True
                    poll.unregister(out_fd)
            elif fd == in_fd:
                try:
                    view = view[os.write(in_fd, view[:_READ_SIZE]):]
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    view = view[:0]
                if not view:
                    poll.unregister(in_fd)
                    assert proc.stdin is not None
                    proc.stdin.close()
                    in_fd = None
        if eof and proc.poll() is None:
            try:
                proc.wait(timeout=None if deadline is None
                          else max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False


def _meminfo() -> dict[str, int]:
    """/proc/meminfo in kB."""
    try:
        with open("/proc/meminfo") as f:
            return {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in f) if v}
    except OSError:
        return {}


_gpus: int | None = None


def _gpu_count() -> int:
    global _gpus
    if _gpus is None:
        try:
            proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
            _gpus = sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.TimeoutExpired):
            _gpus = 0
    return _gpus


__all__ = ["MODE_BUBBLEWRAP", "MODE_NONE", "MODE_UID", "LocalSandbox"]
