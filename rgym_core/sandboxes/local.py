"""The ``rgym/local`` sandbox: a workspace folder on this machine and a persistent bash.

Isolation depends on how rgym runs:

* **as root** (CI, containers): every agent command runs as the unprivileged
  user ``rgym-agent`` (created once with ``useradd``).  The workspace belongs to
  it; dataset copies belong to root (folders 0755, files 0644), so the agent can
  read them but neither write, delete nor chmod them, and it cannot read
  root-only files such as the grader's hidden folder.
* **as another user**: commands run as that user and dataset files are made
  read-only (``a-w``), which the agent could undo.  Full protection needs root
  or the Docker backend.

Neither mode limits memory, CPUs, processes, GPUs or the network; use the Docker
backend for that.  :func:`unenforced_settings` names, as warnings at start, each
such limit the user or the task asked for.

The shell is one ``bash --noprofile --norc`` per sandbox, in its own session,
reading commands from a pipe (its stdin is ``/dev/null``).  After each command
it prints a done-marker line (unique to the session) with the exit status and
the working directory, so a round trip costs a few tens of microseconds.
"""

from __future__ import annotations

import errno
import logging
import os
import pwd
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attrs import define, field

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

log = logging.getLogger(__name__)

#: The unprivileged user agent commands run as when rgym runs as root.
AGENT_USER = "rgym-agent"
#: Set in every agent process; :meth:`LocalSandbox.cleanup` finds strays by it.
SANDBOX_ID_VAR = "RGYM_SANDBOX_ID"
#: Set per command, so a timeout kills only that command's processes.
COMMAND_ID_VAR = "RGYM_COMMAND_ID"

_READ_SIZE = 1 << 16
#: How long a timed-out command's shell gets to report after its processes are killed.
_SHELL_GRACE_S = 2.0
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))
_user_lock = threading.Lock()
_reachable: set[tuple[int, str]] = set()


# -- output collection -----------------------------------------------------------


def _truncation_marker(cut: int) -> str:
    # Same words as rgym_core.sandbox.truncate_output.
    return (f"\n[... {cut} characters truncated; redirect output to a file and read it "
            "in parts ...]\n")


class _Collector:
    """Gathers a command's output, keeping only a head and a tail within the cap.

    With a ``done`` tag pair it also watches for the shell's done-marker line
    ``<start>STATUS PWD<end>``.
    """

    def __init__(self, limit: int, start_tag: bytes | None = None,
                 end_tag: bytes | None = None) -> None:
        self.limit = limit
        head_chars = limit * 2 // 3
        self.head_cap = 4 * head_chars + 4
        self.tail_cap = 4 * (limit - head_chars) + 16384
        self.head: bytes | None = None
        self.buf = bytearray()
        self.dropped_chars = 0
        self.start_tag = start_tag
        self.end_tag = end_tag
        self.scan = 0
        self.marker: tuple[int, int] | None = None

    def feed(self, chunk: bytes) -> bool:
        """Add output; return True once the done-marker has arrived."""
        buf = self.buf
        buf += chunk
        if self.end_tag is not None:
            pos = buf.find(self.end_tag, self.scan)
            if pos >= 0:
                start = buf.rfind(self.start_tag, 0, pos)  # type: ignore[arg-type]
                if start >= 0:
                    self.marker = (start, pos + len(self.end_tag))
                    return True
            self.scan = max(0, len(buf) - len(self.end_tag) + 1)
        if self.limit > 0 and len(buf) > self.head_cap + 2 * self.tail_cap:
            self._trim()
        return False

    def _trim(self) -> None:
        buf = self.buf
        removed = 0
        if self.head is None:
            cut = self.head_cap
            while cut > 0 and buf[cut] & 0xC0 == 0x80:
                cut -= 1
            self.head = bytes(buf[:cut])
            del buf[:cut]
            removed += cut
        excess = len(buf) - self.tail_cap
        while excess < len(buf) and buf[excess] & 0xC0 == 0x80:
            excess += 1
        self.dropped_chars += len(bytes(buf[:excess]).translate(None, _CONTINUATION_BYTES))
        del buf[:excess]
        removed += excess
        self.scan = max(0, self.scan - removed)

    def done(self) -> tuple[int, str, bytes] | None:
        """``(status, pwd, bytes after the marker)`` once the marker arrived."""
        if self.marker is None:
            return None
        start, end = self.marker
        inner = bytes(self.buf[start + len(self.start_tag):end - len(self.end_tag)])  # type: ignore[arg-type]
        status, _, pwd = inner.partition(b" ")
        return int(status), pwd.decode("utf-8", "replace"), bytes(self.buf[end:])

    def text(self) -> tuple[str, bool]:
        """The output (without the marker), truncated as :func:`truncate_output` does."""
        body = self.buf if self.marker is None else self.buf[:self.marker[0]]
        if self.head is None:
            text = body.decode("utf-8", "replace")
            return truncate_output(text, self.limit) if self.limit > 0 else (text, False)
        head = self.head.decode("utf-8", "replace")
        tail = body.decode("utf-8", "replace")
        h = self.limit * 2 // 3
        t = self.limit - h
        cut = len(head) + self.dropped_chars + len(tail) - h - t
        return head[:h] + _truncation_marker(cut) + tail[len(tail) - t:], True


