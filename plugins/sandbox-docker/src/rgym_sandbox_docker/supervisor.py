"""The trusted supervisor of a Docker episode, run *inside* the container as root.

The host starts it with ``docker exec -u root python3 -I -S -c <bootstrap> <length>
session`` (the bootstrap reads this file's source from stdin: the command line the
agent sees in ``ps`` stays short) and talks to it over the exec's stdin/stdout; nothing of the agent can reach
either (they belong to a root process the agent user can neither signal nor
trace).  This file is stdlib-only and runs on any Python 3.9+ of the image.

Host -> supervisor: one JSON request per line; a request with ``"size": N`` is
followed by N raw bytes.  Supervisor -> host: frames of ``>II`` (header length,
payload length), a JSON header and a raw payload.

The agent's shell.  The supervisor starts ``bash`` as the agent user from an
execute-only copy (``/run/rgym/bash``, mode 0111), which makes the shell
non-dumpable: the agent's processes cannot read its memory, environment or file
descriptors, nor ptrace it, and it cannot open its own ``/proc/self/mem``.  The
shell's stdin, stdout and stderr are pipes of the supervisor.  Each command is
sent as one line::

    eval -- $'<command>' </dev/null; { :; } 9>/run/rgym/<status dir>/<nonce>.$?

with a fresh random nonce.  bash reads the whole line before running any of it,
so the nonce never waits in the pipe, and the status redirection is syntax, which
no function, alias or trap of the agent can override.  The status directory is
root-owned, mode 0333: the agent can create files in it but not list it.  The
supervisor watches it with inotify; a status file with the current nonce ends
the command with its exit code.  The working directory is read from
``/proc/<shell>/cwd``; the timeout is measured on the supervisor's clock and
enforced by it (freeze, then kill every process of the agent user started since
the command began; a shell that stays busy is killed and restarted in its last
directory).  Before and after every command the shell is checked: still the
execute-only binary, no file mapped into it that the agent could have written
(``LD_PRELOAD``, ``enable -f``), still reading its own stdin when idle.  A shell
found otherwise is killed and restarted, and the host is told why.

Control under exhaustion.  The agent may take every slot of the container's
process limit (or its memory); the supervisor keeps working without a new process
of its own: ``freeze``/``thaw`` (SIGSTOP every process of the agent user, looped
until none runs unstopped; SIGCONT), ``killall`` (read each process's command line
from /proc, then SIGKILL them all) and ``counters`` only signal and read /proc and
cgroup files; the copy-out's walk runs in this process with the agent's effective
ids, and its ``tar`` starts from a :class:`Reserve` process forked ahead of time
when no fork fits.  A shell that cannot be restarted for lack of room is restarted
after every process of the agent is killed (the agent is told).  Errors carry their
``errno``, so the host can tell the agent's exhaustion from a failure of rgym's.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import pwd
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

HEADER = struct.Struct(">II")
RUN_DIR = "/run/rgym"
SHELL_COPY = RUN_DIR + "/bash"
#: Seconds the shell gets, after a timed-out command's processes are killed, to
#: come back before it is killed too (it may have a thousand children to reap).
SHELL_GRACE_S = 3.0
#: Seconds between checks of the shell while a command runs.
CHECK_EVERY_S = 0.25
CHUNK = 1 << 16
IN_CREATE = 0x100
IN_MOVED_TO = 0x80
IN_Q_OVERFLOW = 0x4000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
#: read(2)'s system call number, for the "idle in read(0)" check.
READ_SYSCALL = {"x86_64": 0, "aarch64": 63, "riscv64": 63}.get(os.uname().machine)
TICKS = os.sysconf("SC_CLK_TCK")


# -- framing -------------------------------------------------------------------------


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[n:]


def send(header: dict[str, Any], payload: bytes = b"") -> None:
    head = json.dumps(header).encode()
    write_all(1, HEADER.pack(len(head), len(payload)) + head + payload)


class HostInput:
    """Requests from the host on fd 0: JSON lines, some followed by raw bytes."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.eof = False

    def fill(self, block: bool = True) -> bool:
        if self.eof:
            return False
        if not block:
            ready, _, _ = select.select([0], [], [], 0)
            if not ready:
                return False
        data = os.read(0, CHUNK)
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def line(self) -> dict[str, Any] | None:
        while b"\n" not in self.buf:
            if not self.fill():
                return None
        idx = self.buf.index(b"\n")
        line = bytes(self.buf[:idx])
        del self.buf[:idx + 1]
        return json.loads(line.decode())

    def take(self, size: int) -> Iterator[bytes]:
        """Yield exactly ``size`` bytes, in pieces."""
        left = size
        while left:
            if not self.buf and not self.fill():
                raise EOFError("the host closed the session mid-transfer")
            piece = bytes(self.buf[:left])
            del self.buf[:len(piece)]
            left -= len(piece)
            yield piece


# -- processes -------------------------------------------------------------------------


