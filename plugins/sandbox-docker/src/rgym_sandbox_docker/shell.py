"""The persistent shell of an episode: one ``bash`` in the container, driven
through one attached exec session.

Protocol.  Each command travels as one line::

    __rgym_pre TIMEOUT ID; eval $'COMMAND' </dev/null; __rgym_post $? ID

``eval`` runs in the shell itself, so ``cd`` and variables persist.
``__rgym_post`` prints a done-marker line ``MARK EXIT TIMEDOUT CWD`` whose
``MARK`` is a random token of the session.

Timeouts.  ``__rgym_pre`` arms a watchdog that lives in the container for the
whole session (a background subshell of the shell, blocked in the ``read -t``
builtin on a private FIFO: arming and disarming cost two ``printf`` builtins, no
process).  When it fires it runs :data:`KILLER`, which freezes then kills every
process the command started (its whole tree, daemons included: every process of
the shell's user younger than the command, except the shell) and, if the shell
itself is still busy (a loop of builtins), the shell too.  The host waits
:data:`BACKSTOP_GRACE_S` longer as a backstop and then kills from a second exec.
A shell that died (timeout kill, ``exit``) is restarted in its last directory.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from typing import Any

from rgym_core.sandbox import DEFAULT_OUTPUT_LIMIT, TIMEOUT_EXIT_CODE, ExecResult, truncate_output
from rgym_sandbox_docker.execstream import ExecStream, StreamClosed, run_collect

#: Seconds the host waits past a command's timeout before killing it itself.
BACKSTOP_GRACE_S = 5.0
#: Seconds the in-container watchdog waits for the shell to come back after
#: killing the command's processes, before killing the shell itself.
SHELL_GRACE_S = 2.0
#: Bytes of the start and of the end of a command's output kept in memory.
KEEP_BYTES = 1 << 20

#: Kills the processes a command started.  Run by the watchdog, or by the host
#: from a second exec, always as the shell's user (root lacks CAP_SYS_PTRACE to
#: read the shell's cwd).  argv: shell pid, command start (epoch s), done file, command id,
#: grace seconds (negative: never kill the shell), timeout flag file.
KILLER = r"""
import os, signal, sys, time
shell, t0, done, cid, grace, flag = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]), sys.argv[6]
def touch(path):
    if path != "/dev/null":
        try:
            open(path, "w").close()
        except OSError:
            pass
touch(flag)
skip = {os.getpid(), os.getppid(), shell, 1}
owner = os.getuid()  # runs as the shell's user: only that user's processes are touched
hz = os.sysconf("SC_CLK_TCK")
def young():
    up = float(open("/proc/uptime").read().split()[0])
    window = time.time() - t0 + 0.05
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in skip:
            continue
        try:
            if os.stat("/proc/" + d).st_uid != owner:
                continue
            stat = open("/proc/%s/stat" % d).read()
        except OSError:
            continue
        started = int(stat[stat.rindex(")") + 2:].split()[19]) / hz
        if up - started <= window:
            found.append(int(d))
    return found
def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
# freeze first (a stopped process cannot fork: fork bombs die too), then kill
stopped = set()
for _ in range(200):
    new = [p for p in young() if p not in stopped]
    if not new:
        break
    signal_all(new, signal.SIGSTOP)
    stopped.update(new)
signal_all(stopped, signal.SIGKILL)
for _ in range(20):
    rest = young()
    if not rest:
        break
    signal_all(rest, signal.SIGKILL)
touch(flag + ".swept" if flag != "/dev/null" else flag)  # the shell waits for this
if grace < 0:
    sys.exit(0)
end = time.time() + grace
while time.time() < end:
    try:
        if int(open(done).read().strip() or 0) >= int(cid):
            sys.exit(0)
    except (OSError, ValueError):
        pass
    time.sleep(0.05)
try:  # the restarted shell starts where this one was
    where = os.readlink("/proc/%d/cwd" % shell)
    with open(os.path.join(os.path.dirname(done), "lastcwd"), "w") as fh:
        fh.write(where + "\n")
except OSError:
    pass
try:
    os.kill(shell, signal.SIGKILL)
except OSError:
    pass
"""


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


def _init_script(mark: str, state_dir: str, workdir: str, previous: str | None = None) -> str:
    # fd 60: the watchdog's orders (arm ID MICROSECONDS T0 / disarm ID); fd 61: a FIFO
    # nobody writes, for sleeping with the `read -t` builtin.
    return f"""exec 2>&1
set +o history
__rgym_dir={state_dir}
mkdir -p "$__rgym_dir" && mkfifo "$__rgym_dir/orders" "$__rgym_dir/idle" \
  && exec 60<>"$__rgym_dir/orders" 61<>"$__rgym_dir/idle"