# -- processes ----------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int] | None:
    """``(ppid, session id)`` of a live (not zombie) process, else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[1]), int(fields[3])


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


#: How long ``run`` polls the shell's pipe before it sleeps (adaptive spinning).
_SPIN_S = 0.0002


def _boot_ticks() -> int:
    """Now, in the clock ticks /proc/PID/stat counts start times in."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _CLOCK_TICKS)


def _started_at(pid: int) -> int | None:
    """When a process started, in clock ticks since boot."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return int(data[data.rfind(b")") + 2:].split()[19])


def _environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in b"\0" + f.read()
    except OSError:
        return False


def _uid_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _pids() -> list[int]:
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def _kill_matching(match: Callable[[int], bool], exclude: set[int] | None = None) -> int:
    """SIGKILL every process ``match`` accepts, again and again until none is left
    (a process may fork while we scan); return how many were killed."""
    skip = {os.getpid()} | (exclude or set())
    killed = 0
    for _ in range(50):
        found = [p for p in _pids() if p not in skip and _stat(p) is not None and match(p)]
        if not found:
            break
        # Stop them all first, so none runs again to report a dying child.
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in found:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    continue
                killed += sig == signal.SIGKILL
        time.sleep(0.002)
    return killed


def _needle(name: str, value: str) -> bytes:
    return f"\0{name}={value}\0".encode()


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


# -- the agent user -------------------------------------------------------------------


def ensure_agent_user(name: str = AGENT_USER) -> pwd.struct_passwd:
    """Create the unprivileged system user ``name`` once (needs root); safe to race."""
    with _user_lock:
        for _ in range(50):
            try:
                return pwd.getpwnam(name)
            except KeyError:
                pass
            proc = subprocess.run(["useradd", "--system", "--create-home", "--user-group",
                                   "--shell", "/bin/bash", name],
                                  capture_output=True, text=True)
            # 9: the user exists (another process won the race); 10: passwd file locked.
            if proc.returncode not in (0, 9, 10):
                raise SandboxError(f"cannot create the sandbox user '{name}' with useradd "
                                   f"(exit {proc.returncode}): {proc.stderr.strip()}; create it "
                                   "by hand or use the docker sandbox", reason="user")
            if proc.returncode == 10:
                time.sleep(0.1)
        return pwd.getpwnam(name)


def _user_kwargs(user: pwd.struct_passwd | None) -> dict[str, Any]:
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def ensure_interpreter_reachable(user: pwd.struct_passwd) -> list[str]:
    """Make sure ``user`` can run :data:`sys.executable`.

    If it cannot, grant traverse-only permission (``o+x``, never read) on the
    ancestor folders that block it, log one warning naming them, and return them.
    """
    key = (user.pw_uid, sys.executable)
    if key in _reachable:
        return []

    def probe() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", "import site"], capture_output=True,
                              text=True, cwd="/", env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
                              **_user_kwargs(user))

    changed: list[str] = []
    try:
        ok = probe().returncode == 0
    except PermissionError:
        ok = False
    if not ok:
        targets = {sys.executable, os.path.realpath(sys.executable), sys.prefix,
                   sys.base_prefix, sys.exec_prefix}
        for target in sorted(targets):
            for folder in reversed(Path(target).parents):
                mode = os.stat(folder).st_mode
                if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                    os.chmod(folder, stat.S_IMODE(mode) | stat.S_IXOTH)
                    changed.append(str(folder))
        if changed:
            log.warning("rgym local sandbox: the agent user '%s' could not run %s; granted "
                        "traverse-only permission (o+x) on: %s", user.pw_name, sys.executable,
                        ", ".join(changed))
        try:
            result = probe()
            error = result.stderr.strip() if result.returncode else ""
        except PermissionError as exc:
            error = str(exc)
        if error:
            raise SandboxError(f"the agent user '{user.pw_name}' cannot run {sys.executable}: "
                               f"{error}; install Python where other users can read it",
                               reason="interpreter")
    _reachable.add(key)
    return changed


# -- file errors -------------------------------------------------------------------


_ERRORS = (("No such file", FileNotFoundError, errno.ENOENT),
           ("Permission denied", PermissionError, errno.EACCES),
           ("Operation not permitted", PermissionError, errno.EPERM),
           ("Is a directory", IsADirectoryError, errno.EISDIR),
           ("Not a directory", NotADirectoryError, errno.ENOTDIR))


def _os_error(message: str, path: str) -> OSError:
    """The exception Python would raise for a tool's error ``message`` about ``path``."""
    for words, cls, code in _ERRORS:
        if words in message:
            return cls(code, os.strerror(code), path)
    return OSError(errno.EIO, message.strip() or "failed", path)