def boot_ticks() -> int:
    """Now, in the clock of /proc/<pid>/stat's start times (ticks since boot)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * TICKS)


def proc_uid_start(pid: int) -> tuple[int, int, int] | None:
    """(real uid, effective uid, start ticks) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            uids: list[str] | None = None
            for line in fh:
                if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                    return None  # a zombie: dead already, waiting for its parent
                if line.startswith("Uid:"):
                    uids = line.split()[1:3]
                    break
        with open(f"/proc/{pid}/stat") as fh:
            data = fh.read()
        start = int(data[data.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None
    if not uids:
        return None
    return int(uids[0]), int(uids[1]), start


def agent_pids(uid: int, since: int | None = None, exclude: Iterable[int] = ()) -> list[int]:
    """Processes of ``uid`` (started at or after ``since`` ticks, when given)."""
    found: list[int] = []
    skip = set(exclude) | {os.getpid(), 1}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        info = proc_uid_start(int(name))
        if info is None or uid not in info[:2]:
            continue
        if since is not None and info[2] < since:
            continue
        found.append(int(name))
    return found


def agent_processes(uid: int) -> dict[int, int]:
    """Every live process of ``uid`` and its start time (ticks since boot)."""
    found: dict[int, int] = {}
    mine = os.getpid()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (mine, 1):
            info = proc_uid_start(int(name))
            if info is not None and uid in info[:2]:
                found[int(name)] = info[2]
    return found


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


#: errnos of a fork or exec refused for lack of room (the agent's processes or memory).
NO_ROOM = (errno.EAGAIN, errno.ENOMEM)
#: Characters of a killed process's command line that are reported.
CMDLINE_CHARS = 200


def proc_state(pid: int) -> str | None:
    """The one-letter state of a process (``T``: stopped), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            data = fh.read()
        return data[data.rindex(")") + 2:].split()[0]
    except (OSError, ValueError, IndexError):
        return None


def proc_cmdline(pid: int) -> str | None:
    """A process's command line as /proc has it (the kernel's copy), shortened."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read(4 * CMDLINE_CHARS)
    except OSError:
        return None
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    if not text:  # a kernel thread or a process that cleared its arguments: its name
        try:
            with open(f"/proc/{pid}/comm") as fh:
                text = "[" + fh.read().strip() + "]"
        except OSError:
            return None
    return text if len(text) <= CMDLINE_CHARS else text[:CMDLINE_CHARS - 3] + "..."


def stop_all(uid: int, freezer: Freezer | None, exclude: Iterable[int] = ()) -> list[int]:
    """SIGSTOP every process of ``uid`` (but ``exclude``) until none runs unstopped
    (a fork in progress yields a child after the first pass: looped); returns the pids
    that were not stopped before (the ones :func:`continue_all` lets go)."""
    skip = set(exclude)
    before = {p for p in agent_pids(uid, None, skip) if proc_state(p) in ("T", "t")}
    if freezer is not None:
        freezer.freeze()  # every process of the user in one pass of the kernel
    stopped: set[int] = set()
    for _ in range(1000):
        running = [p for p in agent_pids(uid, None, skip)
                   if p not in before and proc_state(p) not in ("T", "t", None)]
        if not running:
            break
        signal_all(running, signal.SIGSTOP)
        stopped.update(running)
        time.sleep(0.001)
    if freezer is not None:
        freezer.arm()
    return sorted({p for p in agent_pids(uid, None, skip) if p not in before} | stopped)


def continue_all(pids: Iterable[int]) -> None:
    signal_all(pids, signal.SIGCONT)


def _quiet_child(keep: int) -> None:
    """In a helper just forked: standard descriptors to /dev/null, every other
    descriptor closed but ``keep`` (nothing of the supervisor's pipes or the host's
    stream stays open in it)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)


def _kill_child(pid: int) -> None:
    """SIGKILL a helper child and reap it (gone already: nothing to do)."""
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass


class Freezer:
    """Stops every process of the agent user at once: ``kill(-1, SIGSTOP)`` sent *as*
    that user reaches all of its processes in one pass of the kernel, and a fork in
    progress is restarted after the stop, so nothing escapes (a fork bomb included).

    The sender is a helper forked ahead of time and kept root (the agent cannot
    signal it) until it is needed: a fork bomb that exhausts the process limit
    leaves no room to fork one then.  It drops to the agent user, sends the signal
    and exits; the next freeze forks a new one."""

    def __init__(self, uid: int, gid: int) -> None:
        self.uid, self.gid = uid, gid
        self.pid: int | None = None
        self.pipe = -1

    def arm(self) -> bool:
        if self.pid is not None:
            return True
        try:
            read_end, write_end = os.pipe()
            pid = os.fork()
        except OSError:
            return False  # no room for a helper now: scanning will do
        if pid == 0:
            try:
                _quiet_child(read_end)
                if os.read(read_end, 1) == b"F":
                    os.setgroups([])
                    os.setresgid(self.gid, self.gid, self.gid)
                    os.setresuid(self.uid, self.uid, self.uid)
                    os.kill(-1, signal.SIGSTOP)
            finally:
                os._exit(0)
        os.close(read_end)
        self.pid, self.pipe = pid, write_end
        return True

    def freeze(self) -> bool:
        """Stop every process of the agent user; False when it could not be done."""
        if not self.arm() or self.pid is None:
            return False
        pid, self.pid = self.pid, None
        try:
            os.write(self.pipe, b"F")
        except OSError:
            pass
        os.close(self.pipe)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:  # the helper is root's child: reap it
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return False
            if done:
                return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            time.sleep(0.002)
        return False

    def close(self) -> None:
        if self.pid is not None:
            _kill_child(self.pid)
            os.close(self.pipe)
            self.pid = None


class Reserve:
    """A process forked ahead of time and kept root and idle, that becomes one program
    of the agent user when asked: the copy-out's ``tar`` still starts when the agent's
    processes have taken every slot of the container's process limit.  It receives
    the program, its user and its three standard descriptors over a socket pair; the
    next :meth:`arm` forks a new one (when there is room)."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.sock: socket.socket | None = None

    def arm(self) -> bool:
        if self.pid is not None:
            return True
        try:
            mine, theirs = socket.socketpair()
            pid = os.fork()
        except OSError:
            return False
        if pid == 0:
            try:
                mine.close()
                _quiet_child(theirs.fileno())
                msg, fds, _, _ = socket.recv_fds(theirs, 1 << 20, 3)
                if not msg or len(fds) != 3:
                    os._exit(0)
                job = json.loads(msg.decode())
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                os.closerange(3, 1 << 16)
                os.setpriority(os.PRIO_PROCESS, 0, 0)
                os.setgroups([])
                os.setresgid(job["gid"], job["gid"], job["gid"])
                os.setresuid(job["uid"], job["uid"], job["uid"])
                os.chdir(job["cwd"])
                os.execvpe(job["argv"][0], job["argv"], job["env"])
            finally:
                os._exit(127)
        theirs.close()
        self.pid, self.sock = pid, mine
        return True

    def spawn(self, argv: list[str], fds: tuple[int, int, int], *, uid: int, gid: int,
              env: dict[str, str], cwd: str = "/") -> int | None:
        """Run ``argv`` in the reserve process; its pid (a child of this one), or None
        when no reserve is armed."""
        if self.pid is None or self.sock is None:
            return None
        pid, sock = self.pid, self.sock
        self.pid = self.sock = None
        job = {"argv": argv, "uid": uid, "gid": gid, "env": env, "cwd": cwd}
        try:
            socket.send_fds(sock, [json.dumps(job).encode()], list(fds))
        except OSError:
            return None
        finally:
            sock.close()
        return pid

    def close(self) -> None:
        if self.pid is not None:
            _kill_child(self.pid)
            if self.sock is not None:
                self.sock.close()
            self.pid = self.sock = None


class AgentView:
    """Act with the agent user's file permissions in this process (effective uid and
    gid only: the real and saved ids stay root's, so the agent can neither signal nor
    trace the supervisor meanwhile, and the effective ids come back on exit)."""

    def __init__(self, uid: int, gid: int) -> None:
        self.uid, self.gid = uid, gid

    def __enter__(self) -> AgentView:
        os.setgroups([])
        os.setresgid(-1, self.gid, -1)
        try:
            os.setresuid(-1, self.uid, -1)
        except OSError:
            os.setresgid(-1, 0, -1)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        os.setresuid(-1, 0, -1)
        os.setresgid(-1, 0, -1)


def kill_young(uid: int, since: int | None, exclude: Iterable[int] = (),
               freezer: Freezer | None = None) -> int:
    """Kill every process of ``uid`` started since ``since`` (all of them when None),
    except ``exclude``.  With a ``freezer``, every process of the user is stopped
    first in one pass, the young ones are killed and the others continued; else they
    are frozen by scanning (SIGSTOP, again until no new one appears) and killed.
    Returns how many were killed."""
    skip = set(exclude)
    if freezer is not None and freezer.freeze():
        everyone = agent_processes(uid)
        young = {pid for pid, start in everyone.items()
                 if pid not in skip and (since is None or start >= since)}
        signal_all(young, signal.SIGKILL)
        signal_all([p for p in everyone if p not in young], signal.SIGCONT)
        stopped = young
    else:
        stopped = set()
        for _ in range(400):
            new = [p for p in agent_pids(uid, since, skip) if p not in stopped]
            if not new:
                break
            signal_all(new, signal.SIGSTOP)
            stopped.update(new)
        signal_all(stopped, signal.SIGKILL)
    for _ in range(50):
        rest = agent_pids(uid, since, skip)
        if not rest:
            break
        signal_all(rest, signal.SIGKILL)
        time.sleep(0.01)
    if freezer is not None:
        freezer.arm()
    return len(stopped)


def kill_all(uid: int, freezer: Freezer | None, keep: Iterable[int] = ()) -> list[str]:
    """Stop every process of ``uid`` (but ``keep``), read their command lines from
    /proc, kill them all and wait until none is left; returns the command lines."""
    keep = set(keep)
    victims = stop_all(uid, freezer, keep)
    stopped_before = [p for p in agent_pids(uid, None, keep) if p not in victims]
    everyone = victims + stopped_before
    lines = [line for line in (proc_cmdline(p) for p in everyone) if line is not None]
    signal_all(everyone, signal.SIGKILL)
    for _ in range(500):
        rest = agent_pids(uid, None, keep)
        if not rest:
            break
        lines += [line for line in (proc_cmdline(p) for p in rest if p not in everyone)
                  if line is not None]
        everyone += [p for p in rest if p not in everyone]
        signal_all(rest, signal.SIGKILL)
        reap()
        time.sleep(0.01)
    reap()
    return lines


#: The cgroup files (v2, then v1) that count OOM kills and refused forks.
COUNTER_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/pids.events",
                 "/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/pids/pids.events")


