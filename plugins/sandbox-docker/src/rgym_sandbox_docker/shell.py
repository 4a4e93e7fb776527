"""The host side of an episode's supervisor session: one attached ``docker exec``
running :mod:`rgym_sandbox_docker.supervisor` as root inside the container.

The supervisor owns the agent's persistent ``bash`` and reports each command's
end, exit code, working directory and timeout from its own measurements (see
its module docstring for the protocol and what it guarantees).  Everything it
sends is framed, so nothing the agent prints can be taken for protocol.  This
side adds the host backstop: when no answer comes :data:`BACKSTOP_GRACE_S`
after a command's timeout, it kills the agent's young processes from a second
exec and starts a new session in the last known directory.

The same session carries workspace transfers: ``untar`` (the starter files and
:meth:`~rgym_sandbox_docker.sandbox.DockerSandbox.copy_in`, extracted as the
agent user) and ``pack`` (one tar stream of a folder as the agent user sees it,
sparse files kept sparse, for copy-out and grading).
"""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from rgym_core import (
    DEFAULT_OUTPUT_LIMIT,
    TIMEOUT_EXIT_CODE,
    ExecResult,
    truncate_output,
    truncation_marker,
)
from rgym_sandbox_docker.execstream import STDERR, ExecStream, StreamClosed, run_collect

#: Seconds the host waits past a command's timeout (and the supervisor's own grace)
#: before it kills the command itself.
BACKSTOP_GRACE_S = 10.0
#: Seconds a supervisor gets to start and answer.
START_TIMEOUT_S = 60.0
#: Bytes of the start and of the end of a command's output the supervisor keeps
#: (at least; more for large output limits).
KEEP_BYTES = 1 << 16
_FRAME = struct.Struct(">II")
SUPERVISOR_SOURCE = (Path(__file__).with_name("supervisor.py")).read_bytes()
#: Reads the supervisor's source (its length is the first argument) from stdin and
#: runs it: the process's command line stays short (the agent sees it in ``ps``).
BOOTSTRAP = ("import os, sys\n"
             "n = int(sys.argv[1]); src = b''\n"
             "while len(src) < n:\n"
             "    chunk = os.read(0, n - len(src))\n"
             "    if not chunk: sys.exit('rgym supervisor: source cut short')\n"
             "    src += chunk\n"
             "del sys.argv[1]\n"
             "exec(compile(src, 'rgym-supervisor', 'exec'))\n")


def supervisor_argv(*args: str) -> list[str]:
    """The command that starts the supervisor (its source follows on stdin)."""
    return ["python3", "-I", "-S", "-c", BOOTSTRAP, str(len(SUPERVISOR_SOURCE)), *args]


class SupervisorError(RuntimeError):
    """The supervisor failed or sent something unexpected.  ``errno``: the error number
    of the supervisor's failed system call, when it reported one (``EAGAIN``: the
    agent's processes left no room for a fork)."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


def ansi_c_quote(text: str) -> str:
    """Quote ``text`` as a bash ``$'...'`` string that holds it on one line."""
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


def render_output(head: bytes, tail: bytes, dropped: int, limit: int) -> tuple[str, bool]:
    """The text of a command's output from its kept head and tail bytes (``dropped``
    bytes between them were not kept), capped at ``limit`` characters with the same
    marker as :func:`rgym_core.sandbox.truncate_output`."""
    if not dropped:
        return truncate_output((head + tail).decode("utf-8", "replace"), limit)
    h_txt, t_txt = head.decode("utf-8", "replace"), tail.decode("utf-8", "replace")
    if limit <= 0:
        return h_txt + t_txt, False
    total = len(h_txt) + len(t_txt) + dropped
    h = limit * 2 // 3
    t = limit - h
    marker = truncation_marker(total - h - t)
    return h_txt[:h] + marker + (t_txt[-t:] if t else ""), True


def note_for(note: Mapping[str, Any]) -> str:
    """The line added to a command's output for a supervisor note."""
    kind, cwd = note.get("kind"), note.get("cwd")
    if kind == "tampered":
        return (f"[the shell was replaced or modified ({note.get('why')}); it was restarted in "
                f"{cwd}, without the old shell variables]")
    if kind == "stuck":
        return (f"[the shell itself did not stop after the timeout; it was restarted in {cwd}, "
                f"without the old shell variables]")
    if kind == "warning":
        return f"[{note.get('why')}]"
    return (f"[the shell session ended; the next command runs in a new one, in {cwd}, "
            f"without the old shell variables]")