# -- settings this backend cannot enforce ---------------------------------------------


def _visible_devices(gpus: str | None) -> str | None:
    """CUDA_VISIBLE_DEVICES for ``--gpus``: a count ``N`` means the first N devices
    (as the Docker backend reads it), a comma list names devices, ``all`` (or
    nothing) leaves the variable unset."""
    if gpus is None or gpus.strip() in ("", "all"):
        return None
    gpus = gpus.strip()
    return ",".join(str(i) for i in range(int(gpus))) if gpus.isdigit() else gpus


def unenforced_settings(config: SandboxConfig) -> list[str]:
    """One warning line per limit the user or the task set that this backend cannot
    enforce.  The task's default (network off) is not warned about, only an
    explicit ``--no-network``."""
    docker = "--sandbox docker"
    found: list[str] = []
    asked = config.explicit

    def wanted(name: str) -> bool:
        return asked is None or name in asked

    if config.network is False and wanted("network"):
        found.append("--no-network is not enforced by the local sandbox: agent commands "
                     f"can reach the network (use {docker} for network isolation)")
    res = config.resources
    for flag, what, value, name in (
            ("--memory", "memory limit", res.memory_mb and f"{res.memory_mb} MB", "memory_mb"),
            ("--cpus", "CPU limit", res.cpus and f"{res.cpus:g} CPUs", "cpus"),
            ("--pids", "process limit", res.pids, "pids")):
        if value is not None and wanted(name):
            found.append(f"the {what} ({value}; {flag} or the task's resources) is not "
                         f"enforced by the local sandbox (use {docker} to enforce it)")
    if config.gpus is not None and wanted("gpus"):
        devices = _visible_devices(config.gpus)
        applied = ("the agent sees every GPU of this machine" if devices is None else
                   f"it only sets CUDA_VISIBLE_DEVICES={devices!r}, which programs may ignore")
        found.append(f"--gpus {config.gpus} is not enforced by the local sandbox: {applied} "
                     f"(use {docker} to restrict GPUs)")
    image, source = (config.image, "--image") if config.image else (res.image, "the task's image")
    if image and wanted("image"):
        found.append(f"{source} {image} is not used by the local sandbox: commands run on "
                     f"this machine with {sys.executable} (use {docker} to run in the image)")
    return [f"rgym/local: {line}" for line in found]


# -- the sandbox ---------------------------------------------------------------------


@define
class _State:
    """What cleanup needs; kept apart from the sandbox so a finalizer can hold it."""

    sandbox_id: str
    root: Path | None = None
    shell: subprocess.Popen[bytes] | None = None
    command_fd: int | None = None
    sessions: set[int] = field(factory=set)
    agent_uid: int = field(factory=os.getuid)
    done: bool = False