def parse_counters(text: str) -> dict[str, int]:
    """``{"oom": kills, "pids": refused forks}`` from the text of :data:`COUNTER_FILES`
    (``oom_kill N`` and ``max N`` lines; the largest of each)."""
    counts = {"oom": 0, "pids": 0}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            if parts[0] == "oom_kill":
                counts["oom"] = max(counts["oom"], int(parts[1]))
            elif parts[0] == "max":
                counts["pids"] = max(counts["pids"], int(parts[1]))
    return counts


def read_counters() -> dict[str, int]:
    """OOM kills and refused forks of the container so far (cgroup v1 or v2 files),
    read without starting a process."""
    texts = []
    for path in COUNTER_FILES:
        try:
            with open(path) as fh:
                texts.append(fh.read())
        except OSError:
            continue
    return parse_counters("\n".join(texts))


def reap() -> None:
    """Collect exited children (the supervisor is their parent)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# -- inotify -------------------------------------------------------------------------------


class Watch:
    """inotify on one directory: the names created in it."""

    def __init__(self, path: str) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if libc.inotify_add_watch(self.fd, path.encode(), IN_CREATE | IN_MOVED_TO) < 0:
            raise OSError(ctypes.get_errno(), "inotify_add_watch " + path)
        self.path = path

    def names(self) -> list[str] | None:
        """Names created since the last call (None after an overflow: list the folder)."""
        out: list[str] = []
        overflow = False
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            pos = 0
            while pos + 16 <= len(data):
                _, mask, _, length = struct.unpack_from("iIII", data, pos)
                name = data[pos + 16:pos + 16 + length].split(b"\0", 1)[0]
                pos += 16 + length
                if mask & IN_Q_OVERFLOW:
                    overflow = True
                elif name:
                    out.append(name.decode("utf-8", "replace"))
        if overflow:
            return None
        return out


# -- output capture -------------------------------------------------------------------------


class Capture:
    """The first and last ``keep`` bytes of a command's output, and how many were dropped."""

    def __init__(self, keep: int) -> None:
        self.keep = max(keep, 1024)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            extra = len(self.tail) - self.keep
            if extra > 2 * self.keep:  # trim rarely: amortised O(1)
                self.dropped += extra
                del self.tail[:extra]

    def result(self) -> tuple[dict[str, Any], bytes]:
        extra = len(self.tail) - self.keep
        if extra > 0:
            self.dropped += extra
            del self.tail[:extra]
        return {"head": len(self.head), "dropped": self.dropped}, bytes(self.head + self.tail)