class _FrameReader:
    """Supervisor frames out of the exec's multiplexed stream."""

    def __init__(self, stream: ExecStream) -> None:
        self.stream = stream
        self.buf = bytearray()
        self.stderr = bytearray()

    def next(self, deadline: float | None) -> tuple[dict[str, Any], bytes] | None:
        """The next frame, or ``None`` once ``deadline`` (monotonic) passes.
        Raises :class:`StreamClosed` when the supervisor ended."""
        while True:
            if len(self.buf) >= _FRAME.size:
                hlen, plen = _FRAME.unpack_from(self.buf)
                end = _FRAME.size + hlen + plen
                if len(self.buf) >= end:
                    header = json.loads(bytes(self.buf[_FRAME.size:_FRAME.size + hlen]))
                    payload = bytes(self.buf[_FRAME.size + hlen:end])
                    del self.buf[:end]
                    return header, payload
            frames = self.stream.read_frames(deadline)
            if not frames:
                return None
            for kind, data in frames:
                if kind == STDERR:
                    if len(self.stderr) < 65536:
                        self.stderr += data
                else:
                    self.buf += data


class ShellSession:
    """A supervisor session in a container: the agent's shell as ``user``, starting
    in ``workdir``.  Thread-safe: one request at a time."""

    def __init__(self, api: Any, container_id: str, *, user: str, workdir: str,
                 environment: Mapping[str, str] | None = None,
                 read_only_dirs: list[str] | None = None,
                 agent_dirs: list[str] | None = None) -> None:
        self.api = api
        self.container_id = container_id
        self.user = user
        self.cwd = workdir
        self.workdir = workdir
        self.environment = dict(environment or {})
        self.read_only_dirs = list(read_only_dirs or [])
        self.agent_dirs = list(agent_dirs or [])
        self.stream: ExecStream | None = None
        self.reader: _FrameReader | None = None
        self.pid: int | None = None
        self.supervisor_pid: int | None = None
        self.restarts = 0
        self._counter = 0
        self._uid: str | None = None
        self._lock = threading.RLock()

    # -- lifecycle ---------------------------------------------------------------

    def start(self, starter: IO[bytes] | None = None, starter_size: int = 0) -> None:
        """Start (or restart) the supervisor and its shell, in :attr:`cwd`; ``starter``
        (a tar of ``starter_size`` bytes) is extracted into the workspace first, as
        the agent user."""
        with self._lock:
            self.close()
            self.stream = ExecStream(self.api, self.container_id, supervisor_argv("session"),
                                     user="root")
            self.reader = _FrameReader(self.stream)
            self.stream.write(SUPERVISOR_SOURCE)
            self._send({"op": "init", "user": self.user, "workdir": self.cwd,
                        "env": self.environment, "read_only_dirs": self.read_only_dirs,
                        "agent_dirs": self.agent_dirs,
                        "size": starter_size if starter is not None else 0})
            if starter is not None:
                self._stream_in(starter, starter_size)
            header, _ = self._expect("ready", time.monotonic() + START_TIMEOUT_S)
            untarred = header.get("untarred") or {}
            if untarred and untarred.get("exit") != 0:
                raise OSError(f"laying out the starter files failed: "
                              f"{str(untarred.get('error', '')).strip()}")
            self.pid = int(header["pid"])
            self.supervisor_pid = int(header["supervisor"])
            self.cwd = header.get("cwd") or self.cwd
            self.read_only_dirs = self.agent_dirs = []  # done once per container

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
            self.stream = None
            self.reader = None

    @property
    def alive(self) -> bool:
        return self.stream is not None and not self.stream.closed

    def _ensure(self) -> None:
        if not self.alive:
            self.start()

    # -- plumbing ----------------------------------------------------------------

    def _send(self, request: Mapping[str, Any], payload: bytes = b"") -> None:
        assert self.stream is not None
        self.stream.write(json.dumps(request).encode() + b"\n" + payload)

    def _expect(self, event: str, deadline: float | None) -> tuple[dict[str, Any], bytes]:
        assert self.reader is not None
        try:
            frame = self.reader.next(deadline)
        except StreamClosed as exc:
            raise SupervisorError(f"the container's supervisor ended: {self._stderr()}") from exc
        if frame is None:
            raise TimeoutError(f"the container's supervisor did not answer ({event})")
        header, payload = frame
        if header.get("ev") == "error":
            raise SupervisorError(f"the container's supervisor failed: {header.get('error')}",
                                  header.get("errno"))
        if header.get("ev") != event:
            raise SupervisorError(f"unexpected answer from the supervisor: {header}")
        return header, payload

    def _stderr(self) -> str:
        text = bytes(self.reader.stderr).decode("utf-8", "replace") if self.reader else ""
        return text.strip()[-2000:] or "no message"

    # -- commands ----------------------------------------------------------------

    def run(self, command: str, *, timeout: float | None = None,
            output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        """Run ``command`` in the agent's shell; see the module docstring."""
        with self._lock:
            self._ensure()
            self._counter += 1
            keep = max(KEEP_BYTES, 4 * output_limit)
            started = time.monotonic()
            boot_ticks = self.boot_ticks()
            self._send({"op": "run", "id": self._counter, "cmd": command, "timeout": timeout,
                        "keep": keep})
            deadline = None if timeout is None else started + timeout + BACKSTOP_GRACE_S
            try:
                header, payload = self._expect("done", deadline)
            except (TimeoutError, SupervisorError, StreamClosed) as exc:
                return self._backstop(started, boot_ticks, timeout, exc)
            head, tail = payload[:header["head"]], payload[header["head"]:]
            text, truncated = render_output(head, tail, int(header.get("dropped", 0)),
                                            output_limit)
            notes = header.get("notes") or []
            if any(n.get("kind") != "warning" for n in notes):
                self.restarts += 1
            if notes:
                lines = "\n".join(note_for(n) for n in notes)
                text = text + ("\n" if text and not text.endswith("\n") else "") + lines + "\n"
            self.cwd = header.get("cwd") or self.cwd
            timed_out = bool(header.get("timed_out"))
            code = header.get("exit")
            if timed_out:
                code = TIMEOUT_EXIT_CODE
            elif code is None:
                code = 1
            return ExecResult(int(code), text, timed_out=timed_out, truncated=truncated,
                              duration_s=time.monotonic() - started)

    def boot_ticks(self) -> int | None:
        """Now on the container's process clock (shared with the host's kernel)."""
        try:
            import os

            return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))
        except (AttributeError, ValueError, OSError):
            return None

    def _backstop(self, started: float, since: int | None, timeout: float | None,
                  exc: BaseException) -> ExecResult:
        """The supervisor did not answer in time (or died): kill from a second exec,
        then start a new session where the shell was."""
        self.kill_young(since, supervisor_too=True)
        self.close()
        self.restarts += 1
        elapsed = time.monotonic() - started
        timed_out = timeout is not None and elapsed >= timeout
        note = note_for({"kind": "exited", "cwd": self.cwd})
        for attempt in range(4):  # a process table just freed may need a moment
            try:
                self.start()
                break
            except Exception as again:  # noqa: BLE001 - the container may be gone
                if attempt == 3:
                    raise SupervisorError(f"{exc}; restarting the shell failed: {again}") \
                        from exc
                self.kill_young(None, supervisor_too=True)
                time.sleep(0.5 * (attempt + 1))
        return ExecResult(TIMEOUT_EXIT_CODE if timed_out else 1,
                          f"[the sandbox's shell did not answer: {exc}]\n{note}\n",
                          timed_out=timed_out, duration_s=elapsed)

    def kill_young(self, since: int | None, *, supervisor_too: bool = False) -> None:
        """Kill the agent's processes started since ``since`` (boot ticks; None: all but
        the shell): through the supervisor when it is free and answering, else from a
        separate root exec."""
        if not supervisor_too and self.alive and self._lock.acquire(blocking=False):
            try:
                self._send({"op": "kill", "since": since})
                self._expect("killed", time.monotonic() + 30)
                return
            except (TimeoutError, SupervisorError, StreamClosed, OSError):
                self.close()  # it did not answer: the exec below, and a new session next
            finally:
                self._lock.release()
        exclude = [] if supervisor_too or self.pid is None else [str(self.pid)]
        argv = supervisor_argv("kill", self.user_id(), "-" if since is None else str(since),
                               *exclude)
        run_collect(self.api, self.container_id, argv, user="root", input=SUPERVISOR_SOURCE,
                    timeout=60)
        if supervisor_too and self.supervisor_pid:
            run_collect(self.api, self.container_id,
                        ["python3", "-I", "-S", "-c", "import os, sys; os.kill(int(sys.argv[1]), 9)",
                         str(self.supervisor_pid)], user="root", timeout=30)

    def request(self, op: str, answer: str, timeout: float = 60.0,
                **fields: Any) -> dict[str, Any]:
        """One request to the supervisor (started if needed) and its answer's header."""
        with self._lock:
            self._ensure()
            self._send({"op": op, **fields})
            header, _ = self._expect(answer, time.monotonic() + timeout)
            return header

    def kill_all(self, *, keep_shell: bool = False) -> list[str]:
        """Kill every process of the agent user (the shell too unless ``keep_shell``
        and it is idle); their command lines as the supervisor read them in /proc."""
        header = self.request("killall", "killedall", keep_shell=keep_shell)
        return [str(c) for c in header.get("commands") or []]

    def freeze(self) -> int:
        """Stop every process of the agent user (SIGSTOP, looped until none runs)."""
        return int(self.request("freeze", "frozen").get("count", 0))

    def thaw(self) -> int:
        return int(self.request("thaw", "thawed").get("count", 0))

    def counters(self) -> dict[str, int]:
        """OOM kills and refused forks of the container, read by the supervisor."""
        header = self.request("counters", "counters", timeout=30)
        return {"oom": int(header.get("oom", 0)), "pids": int(header.get("pids", 0))}

    def user_id(self) -> str:
        if self.user.isdigit():
            return self.user
        if self._uid is None:
            out = run_collect(self.api, self.container_id, ["id", "-u", self.user], user="root",
                              timeout=30).stdout.decode().strip()
            self._uid = out if out.isdigit() else "1000"
        return self._uid

    # -- workspace transfers -------------------------------------------------------

    def untar(self, archive: IO[bytes], size: int, dest: str) -> None:
        """Extract ``size`` bytes of tar from ``archive`` into ``dest`` as the agent."""
        with self._lock:
            self._ensure()
            assert self.stream is not None
            self._send({"op": "untar", "dest": dest, "size": size})
            self._stream_in(archive, size)
            header, _ = self._expect("untarred", time.monotonic() + 600)
            if header.get("exit") != 0:
                raise OSError(f"extracting into {dest} failed: {header.get('error', '').strip()}")

    def _stream_in(self, archive: IO[bytes], size: int) -> None:
        assert self.stream is not None
        left = size
        while left:
            piece = archive.read(min(left, 1 << 20))
            if not piece:
                raise OSError("the archive ended early")
            self.stream.write(piece)
            left -= len(piece)

    def pack(self, root: str, *, include: list[str] | None = None,
             exclude: list[str] | None = None, quota: int | None = None) -> PackStream:
        """Start streaming a tar of ``root``; read it from the returned stream, then
        look at its :attr:`PackStream.report`."""
        self._lock.acquire()
        try:
            self._ensure()
            self._send({"op": "pack", "root": root, "include": include, "exclude": exclude or [],
                        "quota": quota})
            header, _ = self._expect("pack-start", time.monotonic() + 600)
        except BaseException:
            self._lock.release()
            raise
        return PackStream(self, str(header.get("root") or "."))


