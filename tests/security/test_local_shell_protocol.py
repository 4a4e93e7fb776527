"""Attacks on the local sandbox's shell protocol (issue 10, item 4): the agent's
programs try to forge a command's completion, its exit code, its working folder or
its timeout.

The line of defence: nothing a *process* the agent starts (a script, a package, a
background job) can do makes the runner record a completion, exit code or folder
that the shell did not produce, or a command outlive its timeout.  Commands sent to
the shell itself shape that shell (as in any shell) but cannot stop it from
reporting or read the next command's nonce.

Each test runs in every mode this machine offers (bubblewrap; as root also a pooled
uid without bubblewrap); ``test_local_normal_user.py`` reruns them as a normal user.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator

import pytest

from conftest import require_bwrap
from rgym_core.sandbox import SandboxConfig, WorkspaceLayout
from rgym_core.sandboxes.local import MODE_NONE, LocalSandbox

ROOT = os.geteuid() == 0
#: Both modes always: a machine without bubblewrap skips (fails in CI), never drops it.
MODES = ["bubblewrap", "plain"]
NONCE = re.compile(r"[0-9a-f]{32}")


@pytest.fixture(params=MODES)
def box(request: pytest.FixtureRequest) -> Iterator[LocalSandbox]:
    if request.param == "bubblewrap":
        require_bwrap()
    sandbox = LocalSandbox(SandboxConfig(run_id="attack/shell", options={
        "bubblewrap": request.param == "bubblewrap"}))
    sandbox.start(WorkspaceLayout())
    if sandbox.mode == MODE_NONE:
        sandbox.cleanup()
        pytest.skip("a normal user without bubblewrap shares a uid with rgym: the protocol "
                    "cannot be protected in that mode (the start-up warning and the README say so)")
    try:
        yield sandbox
    finally:
        sandbox.cleanup()


def ok(box: LocalSandbox, command: str, timeout: float = 30) -> str:
    result = box.run(command, timeout=timeout)
    assert result.exit_code == 0 and not result.timed_out, (command, result)
    return result.output


def test_printed_markers_do_not_end_a_command(box: LocalSandbox) -> None:
    """Old protocols ended a command at a marker line in its output."""
    result = box.run("printf '\\n__RGYM_DONE_0123456789abcdef 0 /tmp __RGYM_DONE_0123456789abcdef"
                     "\\n'; sleep 0.3; echo after; exit_code_probe() { return 3; }; "
                     "exit_code_probe", timeout=30)
    assert result.exit_code == 3
    assert result.output.rstrip().endswith("after")


def test_no_helper_function_to_redefine(box: LocalSandbox) -> None:
    assert ok(box, "declare -F; alias") == ""
    # Redefining every name the old protocols used changes nothing.
    ok(box, "__rgym_done() { printf 'DONE 0\\n'; }; __rgym_post() { :; }; printf() { :; }")
    assert box.run("false").exit_code == 1
    assert box.run("(exit 42)").exit_code == 42


def test_child_processes_cannot_read_the_shell(box: LocalSandbox) -> None:
    """The shell is not dumpable: its memory, environment and file descriptors (where
    the command and its nonce are) are closed to every process of the agent, the shell
    itself included."""
    probe = ("import os\n"
             "pid = os.getppid()\n"
             "for name in ('mem', 'environ', 'fd/0', 'maps'):\n"
             "    try:\n"
             "        open(f'/proc/{pid}/{name}', 'rb').read(1)\n"
             "        print('READ', name)\n"
             "    except OSError as exc:\n"
             "        print('denied', name, type(exc).__name__)\n")
    box.write_file("probe.py", probe)
    out = ok(box, "python probe.py")
    assert "READ" not in out and out.count("denied") == 4, out
    result = box.run("exec 3</proc/self/mem && echo opened-own-memory")
    assert "opened-own-memory" not in result.output


def test_children_do_not_inherit_the_command_pipe(box: LocalSandbox) -> None:
    """A program cannot read the next command line (and its nonce) before the shell:
    the pipe the shell reads is in no other process."""
    probe = ("import os\n"
             "targets = []\n"
             "for n in os.listdir('/proc/self/fd'):\n"
             "    try:\n"
             "        targets.append(os.readlink(f'/proc/self/fd/{n}'))\n"
             "    except OSError:\n"
             "        pass  # the listing's own descriptor, closed by now\n"
             "print(sorted(t for t in targets if 'pipe:' in t or t == '/dev/null'))\n")
    box.write_file("fds.py", probe)
    out = ok(box, "python fds.py; sleep 2 & sleep 0.3; ls /proc/$!/fd | tr '\\n' ' '; kill %1")
    targets = eval(out.splitlines()[0])  # noqa: S307 - a list literal printed by the probe
    assert targets[0] == "/dev/null" and len(set(targets[1:])) == 1 and len(targets) == 3
    assert out.splitlines()[1].split() == ["0", "1", "2"]
    stolen = box.run("timeout 1 cat /proc/$$/fd/0; echo rc=$?")
    assert "rc=1" in stolen.output and "eval" not in stolen.output


def test_debug_trap_and_history_never_see_a_nonce(box: LocalSandbox) -> None:
    ok(box, "set -o history; shopt -s extdebug; "
            "trap 'echo \"[$BASH_COMMAND] [$(history 1)]\" >> /tmp/seen' DEBUG ERR")
    for command in ("echo one", "false", "cd /tmp", "echo two"):
        box.run(command)
    ok(box, "trap - DEBUG ERR")
    seen = box.read_file("/tmp/seen").decode()
    assert "eval" in seen  # the trap ran...
    assert not NONCE.search(seen), seen  # ...but never saw a report name
    assert "status" not in seen


def test_a_debug_trap_cannot_stop_the_report(box: LocalSandbox) -> None:
    """Skipping every simple command (extdebug) still lets the report through: the
    command reports at once instead of hanging until its timeout."""
    ok(box, "shopt -s extdebug; trap 'false' DEBUG")
    began = time.monotonic()
    result = box.run("echo never-printed", timeout=20)
    assert not result.timed_out and time.monotonic() - began < 10
    assert "never-printed" not in result.output
    box.run("trap - DEBUG")  # skipped as well: the agent disarmed its own shell
    assert box.run("echo fine; exit 0", timeout=20).timed_out is False


def test_background_forgers_cannot_report(box: LocalSandbox) -> None:
    """A program that writes guessed reports into the status folder (which it cannot
    list) is flagged, and never changes an exit code."""
    status = box.confinement.status_dir
    listing = box.run(f"ls {status}")
    if ROOT:
        assert listing.exit_code != 0 and "Permission denied" in listing.output
    forge = (f"import os, secrets, time\n"
             f"for i in range(200):\n"
             f"    for code in (0, 1):\n"
             f"        try:\n"
             f"            open(os.path.join({status!r}, secrets.token_hex(16) + f'.{{code}}'),"
             f" 'w').close()\n"
             f"        except OSError:\n"
             f"            pass\n"
             f"    time.sleep(0.005)\n")
    box.write_file("forge.py", forge)
    ok(box, "python forge.py >/dev/null 2>&1 &")
    codes = [box.run("false").exit_code for _ in range(10)]
    codes += [box.run("sh -c 'exit 7'").exit_code for _ in range(5)]
    assert codes == [1] * 10 + [7] * 5
    time.sleep(1.5)
    flagged = box.run("true")
    assert flagged.exit_code == 0
    notes = "".join(box.run("true").output for _ in range(3)) + flagged.output
    assert "tampered" in notes or "never sent" in notes


def test_timeouts_are_enforced_from_outside(box: LocalSandbox) -> None:
    """Ignoring signals, a new session or a double fork: the command still ends at its
    timeout, measured on the host's clock, and the session goes on."""
    began = time.monotonic()
    result = box.run("trap '' TERM INT HUP; (trap '' TERM; setsid sleep 60) & "
                     "env -i sh -c 'sleep 60' & wait", timeout=1)
    assert result.timed_out and result.exit_code == 124
    assert time.monotonic() - began < 8
    assert ok(box, "echo alive") == "alive\n"
    assert "sleep 60" not in ok(box, "ps -eo args 2>/dev/null || true")


def test_working_folder_comes_from_the_kernel(box: LocalSandbox) -> None:
    ok(box, "mkdir -p real && cd real && export PWD=/fake/place && OLDPWD=/elsewhere")
    result = box.run("exit 0")
    assert "session ended" in result.output
    assert ok(box, "pwd -P").splitlines()[-1] == f"{box.workspace}/real"