__rgym_mark={mark}
__rgym_killer={ansi_c_quote(KILLER)}
__rgym_watch() {{
  local cmd id arg t0 armed= deadline=0 left secs d
  while :; do
    if [[ -n $armed ]]; then
      left=$(( deadline - ${{EPOCHREALTIME/[.,]/}} ))
      if (( left <= 0 )); then
        : > "$__rgym_dir/timeout.$armed"
        d=0; read -r d < "$__rgym_dir/done" 2>/dev/null
        if (( d >= armed )); then
          : > "$__rgym_dir/timeout.$armed.swept"
        else
          python3 -c "$__rgym_killer" $$ "$t0" "$__rgym_dir/done" "$armed" {SHELL_GRACE_S} \
            "$__rgym_dir/timeout.$armed"
        fi
        armed=
        continue
      fi
      printf -v secs '%d.%06d' $(( left / 1000000 )) $(( left % 1000000 ))
      read -r -t "$secs" -u 60 cmd id arg t0b || continue
    else
      if ! read -r -t 2 -u 60 cmd id arg t0b; then
        kill -0 $$ 2>/dev/null || exit 0  # the shell is gone: so is its watchdog
        continue
      fi
    fi
    case $cmd in
      arm) armed=$id; t0=$t0b; deadline=$(( ${{EPOCHREALTIME/[.,]/}} + arg )) ;;
      disarm) [[ $armed == "$id" ]] && armed= ;;
    esac
  done
}}
__rgym_watch </dev/null >/dev/null 2>&1 &
disown $! 2>/dev/null
__rgym_pre() {{
  [[ $1 != 0 ]] && printf 'arm %s %s %s\n' "$2" "$1" "${{EPOCHREALTIME/,/.}}" >&60
}}
__rgym_post() {{
  local ec=$1 to=0 i
  printf 'disarm %s\n' "$2" >&60
  printf '%s\n' "$2" > "$__rgym_dir/done"
  if [[ -e $__rgym_dir/timeout.$2 ]]; then
    to=1
    for (( i = 0; i < 500; i++ )); do
      [[ -e $__rgym_dir/timeout.$2.swept ]] && break
      read -t 0.01 -u 61 2>/dev/null
    done
  fi
  printf '\n%s %s %s %s\n' "$__rgym_mark" "$ec" "$to" "$PWD"
}}
printf '0\n' > "$__rgym_dir/done"
cd {ansi_c_quote(workdir)} 2>/dev/null
{_resume(previous)}
printf '\n%s %s %s %s\n' "$__rgym_mark" "$$" 0 "$PWD"
"""


def _resume(previous: str | None) -> str:
    """Shell lines that move to where a killed previous shell was, if it was recorded."""
    if not previous:
        return ""
    where = ansi_c_quote(f"{previous}/lastcwd")
    return f'[[ -r {where} ]] && read -r __rgym_c < {where} && cd "$__rgym_c" 2>/dev/null'


class _Capture:
    """Keeps the start and the end of a command's output, and finds the marker."""

    def __init__(self, mark: bytes) -> None:
        self.mark = b"\n" + mark + b" "
        self.head = b""
        self.buf = bytearray()
        self.dropped = 0
        self._scan = 0

    def add(self, data: bytes) -> None:
        self.buf += data
        if not self.head and len(self.buf) > 3 * KEEP_BYTES:
            self.head = bytes(self.buf[:KEEP_BYTES])
            del self.buf[:KEEP_BYTES]
            self._scan = 0
        if self.head and len(self.buf) > 2 * KEEP_BYTES:
            cut = len(self.buf) - KEEP_BYTES
            self.dropped += cut
            del self.buf[:cut]
            self._scan = 0

    def find(self) -> tuple[bytes, list[str]] | None:
        """``(output before the marker, marker fields)`` once the marker line is complete."""
        idx = self.buf.find(self.mark, self._scan)
        if idx < 0:
            self._scan = max(0, len(self.buf) - len(self.mark))
            return None
        self._scan = idx
        end = self.buf.find(b"\n", idx + len(self.mark))
        if end < 0:
            return None
        fields = self.buf[idx + len(self.mark):end].decode("utf-8", "replace").split(" ", 2)
        return bytes(self.buf[:idx]), fields

    def text(self, before: bytes | None = None, limit: int = DEFAULT_OUTPUT_LIMIT) -> tuple[str, bool]:
        """The output (capped at ``limit`` characters) and whether it was cut."""
        tail = bytes(self.buf) if before is None else before
        if not self.dropped:
            return truncate_output((self.head + tail).decode("utf-8", "replace"), limit)
        h_txt, t_txt = self.head.decode("utf-8", "replace"), tail.decode("utf-8", "replace")
        total = len(h_txt) + len(t_txt) + self.dropped
        h = limit * 2 // 3
        t = limit - h
        cut = total - h - t
        # the same marker as rgym_core.sandbox.truncate_output
        marker = (f"\n[... {cut} characters truncated; redirect output to a file and read it "
                  f"in parts ...]\n")
        return h_txt[:h] + marker + (t_txt[-t:] if t else ""), True