class PackStream:
    """A file-like, read-only view of a ``pack`` answer: the tar bytes, then the report.
    Holds the session until closed."""

    def __init__(self, session: ShellSession, root: str) -> None:
        self.session = session
        #: The archive entry that stands for the packed path ("." for a folder).
        self.root = root
        self.buf = bytearray()
        self.done = False
        self.report: dict[str, Any] = {}
        self.exit: int | None = None
        self.stderr = ""
        self.missing = False
        self._released = False

    def _pull(self) -> bool:
        if self.done:
            return False
        reader = self.session.reader
        assert reader is not None
        try:
            frame = reader.next(time.monotonic() + 600)
        except StreamClosed as exc:
            self.done = True
            raise SupervisorError("the container's supervisor ended during a copy") from exc
        if frame is None:
            self.done = True
            raise TimeoutError("the copy from the container stalled for 600 s")
        header, payload = frame
        if header.get("ev") == "chunk":
            self.buf += payload
            return True
        self.done = True
        if header.get("ev") == "error":
            raise SupervisorError(f"the container's supervisor failed: {header.get('error')}",
                                  header.get("errno"))
        self.report = header.get("report") or {}
        self.exit = header.get("exit")
        self.stderr = header.get("stderr") or ""
        self.missing = bool(header.get("missing"))
        return False

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            while self._pull():
                pass
            out = bytes(self.buf)
            self.buf.clear()
            return out
        while len(self.buf) < size and self._pull():
            pass
        out = bytes(self.buf[:size])
        del self.buf[:size]
        return out

    def finish(self) -> None:
        """Read to the end (the report), discarding any remaining tar bytes."""
        while self._pull():
            self.buf.clear()
        self.buf.clear()

    def close(self) -> None:
        if self._released:
            return
        try:
            if not self.done:
                self.finish()
        finally:
            self._released = True
            self.session._lock.release()

    def __enter__(self) -> PackStream:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - an error inside the block wins
            if exc[0] is None:
                raise

    def __iter__(self) -> Iterator[bytes]:
        while True:
            piece = self.read(1 << 16)
            if not piece:
                return
            yield piece