# -- the shell -------------------------------------------------------------------------------


def normal_priority() -> None:
    """``preexec_fn`` of every process started as the agent: back to niceness 0 (the
    supervisor runs at -20; only it may)."""
    os.setpriority(os.PRIO_PROCESS, 0, 0)


def ansi_c_quote(text: str) -> str:
    out = ["$'"]
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == "'":
            out.append("\\'")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append("'")
    return "".join(out)


def prepare_run_dir() -> tuple[int, int]:
    """/run/rgym (root, 0711) with the execute-only shell copy in it."""
    os.makedirs(RUN_DIR, exist_ok=True)
    os.chown(RUN_DIR, 0, 0)
    os.chmod(RUN_DIR, 0o711)
    if not os.path.exists(SHELL_COPY):
        source = shutil.which("bash")
        if source is None:
            raise RuntimeError("the image has no bash")
        tmp = SHELL_COPY + ".tmp"
        shutil.copyfile(source, tmp)
        os.chown(tmp, 0, 0)
        os.chmod(tmp, 0o111)
        os.rename(tmp, SHELL_COPY)
    st = os.stat(SHELL_COPY)
    return st.st_dev, st.st_ino


class Shell:
    """One non-dumpable bash of the agent user, driven line by line."""

    def __init__(self, cfg: dict[str, Any], shell_id: int, freezer: Freezer | None = None
                 ) -> None:
        self.cfg = cfg
        self.freezer = freezer
        self.uid = cfg["uid"]
        self.gid = cfg["gid"]
        self.shell_id = shell_id
        self.status_dir: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.cwd = cfg["workdir"]
        self.known_maps: dict[tuple[str, str], str] = {}
        self.good_maps = ""

    # -- start / stop

    def start(self, cwd: str | None) -> None:
        self.status_dir = os.path.join(RUN_DIR, "st-" + os.urandom(12).hex())
        os.mkdir(self.status_dir, 0o700)
        os.chmod(self.status_dir, 0o333)  # create, but not list
        self.watch = Watch(self.status_dir)
        env = dict(self.cfg["env"])
        where = cwd if cwd and os.path.isdir(cwd) else self.cfg["workdir"]
        proc = self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], executable=SHELL_COPY, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=where, env=env, user=self.uid,
            group=self.gid, extra_groups=[], start_new_session=True, close_fds=True,
            preexec_fn=normal_priority)
        assert proc.stdin is not None and proc.stdout is not None
        self.pid = proc.pid
        self.stdin = proc.stdin.fileno()
        self.stdout = proc.stdout.fileno()
        self.out_eof = False
        os.set_blocking(self.stdout, False)
        self.known_maps = {}
        self.good_maps = ""
        init = ("readonly HISTSIZE=0 HISTFILESIZE=0 HISTFILE=/dev/null; set +o history; "
                "enable -n enable")
        exit_code, _, _ = self.command(init, None, Capture(4096), quiet=True)
        if exit_code != 0:
            raise RuntimeError(f"the shell did not start (exit {exit_code!r})")
        self.cwd = self.read_cwd() or where

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
            self.proc = None
        if self.status_dir:
            try:
                os.close(self.watch.fd)
            except OSError:
                pass
            shutil.rmtree(self.status_dir, ignore_errors=True)
            self.status_dir = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- facts read from /proc, never from the shell

    def read_cwd(self) -> str | None:
        try:
            where = os.readlink(f"/proc/{self.pid}/cwd")
        except OSError:
            return None
        return where[:-len(" (deleted)")] if where.endswith(" (deleted)") else where

    def tampering(self, shell_file: tuple[int, int]) -> str | None:
        """Why the shell process is no longer the shell we started, or None."""
        try:
            exe = os.stat(f"/proc/{self.pid}/exe")
        except OSError:
            return None  # gone: reported as an exit
        if (exe.st_dev, exe.st_ino) != shell_file:
            try:
                name = os.readlink(f"/proc/{self.pid}/exe")
            except OSError:
                name = "?"
            return f"the shell process now runs {name}"
        try:
            with open(f"/proc/{self.pid}/maps") as fh:
                text = fh.read()
        except OSError:
            return None
        if text == self.good_maps:
            return None  # as checked last time (the common case: nothing to parse)
        for line in text.splitlines():
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].startswith("/"):
                continue
            key = (parts[3], parts[4])
            if key in self.known_maps:
                continue
            path = parts[5]
            try:
                st = os.stat(path)
            except OSError:
                return f"a deleted or hidden file is mapped into the shell: {path}"
            if str(st.st_ino) != parts[4] or st.st_uid != 0 or st.st_mode & 0o022:
                return f"a file the agent could write is mapped into the shell: {path}"
            self.known_maps[key] = path
        self.good_maps = text
        return None

    def idle(self) -> bool:
        """True when the shell waits for its next line: blocked reading its stdin
        pipe, and the pipe is empty."""
        if READ_SYSCALL is None:
            return False
        try:
            with open(f"/proc/{self.pid}/syscall") as fh:
                fields = fh.read().split()
            pending = ctypes.c_int(0)
            fcntl.ioctl(self.stdin, 0x541B, pending)  # FIONREAD
        except OSError:
            return False
        return (len(fields) > 1 and fields[0] == str(READ_SYSCALL) and int(fields[1], 16) == 0
                and pending.value == 0)

    # -- one command

    def drain(self, capture: Capture) -> None:
        while not self.out_eof:
            try:
                data = os.read(self.stdout, CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.out_eof = True  # every writer closed it (the shell may live on)
                return
            capture.add(data)

    def command(self, text: str, timeout: float | None, capture: Capture,
                shell_file: tuple[int, int] | None = None, quiet: bool = False,
                host: HostInput | None = None) -> tuple[int | None, bool, str | None]:
        """Run one command line.  Returns (exit code or None, timed out, note or None)."""
        proc = self.proc
        assert proc is not None and self.status_dir is not None
        status_dir = self.status_dir
        nonce = os.urandom(16).hex()
        line = f"eval -- {ansi_c_quote(text)} </dev/null; {{ :; }} 9>{self.status_dir}/{nonce}.$?\n"
        since = boot_ticks()
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        try:
            write_all(self.stdin, line.encode())
        except OSError:
            pass  # the shell is gone: found below
        timed_out = False
        kill_at: float | None = None
        idle_seen = 0
        next_check = started + CHECK_EVERY_S
        while True:
            now = time.monotonic()
            waits = [next_check - now]
            if deadline is not None and not timed_out:
                waits.append(deadline - now)
            if kill_at is not None:
                waits.append(kill_at - now)
            wait = max(0.0, min(waits))
            fds = [self.watch.fd] + ([] if self.out_eof else [self.stdout])
            if host is not None and not host.eof:
                fds.append(0)
            ready: list[int] = []
            try:
                ready, _, _ = select.select(fds, [], [], wait)
            except InterruptedError:
                pass
            if self.stdout in ready:
                self.drain(capture)
            if 0 in ready and host is not None:
                host.fill(block=False)
                if host.eof:  # the host is gone: so is this session
                    raise SystemExit(0)
            names = self.watch.names() if self.watch.fd in ready else []
            if names is None:  # the queue overflowed: the agent floods the folder
                names = os.listdir(status_dir)
            done = [n for n in names if n.startswith(nonce + ".")]
            for name in names:  # keep the folder empty; guesses are only noise
                try:
                    os.unlink(os.path.join(status_dir, name))
                except OSError:
                    pass
            if done:
                self.drain(capture)
                code = done[0][len(nonce) + 1:]
                try:
                    return int(code), timed_out, None
                except ValueError:
                    return None, timed_out, "the shell reported a malformed status"
            if proc.poll() is not None:
                self.drain(capture)
                rc = proc.returncode
                return (128 - rc if rc < 0 else rc), timed_out, "exited"
            now = time.monotonic()
            if deadline is not None and not timed_out and now >= deadline:
                timed_out = True
                kill_young(self.uid, since, exclude=(self.pid,), freezer=self.freezer)
                kill_at = time.monotonic() + SHELL_GRACE_S
                continue
            if kill_at is not None and now >= kill_at:
                self.drain(capture)
                return None, True, "stuck"
            if now >= next_check:
                next_check = now + CHECK_EVERY_S
                if shell_file is not None:
                    why = self.tampering(shell_file)
                    if why:
                        self.drain(capture)
                        return None, timed_out, "tampered: " + why
                if not quiet and self.idle():
                    idle_seen += 1
                    if idle_seen >= 2:  # the line was consumed but no status came
                        self.drain(capture)
                        return None, timed_out, ("tampered: the shell finished the command "
                                                 "without reporting its status")
                else:
                    idle_seen = 0


class Session:
    """The supervisor's request loop."""

    def __init__(self) -> None:
        self.host = HostInput()
        self.shell: Shell | None = None
        self.freezer: Freezer | None = None
        self.cfg: dict[str, Any] = {}
        self.shell_file: tuple[int, int] = (0, 0)
        self.count = 0
        #: The processes :meth:`op_freeze` stopped (continued by :meth:`op_thaw`).
        self.frozen: list[int] = []
        #: A process kept ready for the copy-out's tar (see :class:`Reserve`).
        self.reserve = Reserve()

    def serve(self) -> None:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        try:  # the agent's processes share the container's CPU: come first among them,
            os.setpriority(os.PRIO_PROCESS, 0, -20)  # so a timeout is enforced on time
        except OSError:
            pass  # no CAP_SYS_NICE (a container started otherwise): normal priority
        while True:
            request = self.host.line()
            if request is None:
                break
            op = request.get("op")
            try:
                handler = getattr(self, "op_" + str(op))
            except AttributeError:
                send({"ev": "error", "error": f"unknown request {op!r}"})
                continue
            try:
                handler(request)
            except Exception as exc:  # noqa: BLE001 - reported, the session goes on
                send({"ev": "error", "error": f"{type(exc).__name__}: {exc}",
                      "errno": getattr(exc, "errno", None)})
        self.stop()

    def stop(self) -> None:
        continue_all(self.frozen)  # never leave the agent frozen behind a closed session
        self.frozen = []
        if self.shell is not None:
            self.shell.kill()
            self.shell = None
        if self.freezer is not None:
            self.freezer.close()
        self.reserve.close()

    # -- requests

    def op_init(self, request: dict[str, Any]) -> None:
        cfg = request
        entry = pwd.getpwnam(cfg["user"]) if not str(cfg["user"]).isdigit() else None
        cfg["uid"] = entry.pw_uid if entry else int(cfg["user"])
        cfg["gid"] = entry.pw_gid if entry else int(cfg["user"])
        env = {k: v for k, v in os.environ.items() if k not in ("HOME", "HOSTNAME")}
        env.update(cfg.get("env") or {})
        cfg["env"] = env
        self.cfg = cfg
        self.shell_file = prepare_run_dir()
        for path in cfg.get("read_only_dirs") or ():  # dataset mount points
            if os.path.isdir(path):
                os.chown(path, 0, 0)
                os.chmod(path, 0o555)
        for path in cfg.get("agent_dirs") or ():  # folders above a dataset mount
            if os.path.isdir(path) and not os.path.islink(path):
                os.chown(path, cfg["uid"], cfg["gid"])
        untarred: dict[str, Any] = {}
        if cfg.get("size"):  # the starter files follow the request
            code, err = self._extract(cfg["workdir"], int(cfg["size"]))
            untarred = {"exit": code, "error": err}
        self.freezer = Freezer(cfg["uid"], cfg["gid"])
        self.freezer.arm()
        self.reserve.arm()
        self.shell = Shell(cfg, 0, self.freezer)
        self.shell.start(cfg["workdir"])
        send({"ev": "ready", "pid": self.shell.pid, "cwd": self.shell.cwd,
              "supervisor": os.getpid(), "untarred": untarred})

    def _restart(self, cwd: str | None, notes: list[dict[str, Any]] | None = None) -> Shell:
        old = self.shell
        if old is not None:
            old.kill()
        self.count += 1
        shell = self.shell = Shell(self.cfg, self.count, self.freezer)
        try:
            shell.start(cwd)
        except OSError as exc:
            if exc.errno not in NO_ROOM:
                raise
            # the agent's own processes leave no room for its shell: they go, the shell
            # comes back (the supervisor keeps control; the agent is told)
            shell.kill()
            killed = kill_all(self.cfg["uid"], self.freezer)
            if notes is not None:
                notes.append({"kind": "warning", "why": (
                    f"the sandbox's process or memory limit left no room to restart the shell: "
                    f"all {len(killed)} of the agent's processes were killed")})
            shell = self.shell = Shell(self.cfg, self.count, self.freezer)
            shell.start(cwd)
        return shell

    def _current(self) -> Shell:
        if self.shell is None:
            raise RuntimeError("the session has no shell (init first)")
        return self.shell

    def op_run(self, request: dict[str, Any]) -> None:
        notes: list[dict[str, Any]] = []
        capture = Capture(int(request.get("keep") or (1 << 20)))
        shell = self._current()
        if not shell.alive():
            shell = self._restart(shell.cwd, notes)
            notes.append({"kind": "restarted", "cwd": shell.cwd})
        else:  # an idle shell still runs its signal traps: one may have exec'd
            why = shell.tampering(self.shell_file)
            if why:
                shell = self._restart(shell.read_cwd() or shell.cwd, notes)
                notes.append({"kind": "tampered", "why": why, "cwd": shell.cwd})
        try:
            code, timed_out, note = shell.command(request["cmd"], request.get("timeout"),
                                                  capture, self.shell_file, host=self.host)
        except SystemExit:
            self.stop()
            raise
        if timed_out and note is None:
            # the shell came back: let it report the jobs the timeout killed now, in
            # this command's output, not at the start of the next one
            shell.command(":", 5.0, capture, quiet=True)
        cwd = shell.read_cwd() or shell.cwd
        restart: dict[str, Any] | None = None
        if note == "exited":
            restart = {"kind": "exited", "cwd": cwd}
        elif note == "stuck":
            restart = {"kind": "stuck", "cwd": cwd}
        elif note and note.startswith("tampered: "):
            restart = {"kind": "tampered", "why": note[len("tampered: "):], "cwd": cwd}
        elif note:
            notes.append({"kind": "warning", "why": note})
        if restart is None:
            why = shell.tampering(self.shell_file)
            if why:  # whatever ended the command may have forged its status
                restart = {"kind": "tampered", "why": why, "cwd": cwd}
                code = None
        if restart is not None:
            cwd = self._restart(cwd, notes).cwd
            restart["cwd"] = cwd
            notes.append(restart)
        else:
            shell.cwd = cwd
        reap()
        header, payload = capture.result()
        header.update({"ev": "done", "id": request.get("id"), "exit": code,
                       "timed_out": timed_out, "cwd": cwd, "notes": notes})
        send(header, payload)

    def op_kill(self, request: dict[str, Any]) -> None:
        exclude = [self.shell.pid] if self.shell is not None else []
        since = request.get("since")
        n = kill_young(self.cfg["uid"], None if since is None else int(since), exclude,
                       freezer=self.freezer)
        send({"ev": "killed", "count": n})

    def op_killall(self, request: dict[str, Any]) -> None:
        """Kill every process of the agent (the idle shell too, unless ``keep_shell``);
        answers with their command lines as /proc has them."""
        keep: list[int] = []
        shell = self.shell
        if request.get("keep_shell") and shell is not None and shell.alive():
            for _ in range(50):  # between commands it is idle (it may be just returning)
                if shell.idle():
                    keep = [shell.pid]
                    break
                time.sleep(0.01)
        lines = kill_all(self.cfg["uid"], self.freezer, keep)
        self.frozen = []
        send({"ev": "killedall", "commands": lines})

    def op_freeze(self, request: dict[str, Any]) -> None:
        """Stop every process of the agent until ``thaw``."""
        self.frozen = sorted(set(self.frozen) | set(stop_all(self.cfg["uid"], self.freezer)))
        send({"ev": "frozen", "count": len(self.frozen)})

    def op_thaw(self, request: dict[str, Any]) -> None:
        continue_all(self.frozen)
        count, self.frozen = len(self.frozen), []
        send({"ev": "thawed", "count": count})

    def op_counters(self, request: dict[str, Any]) -> None:
        send({"ev": "counters", **read_counters()})

    def _extract(self, dest: str, size: int) -> tuple[int, str]:
        """Extract the next ``size`` bytes of the host's input (a tar) into ``dest`` as
        the agent user; (exit status, error text)."""
        if os.path.isdir(dest):  # one process less when the folder is there
            argv = ["tar", "-x", "-f", "-", "-C", dest, "--no-same-owner"]
        else:
            argv = ["sh", "-c", 'mkdir -p -- "$1" && exec tar -x -f - -C "$1" --no-same-owner',
                    "sh", dest]
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            user=self.cfg["uid"], group=self.cfg["gid"], extra_groups=[],
            env=self.cfg["env"], cwd="/", preexec_fn=normal_priority)
        assert proc.stdin is not None and proc.stderr is not None
        broken = False
        for piece in self.host.take(size):
            if not broken:
                try:
                    proc.stdin.write(piece)
                except BrokenPipeError:
                    broken = True
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
        err = proc.stderr.read().decode("utf-8", "replace")
        return proc.wait(), err[-4000:]

    def op_untar(self, request: dict[str, Any]) -> None:
        """Extract a tar (the next ``size`` bytes) into ``dest`` as the agent user."""
        code, err = self._extract(request["dest"], int(request["size"]))
        send({"ev": "untarred", "exit": code, "error": err})

    def op_pack(self, request: dict[str, Any]) -> None:
        """Stream a tar of ``root`` (files the agent user can read) as chunk frames.

        The walk runs in this process with the agent's effective ids (no fork), the
        names go to a memory file, and ``tar`` starts as the agent user, from the
        :class:`Reserve` when the agent's processes leave no room for a fork."""
        root = request["root"]
        uid, gid = self.cfg["uid"], self.cfg["gid"]
        names = os.memfd_create("rgym-names", os.MFD_CLOEXEC)
        try:
            with AgentView(uid, gid):
                try:
                    report = walk(root, request, names)
                except Exception as exc:  # noqa: BLE001 - reported to the host
                    report = {"error": repr(exc)}
            os.lseek(names, 0, os.SEEK_SET)
            is_dir = os.path.isdir(root) and not os.path.islink(root)
            base = root if is_dir else os.path.dirname(root) or "/"
            argv = ["tar", "-c", "-f", "-", "--format=gnu", "--sparse", "--numeric-owner",
                    "--ignore-failed-read", "--warning=no-file-changed",
                    "--warning=no-file-removed", "-C", base, "--no-recursion", "--null",
                    "--verbatim-files-from", "-T", "-"]
            env = {"PATH": self.cfg["env"].get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            try:
                wait = self._start_tar(argv, (names, out_w, err_w), uid=uid, gid=gid, env=env)
            except BaseException:
                for fd in (out_r, err_r):
                    os.close(fd)
                raise
            finally:
                os.close(out_w)
                os.close(err_w)
        finally:
            os.close(names)
        # the archive entry that stands for ``root``: "." for a folder, else its name
        send({"ev": "pack-start", "root": "." if is_dir else os.path.basename(root)})
        errors = bytearray()
        open_fds = [out_r, err_r]
        while open_fds:
            ready, _, _ = select.select(open_fds, [], [])
            for fd in ready:
                data = os.read(fd, CHUNK)
                if not data:
                    open_fds.remove(fd)
                    os.close(fd)
                elif fd == out_r:
                    send({"ev": "chunk"}, data)
                elif len(errors) < 8000:
                    errors += data
        code = wait()
        self.reserve.arm()
        send({"ev": "packed", "exit": code, "stderr": errors.decode("utf-8", "replace"),
              "report": report})

    def _start_tar(self, argv: list[str], fds: tuple[int, int, int], *, uid: int, gid: int,
                   env: dict[str, str]) -> Any:
        """Start ``argv`` as the agent with ``fds`` as its stdin, stdout and stderr;
        returns a function that waits for it and gives its exit status."""
        try:
            proc = subprocess.Popen(argv, stdin=fds[0], stdout=fds[1], stderr=fds[2],
                                    user=uid, group=gid, extra_groups=[], cwd="/", env=env,
                                    preexec_fn=normal_priority)
            return proc.wait
        except OSError as exc:
            if exc.errno not in NO_ROOM:
                raise
            pid = self.reserve.spawn(argv, fds, uid=uid, gid=gid, env=env)
            if pid is None:
                raise

        def wait() -> int:
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)

        return wait

    def op_stop(self, request: dict[str, Any]) -> None:
        self.stop()
        send({"ev": "stopped"})
        sys.exit(0)


