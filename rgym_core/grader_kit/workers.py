"""Running agent code from a grader: confined workers.

Every call goes to the grading supervisor over the control socket it gave the
grader (``$RGYM_SUPERVISOR_FD``).  A grader run without one (by hand, in a pack's
unit test) gets a private supervisor started on first use, which runs workers
without user separation (``context().confined`` is False).

Three levels, pick the smallest that fits:

* :func:`run_worker`: run a command of the submission to the end, with input files,
  and get its output files back as bytes;
* :func:`start_worker`: a running process with pipes (your own line protocol);
* :class:`FunctionWorker`: call functions of a submission module, JSON in and out,
  one call or a batch per round trip.

Whatever a worker sends back is untrusted data: parse it, bound it, never unpickle it.
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import protocol as p
from .context import before_write, context
from .limits import Limits

__all__ = ["Limits", "Worker", "WorkerResult", "FunctionWorker", "start_worker", "run_worker",
           "end_workers", "WorkerError", "AgentCodeError", "WorkerTimeout", "WorkerExited",
           "WorkerProtocolError", "ConfinementError"]

_STDERR_KEEP = 64 << 10


class WorkerError(Exception):
    """The agent's code failed; ``str(error)`` is written for the agent."""


class AgentCodeError(WorkerError):
    """The agent's code raised an exception (the message holds the traceback's tail)."""


class WorkerTimeout(WorkerError):
    """The worker did not answer in time (it was killed)."""


class WorkerExited(WorkerError):
    """The worker's process ended unexpectedly."""

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class WorkerProtocolError(WorkerError):
    """The worker sent something that does not follow the protocol."""


class ConfinementError(RuntimeError):
    """The supervisor could not start, stop or read a worker (not the agent's fault).
    Let it propagate: the grading then fails as an evaluation error."""


# -- the connection to the supervisor -----------------------------------------------------


class _Connection:
    def __init__(self, sock: socket.socket, helper: Any = None) -> None:
        self.sock = sock
        self.helper = helper
        self.lock = threading.Lock()
        self.used = False

    def request(self, message: dict[str, Any], fds: Sequence[int] = ()) -> tuple[dict[str, Any], list[int]]:
        with self.lock:
            self.used = True
            try:
                p.send(self.sock, message, fds)
                reply, got = p.receive(self.sock)
            except p.ChannelClosed as exc:
                raise ConfinementError(f"the grading supervisor is gone: {exc}") from None
        return reply, got


_connection: _Connection | None = None
_connect_lock = threading.Lock()


