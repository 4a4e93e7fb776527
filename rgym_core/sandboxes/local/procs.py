"""Process control on the host: finding, freezing and killing processes by what
/proc says about them (never by what they say about themselves)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def pids() -> list[int]:
    """Every process id visible in /proc."""
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def _stat_fields(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2:].split()


def stat(pid: int) -> tuple[int, int] | None:
    """``(ppid, session id)`` of a live (not zombie) process, else None."""
    fields = _stat_fields(pid)
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[1]), int(fields[3])


def alive(pid: int) -> bool:
    return stat(pid) is not None


def session_of(pid: int) -> int | None:
    st = stat(pid)
    return None if st is None else st[1]


def boot_ticks() -> int:
    """Now, in the clock ticks /proc/PID/stat counts start times in."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _CLOCK_TICKS)


def started_at(pid: int) -> int | None:
    """When a process started, in clock ticks since boot."""
    fields = _stat_fields(pid)
    return None if not fields else int(fields[19])


def environ_has(pid: int, needle: bytes) -> bool:
    """True when the process's initial environment holds ``needle``
    (``\\0NAME=value\\0``); False when it cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in b"\0" + f.read()
    except OSError:
        return False


def needle(name: str, value: str) -> bytes:
    return f"\0{name}={value}\0".encode()


def uid_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def pid_namespace(pid: int) -> int | None:
    """The inode of the process's pid namespace (equal for processes that share it)."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """Direct children of a process (its main thread's)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def cwd_of(pid: int) -> str | None:
    """The working folder of a process as its own mount namespace names it."""
    try:
        path = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    return path[:-len(" (deleted)")] if path.endswith(" (deleted)") else path


def kill_matching(match: Callable[[int], bool], exclude: set[int] | None = None,
                  rounds: int = 50) -> int:
    """SIGSTOP then SIGKILL every process ``match`` accepts, again and again until
    none is left (a process may fork while we scan); return how many were killed."""
    skip = {os.getpid()} | (exclude or set())
    killed = 0
    for _ in range(rounds):
        found = [p for p in pids() if p not in skip and stat(p) is not None and match(p)]
        if not found:
            break
        # Stop them all first, so none runs again to fork or report a dying child.
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in found:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    continue
                killed += sig == signal.SIGKILL
        time.sleep(0.002)
    return killed


def state(pid: int) -> bytes | None:
    """The one-letter state of a process (``R``, ``S``, ``D``, ``T``, ``Z``...), or None."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def cmdline(pid: int, limit: int = 200) -> str:
    """A process's command line as /proc shows it (arguments joined by spaces, at
    most ``limit`` characters, control characters replaced); "" when gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4 * limit)
    except OSError:
        return ""
    text = " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


#: A process as :func:`freeze_matching` stopped it: its pid and start time, so that a
#: pid reused by a new process is never continued.
Frozen = tuple[int, int]
_STOPPED = (b"T", b"t", b"Z", b"X")


def freeze_matching(match: Callable[[int], bool], exclude: set[int] | None = None,
                    deadline_s: float = 5.0) -> tuple[list[Frozen], bool]:
    """SIGSTOP every process ``match`` accepts until one scan finds all of them
    stopped (a process may fork or continue another while we scan; stopped ones do
    neither).  Returns the stopped processes and whether every one was stopped
    before the deadline (a process in uninterruptible sleep stops when it leaves it)."""
    skip = {os.getpid()} | (exclude or set())
    frozen: dict[int, int] = {}
    end = time.monotonic() + deadline_s
    while True:
        running = []
        for pid in pids():
            if pid in skip or not match(pid):
                continue
            if state(pid) not in (None, *_STOPPED):
                running.append(pid)
        if not running:
            return list(frozen.items()), True
        if time.monotonic() >= end:
            return list(frozen.items()), False
        for pid in running:
            start = started_at(pid)
            if start is not None:
                frozen.setdefault(pid, start)  # only what we stopped is continued later
                kill(pid, signal.SIGSTOP)
        time.sleep(0.001)


def thaw(frozen: list[Frozen]) -> None:
    """SIGCONT what :func:`freeze_matching` stopped (still the same processes)."""
    for pid, start in frozen:
        if started_at(pid) == start:
            kill(pid, signal.SIGCONT)


def kill_named(match: Callable[[int], bool]) -> list[tuple[int, str]]:
    """Stop every process ``match`` accepts, read its command line while it cannot
    change, then kill them all (:func:`kill_matching`); ``(pid, command line)`` of
    those it stopped, in pid order."""
    stopped, _ = freeze_matching(match, deadline_s=2.0)
    named = [(pid, cmdline(pid)) for pid, _ in sorted(stopped)]
    kill_matching(match)
    return named


def kill(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def exit_code(returncode: int) -> int:
    """A shell-style exit code (128+N for a signal) from a Popen return code."""
    return 128 - returncode if returncode < 0 else returncode