# -- the workspace walk (runs as the agent user) ------------------------------------


def glob_match(rel: str, pattern: str) -> bool:
    import fnmatch

    if fnmatch.fnmatchcase(rel, pattern):
        return True
    return pattern.startswith("**/") and glob_match(rel, pattern[3:])


def walk(root: str, request: dict[str, Any], out_fd: int) -> dict[str, Any]:
    """Write the NUL-separated names to archive (relative to the archive base) and
    return a report: files and bytes (apparent), what was skipped and why."""
    include = request.get("include")
    exclude = request.get("exclude") or []
    quota = request.get("quota")
    skipped: list[list[str]] = []
    total = 0
    files = 0

    def emit(name: str) -> None:
        write_all(out_fd, name.encode("utf-8", "surrogateescape") + b"\0")

    def skip(rel: str, why: str) -> None:
        if len(skipped) < 200:
            skipped.append([rel, why])

    try:
        st = os.lstat(root)
        if stat.S_ISDIR(st.st_mode):
            os.listdir(root)
        elif stat.S_ISREG(st.st_mode):
            os.close(os.open(root, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK))
    except OSError as exc:
        return {"files": 0, "bytes": 0, "skipped": [], "errno": exc.errno,
                "error": exc.strerror}
    if not stat.S_ISDIR(st.st_mode):
        name = os.path.basename(root)
        if stat.S_ISREG(st.st_mode):
            if quota is not None and st.st_size > quota:
                return {"files": 0, "bytes": st.st_size, "over_quota": True, "skipped": skipped}
            emit(name)
            return {"files": 1, "bytes": st.st_size, "skipped": skipped, "root": "file"}
        return {"files": 0, "bytes": 0, "skipped": [[name, "not a regular file"]],
                "not_regular": True}
    top_dev = st.st_dev
    emit(".")
    emitted = {""}

    def emit_dir(rel: str) -> None:
        """Emit a folder (and, with ``include``, its parents first, only when a file
        under it is included: folders holding nothing wanted are not copied)."""
        if rel in emitted:
            return
        parent = rel.rpartition("/")[0]
        emit_dir(parent)
        emit(rel)
        emitted.add(rel)

    stack = [""]
    while stack:
        rel_dir = stack.pop()
        path = os.path.join(root, rel_dir) if rel_dir else root
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as exc:
            skip(rel_dir or ".", f"unreadable folder: {exc.strerror}")
            continue
        for entry in entries:
            rel = rel_dir + "/" + entry.name if rel_dir else entry.name
            try:
                est = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if any(glob_match(rel, p) for p in exclude):
                continue
            if stat.S_ISDIR(est.st_mode):
                if est.st_dev != top_dev:
                    continue  # another file system: a dataset mount
                if not os.access(entry.path, os.R_OK | os.X_OK, effective_ids=True):
                    skip(rel, "unreadable folder")
                    continue
                if include is None:
                    emit_dir(rel)
                stack.append(rel)
            elif stat.S_ISREG(est.st_mode):
                if include is not None and not any(glob_match(rel, p) for p in include):
                    continue
                if not os.access(entry.path, os.R_OK, effective_ids=True):
                    skip(rel, "unreadable file")
                    continue
                total += est.st_size
                files += 1
                if quota is not None and total > quota:
                    return {"files": files, "bytes": total, "over_quota": True,
                            "skipped": skipped}
                emit_dir(rel_dir)
                emit(rel)
            elif stat.S_ISLNK(est.st_mode):
                # archived as a link, never followed: the host's extractor keeps one
                # that ends at a file inside the workspace, and drops the others
                if include is not None and not any(glob_match(rel, p) for p in include):
                    continue
                emit_dir(rel_dir)
                emit(rel)
            else:
                skip(rel, "not a regular file or folder")
    return {"files": files, "bytes": total, "skipped": skipped, "root": "dir"}


def main(argv: list[str]) -> None:
    mode = argv[1] if len(argv) > 1 else "session"
    if mode == "session":
        Session().serve()
    elif mode == "kill":  # kill UID SINCE_TICKS [EXCLUDE...]: the host's backstop
        uid = int(argv[2])
        since = None if argv[3] == "-" else int(argv[3])
        gid = pwd.getpwuid(uid).pw_gid if uid in {e.pw_uid for e in pwd.getpwall()} else uid
        print(kill_young(uid, since, [int(p) for p in argv[4:]], freezer=Freezer(uid, gid)))
    elif mode == "killall":  # killall UID: what a killed run left (``reap``)
        uid = int(argv[2])
        gid = pwd.getpwuid(uid).pw_gid if uid in {e.pw_uid for e in pwd.getpwall()} else uid
        print(json.dumps(kill_all(uid, Freezer(uid, gid))))
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