def _connect() -> _Connection:
    global _connection
    with _connect_lock:
        if _connection is not None:
            return _connection
        fd_text = os.environ.get(p.ENV_SUPERVISOR_FD)
        if fd_text:
            sock = socket.socket(fileno=int(fd_text))
            _connection = _Connection(sock)
            return _connection
        import subprocess

        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        supervisor = Path(__file__).resolve().parent / "supervisor.py"
        helper = subprocess.Popen(
            [sys.executable, "-I", "-S", str(supervisor), "--serve", str(theirs.fileno()),
             "--submission", str(context().submission_dir)],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        theirs.close()
        _connection = _Connection(mine, helper)
        return _connection


def end_workers() -> None:
    """Kill every worker (and everything they started) and check that none is left.
    :func:`~rgym_grader_kit.write_scores` calls it; raises :class:`ConfinementError`
    when a process survives."""
    if _connection is None or not _connection.used:
        return
    reply, _ = _connection.request({"op": "end"})
    if not reply.get("ok"):
        raise ConfinementError(f"could not stop every process of the submission's code "
                               f"({len(reply.get('left') or [])} left)")


before_write(end_workers)


def _ask(conn: _Connection, message: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    reply, fds = conn.request(message)
    if not reply.get("ok"):
        for fd in fds:
            os.close(fd)
        raise ConfinementError(str(reply.get("error") or "the supervisor refused the request"))
    return reply, fds


# -- one worker ------------------------------------------------------------------------


FileSource = bytes | str | os.PathLike[str]


def _file_fds(files: Mapping[str, FileSource]) -> tuple[list[str], list[int]]:
    names, fds = [], []
    try:
        for name, source in files.items():
            if isinstance(source, bytes):
                fd = os.memfd_create("rgym-input", os.MFD_CLOEXEC)
                view = memoryview(source)
                while view:
                    view = view[os.write(fd, view):]
            else:
                fd = os.open(os.fspath(source), os.O_RDONLY)
            names.append(str(name))
            fds.append(fd)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return names, fds


class Worker:
    """A running worker: agent code in its own confined process tree.

    ``stdin``/``stdout`` are the raw pipe descriptors' file objects; most graders
    use :meth:`write_line` and :meth:`read_line`.  Its stderr is collected in the
    background (the last 64 KiB), for error messages (:meth:`stderr_tail`).
    """

    def __init__(self, conn: _Connection, wid: int, fds: list[int], name: str) -> None:
        self._conn = conn
        self.wid = wid
        self.name = name
        self.stdin = os.fdopen(fds[0], "wb", buffering=0)
        self.stdout = os.fdopen(fds[1], "rb", buffering=0)
        self._stderr_fd = fds[2]
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._buffer = bytearray()
        self._eof = False
        self.exit_code: int | None = None
        self._drain = threading.Thread(target=self._drain_stderr, daemon=True)
        self._drain.start()

    def _drain_stderr(self) -> None:
        try:
            while True:
                chunk = os.read(self._stderr_fd, 65536)
                if not chunk:
                    break
                with self._stderr_lock:
                    self._stderr += chunk
                    if len(self._stderr) > 2 * _STDERR_KEEP:
                        del self._stderr[:-_STDERR_KEEP]
        except OSError:
            pass
        finally:
            os.close(self._stderr_fd)

    # talking --------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Send bytes to the worker's stdin; a worker that is gone raises WorkerExited."""
        try:
            view = memoryview(data)
            while view:
                view = view[self.stdin.write(view) or 0:]
        except (BrokenPipeError, ValueError):
            self._exited("stopped reading its input")

    def write_line(self, text: str) -> None:
        self.write(text.encode() + b"\n")

    def read_line(self, timeout: float, *, max_bytes: int = 64 << 20) -> str:
        """The next line of the worker's stdout (without the newline).  Raises
        :class:`WorkerTimeout` (and kills the worker) when none arrives in
        ``timeout`` seconds, :class:`WorkerExited` when its output ends."""
        return self.read_line_bytes(timeout, max_bytes=max_bytes).decode("utf-8", "replace")

    def read_line_bytes(self, timeout: float, *, max_bytes: int = 64 << 20) -> bytes:
        deadline = time.monotonic() + timeout
        fd = self.stdout.fileno()
        start = 0
        while True:
            pos = self._buffer.find(b"\n", start)
            if pos >= 0:
                line = bytes(self._buffer[:pos])
                del self._buffer[:pos + 1]
                return line
            start = len(self._buffer)
            if len(self._buffer) > max_bytes:
                self.kill()
                raise WorkerProtocolError(f"{self.name} sent a line longer than {max_bytes} bytes")
            if self._eof:
                self._exited("ended its output")
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout(f"{self.name} did not answer within {timeout:g} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if chunk:
                    self._buffer += chunk
                else:
                    self._eof = True

    def read_all(self, timeout: float, *, max_bytes: int = 64 << 20) -> bytes:
        """Everything the worker writes to stdout until it closes it."""
        deadline = time.monotonic() + timeout
        fd = self.stdout.fileno()
        while not self._eof:
            if len(self._buffer) > max_bytes:
                self.kill()
                raise WorkerProtocolError(f"{self.name} wrote more than {max_bytes} bytes")
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout(f"{self.name} did not finish within {timeout:g} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if chunk:
                    self._buffer += chunk
                else:
                    self._eof = True
        out = bytes(self._buffer)
        self._buffer.clear()
        return out

    # life ----------------------------------------------------------------------

    def poll(self) -> int | None:
        """The exit code once the worker's main process has ended (negative: killed
        by that signal), else None."""
        if self.exit_code is None:
            reply, _ = _ask(self._conn, {"op": "status", "worker": self.wid})
            if not reply.get("running"):
                self.exit_code = reply.get("exit_code")
        return self.exit_code

    def wait(self, timeout: float) -> int:
        """Wait for the main process to end; :class:`WorkerTimeout` (after killing
        it) if it runs past ``timeout``."""
        deadline = time.monotonic() + timeout
        delay = 0.001
        while True:
            code = self.poll()
            if code is not None:
                return code
            if time.monotonic() > deadline:
                self.kill()
                raise WorkerTimeout(f"{self.name} did not finish within {timeout:g} s")
            time.sleep(delay)
            delay = min(delay * 2, 0.01)  # noticed within 10 ms of the end

    def kill(self) -> None:
        """Kill the worker and every process it started."""
        reply, _ = _ask(self._conn, {"op": "kill", "worker": self.wid})
        if not reply.get("running"):
            self.exit_code = reply.get("exit_code")

    def killed_for(self) -> str | None:
        reply, _ = _ask(self._conn, {"op": "status", "worker": self.wid})
        return reply.get("killed_for")

    def fetch(self, path: str, *, max_bytes: int = 256 << 20) -> bytes:
        """A regular file the worker wrote in its folder (``path`` relative to it),
        once it has stopped.  Raises :class:`WorkerError` when the file is missing,
        a link or larger than ``max_bytes``."""
        if self.poll() is None:
            self.kill()
        reply, fds = self._conn.request({"op": "fetch", "worker": self.wid, "path": path,
                                         "max_bytes": max_bytes})
        if not reply.get("ok"):
            for fd in fds:
                os.close(fd)
            raise WorkerError(f"{self.name}: cannot read '{path}': {reply.get('error')}")
        with os.fdopen(fds[0], "rb") as fh:
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise WorkerError(f"{self.name}: '{path}' is larger than {max_bytes} bytes")
        return data

    def stderr_tail(self, chars: int = 2000) -> str:
        """The end of what the worker wrote to stderr."""
        with self._stderr_lock:
            text = bytes(self._stderr[-4 * chars:]).decode("utf-8", "replace")
        return text[-chars:].strip()

    def _exited(self, what: str) -> None:
        code = None
        try:
            code = self.wait(2.0)
        except WorkerTimeout:
            pass
        self._drain.join(timeout=1.0)
        tail = self.stderr_tail(800)
        reason = self.killed_for()
        if reason == "wall_time":
            raise WorkerTimeout(f"{self.name} ran past its time limit and was stopped"
                                + (f": {tail}" if tail else ""))
        raise WorkerExited(f"{self.name} {what} (exit code {code})" + (f": {tail}" if tail else ""),
                           exit_code=code)

    def close(self) -> None:
        """Kill the worker (if it runs) and release its pipes."""
        try:
            if self.poll() is None:
                self.kill()
        except ConfinementError:
            pass
        for fh in (self.stdin, self.stdout):
            try:
                fh.close()
            except OSError:
                pass
        self._drain.join(timeout=1.0)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_worker(argv: Sequence[str], *, files: Mapping[str, FileSource] | None = None,
                 env: Mapping[str, str] | None = None, limits: Limits | None = None,
                 with_submission: bool = True, name: str = "the submission's code") -> Worker:
    """Start agent code confined, in a private copy of the submission.

    ``argv[0] == "python"`` runs the grader's interpreter (user site off); ``files``
    maps names inside the worker's folder to bytes or grader paths, copied in before
    it starts; ``env`` is added to a minimal environment (no seed, no grader paths);
    ``name`` is how error messages call it.
    """
    conn = _connect()
    names, fds = _file_fds(files or {})
    try:
        reply, got = conn.request({"op": "start", "argv": list(argv), "env": dict(env or {}),
                                   "limits": (limits or Limits()).to_dict(), "files": names,
                                   "with_submission": with_submission}, fds)
    finally:
        for fd in fds:
            os.close(fd)
    if not reply.get("ok"):
        for fd in got:
            os.close(fd)
        raise ConfinementError(f"could not start {name}: {reply.get('error')}")
    return Worker(conn, int(reply["worker"]), got, name)


@dataclass
class WorkerResult:
    """How a :func:`run_worker` command ended and what it left."""

    exit_code: int | None
    timed_out: bool
    stdout: bytes
    stderr_tail: str
    #: The requested output files that exist, as bytes.
    files: dict[str, bytes] = field(default_factory=dict)
    #: Why each requested output file could not be read.
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def run_worker(argv: Sequence[str], *, files: Mapping[str, FileSource] | None = None,
               outputs: Iterable[str] = (), env: Mapping[str, str] | None = None,
               limits: Limits | None = None, input: bytes | None = None,
               with_submission: bool = True, max_output_bytes: int = 256 << 20,
               name: str = "the submission's code") -> WorkerResult:
    """Run agent code to the end (at most ``limits.wall_s``) and collect ``outputs``
    (files it wrote, relative to its folder).  Never raises for the agent's failures:
    read ``exit_code``, ``timed_out``, ``stderr_tail`` and ``missing``."""
    limits = limits or Limits()
    worker = start_worker(argv, files=files, env=env, limits=limits,
                          with_submission=with_submission, name=name)
    timed_out = False
    stdout = b""
    try:
        if input is not None:
            try:
                worker.write(input)
            except WorkerExited:
                pass
        worker.stdin.close()
        try:
            stdout = worker.read_all(limits.wall_s + 5, max_bytes=64 << 20)
            code: int | None = worker.wait(max(1.0, limits.wall_s))
        except WorkerTimeout:
            timed_out, code = True, worker.poll()
        except WorkerProtocolError:
            code = worker.poll()
        if worker.killed_for() == "wall_time":
            timed_out = True
        result = WorkerResult(code, timed_out, stdout, "")
        for out in outputs:
            try:
                result.files[out] = worker.fetch(out, max_bytes=max_output_bytes)
            except WorkerError as exc:
                result.missing[out] = str(exc)
        worker._drain.join(timeout=1.0)
        result.stderr_tail = worker.stderr_tail()
        return result
    finally:
        worker.close()


# -- calling functions -----------------------------------------------------------------


_BOOT = r'''
import json, os, sys, traceback
_out = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr
_in = sys.stdin

def _say(obj):
    _out.write(json.dumps(obj, default=_plain) + "\n")
    _out.flush()

def _plain(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not a JSON value")

def _tail(exc):
    return "".join(traceback.format_exception(exc)[-8:]).strip()

_setup = json.loads(sys.argv[1])
sys.path.insert(0, os.getcwd())
try:
    if _setup["before"]:
        exec(compile(_setup["before"], "<grader setup>", "exec"), {})
    _module = __import__(_setup["module"], fromlist=["*"])
except BaseException as exc:
    _say({"import_error": _tail(exc)})
    sys.exit(0)
_say({"ready": True})
for _line in _in:
    _req = json.loads(_line)
    if _req is None:
        break
    try:
        _fn = getattr(_module, _req["f"])
    except AttributeError:
        _say({"error": f"{_setup['module']}.py has no function {_req['f']}", "index": 0})
        continue
    _results = []
    try:
        for _i, _args in enumerate(_req["calls"]):
            _results.append(_fn(*_args))
    except BaseException as exc:
        _say({"error": _tail(exc), "index": _i})
        continue
    try:
        _say({"results": _results})
    except (TypeError, ValueError) as exc:
        _say({"error": f"{_req['f']} returned a value that is not JSON: {exc}", "index": -1})
'''


class FunctionWorker:
    """A module of the submission, imported in a confined worker, whose functions the
    grader calls with JSON arguments and gets JSON results (numpy values become lists).

    ``setup`` is trusted Python run in the worker before the import (seeding, say);
    ``calls_timeout_s`` bounds one round trip (:meth:`call` or :meth:`map`).
    """

    def __init__(self, module: str, *, setup: str = "", limits: Limits | None = None,
                 files: Mapping[str, FileSource] | None = None, env: Mapping[str, str] | None = None,
                 import_timeout_s: float = 120.0, calls_timeout_s: float = 600.0) -> None:
        self.module = module
        self.calls_timeout_s = calls_timeout_s
        boot = json.dumps({"module": module, "before": setup})
        self.worker = start_worker(["python", "-c", _BOOT, boot], files=files, env=env,
                                   limits=limits, name=f"{module}.py")
        try:
            reply = self._reply(import_timeout_s)
            if "import_error" in reply:
                raise AgentCodeError(f"cannot import {module}.py: {reply['import_error']}")
            if not reply.get("ready"):
                raise WorkerProtocolError(f"{module}.py: unexpected first message")
        except BaseException:
            self.close()
            raise

    def _reply(self, timeout: float) -> dict[str, Any]:
        line = self.worker.read_line(timeout)
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self.worker.kill()
            raise WorkerProtocolError(f"{self.module}.py: the worker sent an unreadable answer")
        return reply

    def map(self, function: str, calls: Sequence[Sequence[Any]], *,
            timeout: float | None = None) -> list[Any]:
        """Call ``function(*args)`` for every ``args`` of ``calls``, in order, in one
        round trip; the list of results.  The first exception raised stops the batch
        (:class:`AgentCodeError`)."""
        self.worker.write_line(json.dumps({"f": function, "calls": [list(a) for a in calls]}))
        reply = self._reply(timeout or self.calls_timeout_s)
        if "error" in reply:
            raise AgentCodeError(f"{function} raised an exception: {reply['error']}")
        results = reply.get("results")
        if not isinstance(results, list) or len(results) != len(calls):
            raise WorkerProtocolError(f"{self.module}.py: the worker answered with "
                                      "a wrong number of results")
        return results

    def call(self, function: str, *args: Any, timeout: float | None = None) -> Any:
        """``function(*args)`` in the worker, one round trip."""
        return self.map(function, [args], timeout=timeout)[0]

    def close(self) -> None:
        try:
            self.worker.write_line("null")
        except WorkerError:
            pass
        self.worker.close()

    def __enter__(self) -> FunctionWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