class ShellSession:
    """A persistent bash in a container, as ``user``, starting in ``workdir``."""

    def __init__(self, api: Any, container_id: str, *, user: str, workdir: str,
                 environment: Mapping[str, str] | None = None) -> None:
        self.api = api
        self.container_id = container_id
        self.user = user
        self.cwd = workdir
        self.environment = dict(environment or {})
        self.stream: ExecStream | None = None
        self.pid: int | None = None
        self.restarts = 0
        self._counter = 0

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start (or restart) the bash process and wait until it answers."""
        self.close()
        previous = getattr(self, "state_dir", None)
        token = secrets.token_hex(8)
        self.mark = f"__RGYM_DONE_{token}__"
        self.state_dir = f"/tmp/.rgym-shell-{token}"
        # no exec workdir: the script's own `cd` survives a deleted last directory
        self.stream = ExecStream(self.api, self.container_id, ["bash", "--noprofile", "--norc"],
                                 user=self.user, environment=self.environment)
        self.stream.write(_init_script(self.mark, self.state_dir, self.cwd, previous).encode())
        capture = _Capture(self.mark.encode())
        deadline = time.monotonic() + 30
        while True:
            frames = self.stream.read_frames(deadline)
            if not frames:
                raise TimeoutError("the container's shell did not start within 30 s")
            for _, payload in frames:
                capture.add(payload)
            found = capture.find()
            if found:
                _, fields = found
                self.pid = int(fields[0])
                self.cwd = fields[2] if len(fields) > 2 else self.cwd
                return

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
            self.stream = None

    @property
    def alive(self) -> bool:
        return self.stream is not None and not self.stream.closed

    # -- commands ----------------------------------------------------------------

    def run(self, command: str, *, timeout: float | None = None,
            output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        """Run ``command`` in the shell; see the module docstring for the protocol."""
        if not self.alive:
            self.start()
        assert self.stream is not None
        self._counter += 1
        cid = str(self._counter)
        t_arg = "0" if timeout is None else str(max(int(timeout * 1e6), 1000))
        line = f"__rgym_pre {t_arg} {cid}; eval {ansi_c_quote(command)} </dev/null; __rgym_post $? {cid}\n"
        started = time.monotonic()
        t0 = time.time()
        capture = _Capture(self.mark.encode())
        deadline = None if timeout is None else started + timeout + BACKSTOP_GRACE_S
        try:
            self.stream.write(line.encode())
            while True:
                frames = self.stream.read_frames(deadline)
                if not frames:  # the backstop: the in-container watchdog did not act
                    self._kill_from_host(t0, cid)
                    self.close()
                    self.restarts += 1
                    text, truncated = capture.text(None, output_limit)
                    return ExecResult(TIMEOUT_EXIT_CODE, text, timed_out=True,
                                      truncated=truncated,
                                      duration_s=time.monotonic() - started)
                for _, payload in frames:
                    capture.add(payload)
                found = capture.find()
                if found:
                    break
        except StreamClosed:
            # the shell died: `exit`, or the watchdog killed a shell stuck in builtins
            code = self.stream.exit_code() if self.stream else None
            self.close()
            self.restarts += 1
            elapsed = time.monotonic() - started
            timed_out = timeout is not None and elapsed >= timeout
            text, truncated = capture.text(None, output_limit)
            if timed_out:
                code = TIMEOUT_EXIT_CODE
            return ExecResult(code if code is not None else 1, text, timed_out=timed_out,
                              truncated=truncated, duration_s=elapsed)
        before, fields = found
        text, truncated = capture.text(before, output_limit)
        exit_code = int(fields[0])
        timed_out = len(fields) > 1 and fields[1] == "1"
        if len(fields) > 2:
            self.cwd = fields[2]
        return ExecResult(TIMEOUT_EXIT_CODE if timed_out else exit_code, text, timed_out=timed_out,
                          truncated=truncated, duration_s=time.monotonic() - started)

    def _kill_from_host(self, t0: float, cid: str) -> None:
        if self.pid is None:
            return
        run_collect(self.api, self.container_id,
                    ["python3", "-c", KILLER, str(self.pid), str(t0 - 0.5),
                     f"{self.state_dir}/done", cid, "0",
                     f"{self.state_dir}/timeout.{cid}"],
                    user=self.user, timeout=30)