def _close_shell(state: _State) -> None:
    shell = state.shell
    if shell is not None:
        if shell.poll() is None:
            try:
                os.kill(shell.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shell.wait()
        if shell.stdout is not None:
            shell.stdout.close()
    if state.command_fd is not None:
        os.close(state.command_fd)
    state.shell = None
    state.command_fd = None


def _remove_tree(path: Path) -> None:
    def fix(func: Callable[..., Any], name: str, exc: Any) -> None:
        parent = os.path.dirname(name)
        try:
            os.chmod(parent, stat.S_IMODE(os.lstat(parent).st_mode) | stat.S_IWUSR | stat.S_IXUSR)
            func(name)
        except OSError:
            pass

    shutil.rmtree(path, onerror=fix)
    if path.exists():
        log.warning("rgym local sandbox: could not remove %s entirely", path)


def _cleanup_state(state: _State) -> None:
    if state.done:
        return
    state.done = True
    _close_shell(state)
    needle = _needle(SANDBOX_ID_VAR, state.sandbox_id)
    sessions, uid = state.sessions, state.agent_uid
    _kill_matching(lambda p: _environ_has(p, needle)
                   or (_stat(p) or (0, 0))[1] in sessions and _uid_of(p) == uid)
    if state.root is not None and state.root.exists():
        _remove_tree(state.root)


class LocalSandbox(Sandbox):
    """A workspace folder on this machine with a persistent bash session.

    ``config.work_root`` is the folder that receives the episode's folder
    (default: the system temp folder).  ``config.options``: ``agent_user`` (a
    user name, used when running as root; default ``rgym-agent``).
    """

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.sandbox_id = uuid.uuid4().hex[:16]
        self.workspace = ""
        self.user: pwd.struct_passwd | None = None
        self._state = _State(sandbox_id=self.sandbox_id)
        self._finalizer = weakref.finalize(self, _cleanup_state, self._state)
        self._lock = threading.RLock()
        self._env: dict[str, str] = {}
        self._cwd = ""
        self._counter = 0
        self._pending = b""
        self._poll: select.poll | None = None
        marker = f"__RGYM_DONE_{uuid.uuid4().hex}__"
        self._start_tag = f"\n{marker} ".encode()
        self._end_tag = f" {marker}\n".encode()
        self._marker = marker

    # -- lifecycle --------------------------------------------------------------

    @property
    def has_agent_user(self) -> bool:
        """True when agent commands run as a separate unprivileged user (rgym runs as root)."""
        return self.user is not None

    def start(self, layout: WorkspaceLayout) -> None:
        if os.geteuid() == 0:
            self.user = ensure_agent_user(self.config.options.get("agent_user", AGENT_USER))
            ensure_interpreter_reachable(self.user)
            self._state.agent_uid = self.user.pw_uid
        work_root = self.config.work_root
        if work_root is not None:
            Path(work_root).mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.config.run_id)[:40] or "run"
        root = Path(tempfile.mkdtemp(prefix=f"rgym-{slug}-",
                                     dir=str(work_root) if work_root is not None else None))
        self._state.root = root
        os.chmod(root, 0o755)
        ws = root / "workspace"
        ws.mkdir(mode=0o755)
        self.workspace = str(ws)
        self._cwd = self.workspace
        if layout.starter is not None:
            shutil.copytree(layout.starter, ws, symlinks=True, dirs_exist_ok=True)
        if self.user is not None:
            self._chown_tree(ws)
        for mount, prepared in layout.datasets.items():
            self._place_dataset(mount, Path(prepared.public))
        self._env = self._make_env()
        if self.user is not None:
            self._check_workspace_reachable()
        for message in unenforced_settings(self.config):
            log.warning("%s", message)
        self._start_shell()

    def _check_workspace_reachable(self) -> None:
        probe = self._as_agent(["sh", "-c", 'cd "$1" && test -w .', "probe", self.workspace])
        if probe.returncode != 0:
            raise SandboxError(
                f"the agent user '{self.user.pw_name if self.user else '?'}' cannot enter the workspace {self.workspace} "
                f"({probe.stderr.decode(errors='replace').strip() or 'not writable'}): a folder "
                "above it is closed to other users; choose a work_root they can traverse "
                "(e.g. under /tmp)", reason="workspace")

    def _chown_tree(self, top: Path) -> None:
        assert self.user is not None
        uid, gid = self.user.pw_uid, self.user.pw_gid
        os.lchown(top, uid, gid)
        for folder, dirs, files in os.walk(top):
            for name in dirs + files:
                os.lchown(os.path.join(folder, name), uid, gid)

    def _place_dataset(self, mount: str, public: Path) -> None:
        rel = Path(mount)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"dataset mount '{mount}' must be a relative folder inside the "
                             "workspace, without '..'")
        if not public.is_dir():
            raise FileNotFoundError(errno.ENOENT, "dataset folder not found", str(public))
        target = Path(self.workspace) / rel
        for parent in reversed(rel.parents[:-1]):
            folder = Path(self.workspace) / parent
            if not folder.exists():
                folder.mkdir()
                if self.user is not None:
                    os.chown(folder, self.user.pw_uid, self.user.pw_gid)
        root = self.user is not None

        def place(src: str, dst: str) -> None:
            st = os.stat(src)
            if root and st.st_uid == 0 and stat.S_IMODE(st.st_mode) in (0o644, 0o444):
                try:  # already root-owned and read-only for others: share the inode
                    os.link(src, dst)
                    return
                except OSError:
                    pass
            shutil.copy2(src, dst)

        shutil.copytree(public, target, copy_function=place, dirs_exist_ok=True)
        for folder, _dirs, files in os.walk(target):
            for name in files:
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    continue
                if root:
                    os.chown(path, 0, 0)
                    if stat.S_IMODE(os.stat(path).st_mode) != 0o444:
                        os.chmod(path, 0o644)
                else:
                    os.chmod(path, stat.S_IMODE(os.stat(path).st_mode) & ~0o222)
            if root:
                os.chown(folder, 0, 0)
                os.chmod(folder, 0o755)
        if not root:  # folders last, or the walk could not list them
            for folder, _, _ in os.walk(target, topdown=False):
                os.chmod(folder, 0o555)

    def _make_env(self) -> dict[str, str]:
        ws = self.workspace
        name = self.user.pw_name if self.user is not None else pwd.getpwuid(os.getuid()).pw_name
        env = {
            "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin",
                                     "/usr/bin", "/bin", f"{ws}/.local/bin"]),
            "HOME": ws, "USER": name, "LOGNAME": name, "SHELL": "/bin/bash",
            "LANG": "C.UTF-8", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat",
            "RGYM_WORKSPACE": ws,
        }
        devices = _visible_devices(self.config.gpus)
        if devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = devices
        env.update(self.config.env)
        env[SANDBOX_ID_VAR] = self.sandbox_id
        return env

    def cleanup(self) -> None:
        with self._lock:
            self._finalizer()

    # -- the persistent shell ------------------------------------------------------

    def _start_shell(self) -> None:
        read_fd, write_fd = os.pipe()
        if self.user is not None:  # bash opens /dev/fd/N, which checks the pipe's owner
            os.fchown(read_fd, self.user.pw_uid, self.user.pw_gid)
        cwd = self._cwd if os.path.isdir(self._cwd) else self.workspace
        try:
            shell = subprocess.Popen(
                ["bash", "--noprofile", "--norc", f"/dev/fd/{read_fd}"], pass_fds=(read_fd,),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                cwd=cwd, env=self._env, start_new_session=True, bufsize=0,
                **_user_kwargs(self.user))
        except PermissionError as exc:
            os.close(write_fd)
            raise SandboxError(f"the agent user cannot enter the workspace {cwd}: {exc}; choose "
                               "a work_root that other users can traverse", reason="workspace") \
                from exc
        finally:
            os.close(read_fd)
        self._state.shell = shell
        self._state.command_fd = write_fd
        self._state.sessions.add(shell.pid)
        self._cwd = cwd
        assert shell.stdout is not None
        self._out_fd = shell.stdout.fileno()
        os.set_blocking(self._out_fd, False)
        self._poll = select.poll()
        self._poll.register(self._out_fd, select.POLLIN)
        # Close the command pipe's inherited fd (bash reads it through its own copy),
        # and define the function that prints the done-marker.
        self._write(f"exec {read_fd}<&-\n__rgym_done() {{ printf '\\n%s %s %s %s\\n' "
                    f"{self._marker} \"$1\" \"$PWD\" {self._marker}; }}\n"
                    f"export {COMMAND_ID_VAR}=0\n".encode())

    def _write(self, data: bytes) -> None:
        fd = self._state.command_fd
        assert fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    def _shell_alive(self) -> bool:
        shell = self._state.shell
        return shell is not None and shell.poll() is None

    def run(self, command: str, *, timeout: float | None = None,
            output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        with self._lock:
            self._require_started()
            began = time.monotonic()
            began_ticks = _boot_ticks()
            note = ""
            if not self._shell_alive():
                note = self._restart("the previous shell session ended")
            self._counter += 1
            command_id = f"{self.sandbox_id}.{self._counter}"
            quoted = "'" + command.replace("\0", "").replace("'", "'\\''") + "'"
            line = f"{COMMAND_ID_VAR}={command_id};eval {quoted};__rgym_done $?\n".encode()
            try:
                self._write(line)
            except BrokenPipeError:
                note += self._restart("the previous shell session ended")
                self._write(line)
            collector = _Collector(output_limit, self._start_tag, self._end_tag)
            if self._pending:
                collector.feed(self._pending)
                self._pending = b""
            deadline = None if timeout is None else began + timeout
            state = self._read_until_marker(collector, deadline)
            timed_out = state == "timeout"
            suffix = ""
            if timed_out:
                killed = self._kill_command(command_id, began_ticks)
                # With nothing to kill, the shell itself is busy (a builtin loop, `wait`).
                grace = _SHELL_GRACE_S if killed else 0.25
                state = self._read_until_marker(collector, time.monotonic() + grace)
                if state == "timeout":
                    suffix = self._restart_stuck()
            if state == "eof":
                suffix = self._shell_ended()
            exit_code = TIMEOUT_EXIT_CODE if timed_out else -1
            done = collector.done()
            if done is not None:
                status, pwd_, rest = done
                self._cwd = pwd_
                self._pending = rest
                if not timed_out:
                    exit_code = status
            elif not timed_out:
                shell = self._state.shell
                exit_code = _exit_code(shell.returncode) if shell and shell.returncode is not None \
                    else 1
            output, truncated = collector.text()
            if timed_out and done is not None:
                # The shell reports killed jobs before its next command: one more round
                # trip keeps such lines out of the next command's output.
                output += self._sync().decode("utf-8", "replace")[-4000:]
            return ExecResult(exit_code=exit_code, output=note + output + suffix,
                              timed_out=timed_out, truncated=truncated,
                              duration_s=time.monotonic() - began)

    def _read_until_marker(self, collector: _Collector, deadline: float | None) -> str:
        """Read the shell's output until the done-marker ("done"), end of file ("eof")
        or the deadline ("timeout")."""
        fd, poll = self._out_fd, self._poll
        assert poll is not None
        # Most commands answer within microseconds: poll the pipe briefly before
        # sleeping in poll(), which on an idle machine costs a slow wake-up.
        spin_until = time.perf_counter() + _SPIN_S
        while True:
            try:
                chunk = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                if time.perf_counter() < spin_until:
                    continue
                if deadline is None:
                    wait = -1
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return "timeout"
                    wait = int(left * 1000) + 1
                poll.poll(wait)
                continue
            if not chunk:
                return "eof"
            if collector.feed(chunk):
                return "done"

    def _kill_command(self, command_id: str, began_ticks: int) -> int:
        """Kill the processes of one shell command: those started with its command id
        in their environment, and the shell's own forks (subshells, whose environment
        is the shell's initial one) started since the command began.  Background jobs
        of earlier commands live on."""
        needle = _needle(COMMAND_ID_VAR, command_id)
        any_command = f"\0{COMMAND_ID_VAR}=".encode()
        shell = self._state.shell
        sid = shell.pid if shell is not None else -1

        def match(pid: int) -> bool:
            if _environ_has(pid, needle):
                return True
            if pid == sid or (_stat(pid) or (0, 0))[1] != sid:
                return False
            started = _started_at(pid)
            return (started is not None and started >= began_ticks
                    and not _environ_has(pid, any_command))

        return _kill_matching(match)

    def _sync(self) -> bytes:
        """Run an empty command; return what the shell printed before its marker."""
        collector = _Collector(0, self._start_tag, self._end_tag)
        collector.feed(self._pending)
        self._pending = b""
        try:
            # `jobs -n` reaps the killed jobs and takes their "Killed" notices.
            self._write(b"jobs -n >/dev/null 2>&1; __rgym_done $?\n")
        except BrokenPipeError:
            return b""
        if collector.marker is None and self._read_until_marker(
                collector, time.monotonic() + _SHELL_GRACE_S) != "done":
            return bytes(collector.buf)
        done = collector.done()
        assert done is not None and collector.marker is not None
        self._pending = done[2]
        return bytes(collector.buf[:collector.marker[0]])

    def _restart(self, why: str) -> str:
        _close_shell(self._state)
        self._start_shell()
        return (f"[{why}; started a new shell session in {self._cwd}; exported variables and "
                "shell settings were reset]\n")

    def _restart_stuck(self) -> str:
        shell = self._state.shell
        if shell is not None:  # kill the shell's remaining children that cleared the environment
            sid = shell.pid
            _kill_matching(lambda p: (_stat(p) or (0, 0))[1] == sid and p != sid
                           and not _environ_has(p, _needle(SANDBOX_ID_VAR, self.sandbox_id)))
        self._pending = b""
        _close_shell(self._state)
        self._start_shell()
        return (f"\n[the shell itself did not stop, so it was restarted in {self._cwd}; "
                "exported variables and shell settings were reset]")

    def _shell_ended(self) -> str:
        shell = self._state.shell
        assert shell is not None
        try:
            status = shell.wait(timeout=1)
        except subprocess.TimeoutExpired:  # it closed its output but lives on
            _close_shell(self._state)
            status = -signal.SIGKILL
        return (f"\n[the shell session ended (exit status {_exit_code(status)}); the next "
                f"command starts a new session in {self._cwd}]")

    # -- one-shot processes ---------------------------------------------------------

    def exec(self, argv: list[str], *, timeout: float | None = None, cwd: str | None = None,
             env: Mapping[str, str] | None = None, input: str | None = None,
             output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        self._require_started()
        began = time.monotonic()
        workdir = self._resolve(cwd) if cwd else self.workspace
        full_env = dict(self._env)
        full_env.update(env or {})
        with self._lock:
            self._counter += 1
            command_id = f"{self.sandbox_id}.x{self._counter}"
        full_env[COMMAND_ID_VAR] = command_id
        full_env[SANDBOX_ID_VAR] = self.sandbox_id
        command = argv
        if self.user is not None and workdir != self.workspace:
            # Popen changes folder before it drops root: let the agent user do it instead.
            command = ["bash", "-c", 'cd -- "$1" || exit 125; shift; exec "$@"', "exec",
                       workdir, *argv]
        try:
            proc = subprocess.Popen(
                command, cwd=self.workspace if command is not argv else workdir, env=full_env,
                bufsize=0, start_new_session=True,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **_user_kwargs(self.user))
        except OSError as exc:
            if exc.filename == workdir or not argv:
                raise
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            return ExecResult(exit_code=code, output=f"{argv[0]}: {exc.strerror}\n",
                              duration_s=time.monotonic() - began)
        collector = _Collector(output_limit)
        deadline = None if timeout is None else began + timeout
        timed_out = not self._pump(proc, collector, deadline,
                                   (input or "").encode() if input is not None else None)
        if timed_out:
            needle = _needle(COMMAND_ID_VAR, command_id)
            _kill_matching(lambda p: (_stat(p) or (0, 0))[1] == proc.pid
                           or _environ_has(p, needle))
            proc.wait()
            self._pump(proc, collector, time.monotonic() + 0.2, None)
        assert proc.stdout is not None
        proc.stdout.close()
        output, truncated = collector.text()
        if command is not argv and proc.returncode == 125 and "cd: " in output[:2000]:
            raise _os_error(output, workdir)
        return ExecResult(exit_code=TIMEOUT_EXIT_CODE if timed_out else _exit_code(proc.returncode),
                          output=output, timed_out=timed_out, truncated=truncated,
                          duration_s=time.monotonic() - began)

    @staticmethod
    def _pump(proc: subprocess.Popen[bytes], collector: _Collector, deadline: float | None,
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

    # -- files ---------------------------------------------------------------------

    def _resolve(self, path: str) -> str:
        return path if os.path.isabs(path) else os.path.join(self.workspace, path)

    def _as_agent(self, argv: list[str], data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(argv, input=data, capture_output=True, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "LC_ALL": "C",
                                   SANDBOX_ID_VAR: self.sandbox_id},
                              **_user_kwargs(self.user))

    def read_file(self, path: str) -> bytes:
        self._require_started()
        full = self._resolve(path)
        if self.user is None:
            with open(full, "rb") as f:
                return f.read()
        proc = self._as_agent(["cat", "--", full])
        if proc.returncode != 0:
            raise _os_error(proc.stderr.decode("utf-8", "replace"), full)
        return proc.stdout

    def write_file(self, path: str, data: bytes | str) -> None:
        self._require_started()
        full = self._resolve(path)
        payload = data.encode() if isinstance(data, str) else data
        if self.user is None:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(payload)
            return
        proc = self._as_agent(["bash", "-c", 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"',
                               "write_file", full], payload)
        if proc.returncode != 0:
            raise _os_error(proc.stderr.decode("utf-8", "replace"), full)

    def copy_in(self, src: Path, dest: str) -> None:
        """Copy ``src`` to the sandbox path ``dest`` (the copy's own name; a folder
        merges into an existing one).  The agent user unpacks it, so it owns the
        copy and symlinks in the workspace cannot redirect it."""
        self._require_started()
        src = Path(src)
        if not src.exists() and not src.is_symlink():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(src))
        full = self._resolve(dest).rstrip("/")
        parent, name = os.path.split(full)
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                ["bash", "-c", 'mkdir -p -- "$1" && exec tar -xf - -C "$1"', "copy_in", parent],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors, cwd="/",
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", SANDBOX_ID_VAR: self.sandbox_id},
                **_user_kwargs(self.user))
            assert proc.stdin is not None
            try:
                with tarfile.open(fileobj=proc.stdin, mode="w|") as tar:
                    tar.add(src, arcname=name)
            except BrokenPipeError:
                pass  # tar stopped reading: after the end marker (fine), or it failed
            finally:
                try:
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
            returncode = proc.wait()  # only tar's own status tells a failure
            if returncode != 0:
                errors.seek(0)
                message = errors.read().decode("utf-8", "replace")
                raise _os_error(message or f"tar ended with exit status "
                                f"{_exit_code(returncode)}", full)

    def copy_out(self, src: str, dest: Path) -> None:
        """Copy the sandbox file or folder ``src`` to the host path ``dest`` (the
        copy's own name), owned by the current user.  The agent user packs it, so
        only what it may read leaves the sandbox; symlinks stay symlinks."""
        self._require_started()
        full = self._resolve(src).rstrip("/")
        parent, name = os.path.split(full)
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        uid, gid, new = os.getuid(), os.getgid(), dest.name

        def rename(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
            member = tarfile.tar_filter(member, path)
            head, sep, rest = member.name.partition("/")
            changes: dict[str, Any] = {"name": new + sep + rest, "uid": uid, "gid": gid,
                                       "uname": "", "gname": ""}
            if member.islnk():
                _, lsep, lrest = member.linkname.partition("/")
                changes["linkname"] = new + lsep + lrest
            return member.replace(**changes, deep=False)

        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                ["tar", "-cf", "-", "-C", parent or "/", "--", name], stdout=subprocess.PIPE,
                stderr=errors, cwd="/",
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", SANDBOX_ID_VAR: self.sandbox_id},
                **_user_kwargs(self.user))
            assert proc.stdout is not None
            unreadable: tarfile.TarError | None = None
            try:
                try:
                    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                        tar.extractall(dest.parent, filter=rename)
                except tarfile.ReadError as exc:  # tar failed before writing anything
                    unreadable = exc
                # tarfile stops at the end-of-archive marker, but tar still writes the
                # rest of its last record: read to the end, or it dies of SIGPIPE.
                while proc.stdout.read(_READ_SIZE):
                    pass
            finally:
                proc.stdout.close()  # early only when extracting failed: tar then stops
                returncode = proc.wait()
            errors.seek(0)
            message = errors.read().decode("utf-8", "replace")
            # Exit 1: a file changed while tar read it (a job still writing its log):
            # every file was copied, that one as it was at the time.
            if returncode not in (0, 1):
                raise _os_error(message or f"tar ended with exit status "
                                f"{_exit_code(returncode)}", full)
            if unreadable is not None:
                raise OSError(errno.EIO, f"tar wrote an unreadable archive ({unreadable})", full)
            if returncode == 1:
                log.warning("rgym local sandbox: %s changed while it was copied out: %s",
                            full, message.strip())

    # -- facts -------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"cpus": len(os.sched_getaffinity(0)), "gpus": _gpu_count(),
                                 "network": "host", "backend": "local",
                                 "user": self.user.pw_name if self.user else "(same as rgym)"}
        mem = _meminfo()
        if mem:
            avail, total = mem.get("MemAvailable", 0), mem.get("MemTotal", 0)
            facts["memory"] = f"{avail / 2**20:.1f} GiB available of {total / 2**20:.1f} GiB"
            facts["memory_available_mb"] = avail // 1024
        return facts

    def _require_started(self) -> None:
        if self._state.done:
            raise SandboxError("the sandbox was cleaned up", reason="closed")
        if not self.workspace:
            raise SandboxError("the sandbox is not started: call start(layout) first",
                               reason="not_started")


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
