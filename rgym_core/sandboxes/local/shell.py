"""The persistent shell of a local episode and its unspoofable protocol.

One bash per episode reads commands from a pipe only the runner writes (its
stdin; every command runs with stdin ``/dev/null``, and forked subshells never
inherit the pipe).  Each command travels as one input line::

    RGYM_COMMAND_ID=<id>; \\eval -- '<command>' </dev/null; { :; } 2>&- >"<status>/<nonce>.$?"

* ``<nonce>`` is 128 fresh random bits per command, present only on that line:
  bash reads the whole line before running any of it, so the nonce is never
  in the pipe while agent code runs; history is off for good (``readonly
  HISTSIZE=0``), and the shell is an execute-only copy of bash, hence not
  dumpable: its own child processes cannot read its memory, file descriptors
  or environment through ``/proc``.
* The completion report is a file created by redirection syntax alone (no
  function, alias or builtin is involved, and the DEBUG trap only ever sees
  ``:``) in a status folder the agent can write but not list.  The runner
  watches that folder with inotify in the same poll loop as the output pipe.
  Nothing the command prints can end it; any other file that appears there (a
  guess, a second report for a nonce) is reported as tampering.
* The exit status is bash's ``$?`` for the command; the working folder is read
  from ``/proc/<shell>/cwd``; the timeout is measured on the host's clock and
  enforced by killing the command's processes from outside.

What this cannot prevent: commands the agent sends to its own shell can change
how that shell runs later commands (functions, aliases, traps, ``read`` from
its input), as in any shell; they are all in the trajectory.  Processes the
agent's commands start (programs, scripts, packages) cannot forge a report.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import select
import signal
import subprocess
import time

from rgym_core.sandbox import TIMEOUT_EXIT_CODE, ExecResult, SandboxError
from rgym_core.sandboxes.local import procs
from rgym_core.sandboxes.local.confinement import MODE_NONE, Confinement
from rgym_core.sandboxes.output import OutputCollector

log = logging.getLogger("rgym_core.sandboxes.local")

#: Set per command, so a timeout kills only that command's processes.
COMMAND_ID_VAR = "RGYM_COMMAND_ID"
_READ_SIZE = 1 << 16
#: How long a timed-out command's shell gets to report after its processes are killed.
SHELL_GRACE_S = 2.0
#: How long ``run`` polls its pipes before it sleeps, when a CPU is idle (on a busy
#: machine spinning takes the CPU the shell needs: then it sleeps at once).
SPIN_S = 0.0002
_SPIN_CHECK_EVERY = 128
_REPORT = re.compile(r"^([0-9a-f]{32})\.([0-9]{1,3})$")


def quote(command: str) -> str:
    """``command`` as one single-quoted shell word (NUL bytes removed)."""
    return "'" + command.replace("\0", "").replace("'", "'\\''") + "'"


class ShellSession:
    """The persistent bash of one episode (see the module docstring)."""

    def __init__(self, confinement: Confinement, env: dict[str, str], workspace: str,
                 sandbox_id: str) -> None:
        self.conf = confinement
        self.env = env
        self.workspace = workspace
        self.cwd = workspace
        self.sandbox_id = sandbox_id
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self.command_fd: int | None = None
        self.out_fd: int | None = None
        self.counter = 0
        #: Sessions of every shell started (cleanup without namespaces uses them).
        self.sessions: set[int] = set()
        assert confinement.host_status is not None
        self.host_status = str(confinement.host_status)
        assert confinement.status_watch is not None
        self.watch = confinement.status_watch
        self._poll: select.poll | None = None
        self._finished: dict[str, int] = {}
        self._tamper: list[str] = []
        self._spin = 0.0
        self._cpus = len(os.sched_getaffinity(0))

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        read_fd, write_fd = os.pipe()
        try:
            proc = self.conf.popen([self.conf.shell_binary, "--noprofile", "--norc"],
                                   env=self.env, stdin=read_fd, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, bufsize=0, start_new_session=True)
        except OSError as exc:
            os.close(write_fd)
            raise SandboxError(f"rgym/local: cannot start the shell: {exc}",
                               reason="shell") from exc
        finally:
            os.close(read_fd)
        self.proc = proc
        self.command_fd = write_fd
        self.sessions.add(proc.pid)
        assert proc.stdout is not None
        self.out_fd = proc.stdout.fileno()
        os.set_blocking(self.out_fd, False)
        self._poll = select.poll()
        self._poll.register(self.out_fd, select.POLLIN)
        assert self.watch.fd is not None
        self._poll.register(self.watch.fd, select.POLLIN)
        try:
            self.pid = self.conf.target_pid(proc)
        except SandboxError:
            self._close_shell()
            raise
        self._write(f"readonly HISTSIZE=0 HISTFILESIZE=0 HISTFILE=/dev/null; "
                    f"export {COMMAND_ID_VAR}=0; cd -- {quote(self.cwd)} 2>/dev/null || "
                    f"cd -- {quote(self.workspace)}\n".encode())

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _write(self, data: bytes) -> None:
        fd = self.command_fd
        if fd is None:
            raise BrokenPipeError(errno.EPIPE, "the shell is closed")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    def _close_shell(self) -> None:
        if self.pid is not None:
            procs.kill(self.pid)
        proc = self.proc
        if proc is not None:
            if proc.poll() is None:
                procs.kill(proc.pid)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            if proc.stdout is not None:
                proc.stdout.close()
        if self.command_fd is not None:
            os.close(self.command_fd)
        self.proc = None
        self.pid = None
        self.command_fd = None
        self.out_fd = None
        self._poll = None

    def close(self) -> None:
        self._close_shell()

    def restart(self, why: str) -> str:
        self._close_shell()
        self.start()
        return (f"[{why}; started a new shell session in {self.cwd}; exported variables and "
                "shell settings were reset]\n")

    # -- one command ------------------------------------------------------------------

    def run(self, command: str, *, timeout: float | None, output_limit: int) -> ExecResult:
        began = time.monotonic()
        began_ticks = procs.boot_ticks()
        note = ""
        if not self.alive():
            note = self.restart("the previous shell session ended")
        self.counter += 1
        if self.counter % _SPIN_CHECK_EVERY == 1:
            self._spin = SPIN_S if os.getloadavg()[0] < 0.75 * self._cpus else 0.0
        command_id = f"{self.sandbox_id}.{self.counter}"
        nonce = secrets.token_hex(16)
        line = (f"{COMMAND_ID_VAR}={command_id}; \\eval -- {quote(command)} </dev/null; "
                f"{{ :; }} 2>&- >\"{self.conf.status_dir}/{nonce}.$?\"\n").encode()
        try:
            self._write(line)
        except (BrokenPipeError, OSError):
            note += self.restart("the previous shell session ended")
            self._write(line)
        collector = OutputCollector(output_limit)
        deadline = None if timeout is None else began + timeout
        state, status = self._wait(collector, nonce, deadline)
        timed_out = state == "timeout"
        suffix = ""
        if timed_out:
            killed = self._kill_command(command_id, began_ticks)
            # With nothing to kill, the shell itself is busy (a builtin loop, `wait`).
            grace = SHELL_GRACE_S if killed else 0.25
            state, status = self._wait(collector, nonce, time.monotonic() + grace)
            if state == "timeout":
                suffix = self._restart_stuck()
        if state == "eof":
            suffix = self._shell_ended()
        if timed_out:
            exit_code = TIMEOUT_EXIT_CODE
        elif state == "done" and status is not None:
            exit_code = status
        else:
            shell = self.proc
            exit_code = procs.exit_code(shell.returncode) \
                if shell is not None and shell.returncode is not None else 1
        if state == "done":
            self._update_cwd()
        output, truncated = collector.text()
        if timed_out and state == "done":
            # The shell reports killed jobs before its next command: one more round
            # trip keeps such lines out of the next command's output.
            output += self._sync()[-4000:]
        if self._tamper:
            suffix += "\n" + "\n".join(f"[rgym: {t}]" for t in self._tamper)
            for line_ in self._tamper:
                log.warning("rgym/local: %s", line_)
            self._tamper.clear()
        return ExecResult(exit_code=exit_code, output=note + output + suffix,
                          timed_out=timed_out, truncated=truncated,
                          duration_s=time.monotonic() - began)

    def _update_cwd(self) -> None:
        if self.pid is not None:
            where = procs.cwd_of(self.pid)
            if where:
                self.cwd = where

    def _wait(self, collector: OutputCollector, nonce: str,
              deadline: float | None) -> tuple[str, int | None]:
        """Collect output until the report for ``nonce`` ("done", status), the end
        of the output ("eof") or the deadline ("timeout")."""
        fd, poll = self.out_fd, self._poll
        assert fd is not None and poll is not None
        spin_until = time.perf_counter() + self._spin
        while True:
            try:
                chunk = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                chunk = None
            if chunk == b"":
                status = self._reports(nonce)
                return ("done", status) if status is not None else ("eof", None)
            if chunk:
                collector.feed(chunk)
            status = self._reports(nonce)
            if status is not None:
                self._drain(collector)
                return "done", status
            if chunk:
                continue
            if time.perf_counter() < spin_until:
                continue
            if deadline is None:
                wait = -1
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout", None
                wait = int(left * 1000) + 1
            poll.poll(wait)

    def _drain(self, collector: OutputCollector) -> None:
        """Take what the pipe holds now (the command's last output)."""
        assert self.out_fd is not None
        for _ in range(64):
            try:
                chunk = os.read(self.out_fd, _READ_SIZE)
            except BlockingIOError:
                return
            if not chunk:
                return
            collector.feed(chunk)

    def _reports(self, nonce: str) -> int | None:
        """Read the status folder's new names; the status reported for ``nonce``
        if it arrived (first report wins), noting anything else as tampering."""
        names, overflow = self.watch.read()
        if overflow:
            try:
                names += os.listdir(self.host_status)
            except OSError:
                pass
        status = self._finished.get(nonce)
        for name in names:
            try:
                os.unlink(os.path.join(self.host_status, name))
            except OSError:
                if overflow:
                    continue  # listed twice
            match = _REPORT.match(name)
            if match is None:
                self._tamper.append(f"an unexpected file appeared in the shell's status folder "
                                    f"({name[:80]!r}); the shell's reports may be tampered with")
                continue
            seen, value = match.group(1), int(match.group(2))
            if seen == nonce and status is None:
                status = value
                self._finished[nonce] = value
            elif seen in self._finished or seen == nonce:
                self._tamper.append("a second completion report arrived for one command; the "
                                    "first one was kept")
            else:
                self._tamper.append("a completion report arrived for a command that was never "
                                    "sent; it was ignored")
        if len(self._finished) > 256:
            for key in list(self._finished)[:128]:
                del self._finished[key]
        return status

    def _kill_command(self, command_id: str, began_ticks: int) -> int:
        """Kill the processes of one command: those started with its id in their
        environment, and the episode's processes started since it began that carry
        no command id (they cleared their environment).  Background jobs of
        earlier commands live on."""
        needle = procs.needle(COMMAND_ID_VAR, command_id)
        any_command = f"\0{COMMAND_ID_VAR}=".encode()
        skip = {p for p in (self.pid, self.proc.pid if self.proc else None) if p is not None}
        ours = self._ours

        def match(pid: int) -> bool:
            if pid in skip or not ours(pid):
                return False
            if procs.environ_has(pid, needle):
                return True
            started = procs.started_at(pid)
            return (started is not None and started >= began_ticks
                    and not procs.environ_has(pid, any_command))

        return procs.kill_matching(match)

    def _ours(self, pid: int) -> bool:
        if self.conf.mode == MODE_NONE:
            return self.conf.in_sandbox(pid) or procs.session_of(pid) in self.sessions
        return self.conf.in_sandbox(pid)

    def _sync(self) -> str:
        """Run an empty command; return what the shell printed before its report."""
        nonce = secrets.token_hex(16)
        collector = OutputCollector(0)
        try:
            # `jobs -n` reaps the killed jobs and takes their "Killed" notices.
            self._write(f"jobs -n >/dev/null 2>&1; {{ :; }} 2>&- "
                        f">\"{self.conf.status_dir}/{nonce}.$?\"\n".encode())
        except OSError:
            return ""
        self._wait(collector, nonce, time.monotonic() + SHELL_GRACE_S)
        return collector.text()[0]

    def _restart_stuck(self) -> str:
        self._close_shell()
        self.start()
        return (f"\n[the shell itself did not stop, so it was restarted in {self.cwd}; "
                "exported variables and shell settings were reset]")

    def _shell_ended(self) -> str:
        shell = self.proc
        assert shell is not None
        try:
            status = shell.wait(timeout=1)
        except subprocess.TimeoutExpired:  # it closed its output but lives on
            self._close_shell()
            status = -signal.SIGKILL
        return (f"\n[the shell session ended (exit status {procs.exit_code(status)}); the next "
                f"command starts a new session in {self.cwd}]")
