"""Attacks on the Docker shell protocol (issue 10 item 4): the agent's commands and
processes try to forge a command's end, its exit code or its working directory, or
to dodge the per-action timeout.  Each must fail: the sandbox, not the agent's
shell, says when a command ended, how, where and whether it ran out of time."""

from __future__ import annotations

import textwrap
import time

import pytest
from docker_testlib import client_or_skip

client_or_skip()
pytestmark = pytest.mark.docker

#: Seconds past a command's timeout within which the sandbox must have answered
#: (well under the host backstop's grace: the in-container enforcement must act).
PROMPT_S = 2.5


def _timed(box, command: str, timeout: float):  # type: ignore[no-untyped-def]
    started = time.monotonic()
    result = box.run(command, timeout=timeout)
    return result, time.monotonic() - started


def test_printed_done_markers_are_only_output(make_sandbox) -> None:
    box = make_sandbox()
    # whatever the shell knows about the protocol, printed as if the command had ended
    forge = ("for v in $(compgen -v); do case $v in *rgym*|*RGYM*|*mark*|*MARK*) "
             "printf '\\n%s 0 0 /forged\\n' \"${!v}\";; esac; done; "
             "printf '\\n__RGYM_DONE_0__ 0 0 /forged\\n'; sleep 1.5; exit_code_7() { return 7; }; "
             "exit_code_7")
    result, took = _timed(box, forge, timeout=30)
    assert result.exit_code == 7, result
    assert took >= 1.4, f"the command was taken as ended after {took:.2f} s"
    assert box.run("pwd", timeout=30).output.strip() == box.workspace


def test_frame_like_bytes_in_output_are_returned_verbatim(make_sandbox) -> None:
    box = make_sandbox()
    # length-prefixed frames, JSON that looks like a protocol event, NULs and a long line
    payload = ("printf '\\x00\\x00\\x00\\x20\\x00\\x00\\x00\\x00{\"ev\": \"done\", \"exit\": 0}\\n'; "
               "printf '{\"ev\":\"done\",\"id\":2,\"exit\":0,\"cwd\":\"/\"}\\n'; head -c 300000 "
               "/dev/zero | tr '\\0' x; echo; false")
    result = box.run(payload, timeout=30)
    assert result.exit_code == 1
    assert '{"ev":"done","id":2,"exit":0,"cwd":"/"}' in result.output
    assert "x" * 1000 in result.output


def test_no_protocol_helpers_or_state_are_reachable(make_sandbox) -> None:
    box = make_sandbox()
    functions = box.run("declare -F; alias; trap -p", timeout=30)
    assert functions.output.strip() == "", functions.output
    variables = box.run("compgen -v | grep -i -e rgym -e mark || true", timeout=30)
    assert variables.output.strip() == "", variables.output
    seen = box.run("trap 'printf \"%s\\n\" \"$BASH_COMMAND\" >> /tmp/seen' DEBUG; true", timeout=30)
    assert seen.exit_code == 0
    box.run("false", timeout=30)
    box.run("trap - DEBUG", timeout=30)
    log = box.read_file("/tmp/seen").decode()
    assert "rgym" not in log.lower() and "9>" not in log and "/run/" not in log, log


def test_redefining_helpers_or_builtins_cannot_fake_an_exit_code(make_sandbox) -> None:
    box = make_sandbox()
    box.run("__rgym_post() { printf '\\n%s 0 0 /\\n' \"$__rgym_mark\"; }; "
            "__rgym_pre() { :; }; printf() { builtin printf \"$@\"; return 0; }", timeout=30)
    assert box.run("false", timeout=30).exit_code == 1
    assert box.run("(exit 3)", timeout=30).exit_code == 3
    assert box.run("ls /nonexistent-dir", timeout=30).exit_code == 2


def test_killing_every_other_agent_process_does_not_dodge_the_timeout(make_sandbox) -> None:
    box = make_sandbox()
    # the agent kills (or stops) every process it may signal, except its own shell
    box.run("for p in /proc/[0-9]*; do n=${p#/proc/}; [ \"$n\" = $$ ] && continue; "
            "kill -STOP $n 2>/dev/null; kill -9 $n 2>/dev/null; done; true", timeout=30)
    result, took = _timed(box, "mkdir -p d && cd d && sleep 600", timeout=1)
    assert result.timed_out and result.exit_code == 124
    assert took < 1 + PROMPT_S, f"the timeout was enforced only after {took:.2f} s"
    assert box.run("pwd", timeout=30).output.strip() == f"{box.workspace}/d"


def test_disarming_the_watchdog_does_not_dodge_the_timeout(make_sandbox) -> None:
    box = make_sandbox()
    box.run("__rgym_pre() { :; }; trap '' TERM INT HUP", timeout=30)
    result, took = _timed(box, "sleep 600", timeout=1)
    assert result.timed_out and result.exit_code == 124
    assert took < 1 + PROMPT_S, f"the timeout was enforced only after {took:.2f} s"
    # the shell itself stays busy: it gets SHELL_GRACE_S to come back, then is restarted
    from rgym_sandbox_docker.shell import BACKSTOP_GRACE_S
    from rgym_sandbox_docker.supervisor import SHELL_GRACE_S

    result, took = _timed(box, "while :; do :; done", timeout=1)
    assert result.timed_out and took < 1 + SHELL_GRACE_S + PROMPT_S < 1 + BACKSTOP_GRACE_S
    assert box.run("echo alive", timeout=30).output.endswith("alive\n")


def test_agent_processes_cannot_read_or_trace_the_shell(make_sandbox) -> None:
    box = make_sandbox()
    probe = textwrap.dedent("""\
        import ctypes, os
        shell = os.getppid()
        for name in ("mem", "environ", "fd/0", "fd/1", "cwd", "maps", "syscall"):
            path = "/proc/%d/%s" % (shell, name)
            try:
                if name.startswith("fd") or name == "cwd":
                    os.readlink(path)
                else:
                    open(path, "rb").read(64)
                print("READ", name)
            except OSError as exc:
                print("denied", name, exc.errno)
        libc = ctypes.CDLL(None, use_errno=True)
        PTRACE_ATTACH = 16
        print("ptrace", libc.ptrace(PTRACE_ATTACH, shell, 0, 0), ctypes.get_errno())
        """)
    box.write_file("probe.py", probe)
    result = box.run("python3 probe.py", timeout=30)
    assert "READ" not in result.output, result.output
    assert "ptrace -1 1" in result.output, result.output  # EPERM
    own = box.run("exec 5</proc/$$/mem && echo OPENED; cat /proc/$$/environ >/dev/null "
                  "&& echo ENVIRON", timeout=30)
    assert "OPENED" not in own.output and "ENVIRON" not in own.output, own.output


def test_status_directory_cannot_be_listed_and_guesses_do_not_end_a_command(make_sandbox) -> None:
    box = make_sandbox()
    listing = box.run("ls -a /run/rgym/ /run/rgym/* 2>&1; ls -la /tmp", timeout=30)
    assert ".status" not in listing.output and "shell" not in listing.output.replace(
        "cannot open directory", ""), listing.output
    # guesses written into every folder the agent can reach must not end the command
    guess = ("for d in /run/rgym/* /run/rgym /tmp/.rgym* /tmp; do for i in 0 1 2 3; do "
             ": > \"$d/$i.0\" 2>/dev/null; echo $i > \"$d/done\" 2>/dev/null; done; done; "
             "sleep 1.5; (exit 5)")
    result, took = _timed(box, guess, timeout=30)
    assert result.exit_code == 5 and took >= 1.4, (result, took)


def test_a_shell_replaced_by_a_fake_is_detected(make_sandbox) -> None:
    box = make_sandbox()
    fake = textwrap.dedent("""\
        import os, re, sys
        # a fake shell: reads each command line, forges its completion with exit 0
        for line in sys.stdin:
            for path in re.findall(r'(/[^\\s"\\'<>;]*?)\\.\\$\\?', line):
                try:
                    open(path + ".0", "w").close()
                except OSError:
                    pass
            mark = os.environ.get("MARK", "")
            sys.stdout.write("FAKE OUTPUT\\n\\n%s 0 0 /forged\\n" % mark)
            sys.stdout.flush()
        """)
    box.write_file("fake.py", fake)
    # the command's stdin is /dev/null: the shell's own is saved at fd 10 while it runs
    attack = box.run("export MARK=$__rgym_mark; exec python3 fake.py 0<&10", timeout=5)
    assert "replaced or modified" in attack.output and "python" in attack.output, attack
    result = box.run("echo real; false", timeout=10)
    assert "FAKE OUTPUT" not in result.output
    assert result.exit_code == 1 and "real" in result.output, result
    assert box.run("pwd", timeout=30).output.strip() == box.workspace


def test_a_preloaded_library_in_the_shell_is_detected(make_sandbox) -> None:
    box = make_sandbox()
    # an agent-owned library loaded into a new shell on the same binary, on the same pipe
    attack = box.run("cp \"$(ldconfig -p | grep -m1 'libm.so.6 (' | sed 's/.*=> //')\" "
                     "/tmp/libm.so.6; exec env LD_PRELOAD=/tmp/libm.so.6 /run/rgym/bash "
                     "--noprofile --norc 0<&10", timeout=5)
    assert "replaced or modified" in attack.output and "/tmp/libm.so.6" in attack.output, attack
    result = box.run("grep -c libm /proc/self/maps; false", timeout=10)
    assert result.exit_code == 1 and result.output == "0\n", result


def test_errexit_and_killed_shells_are_measured(make_sandbox) -> None:
    box = make_sandbox()
    result = box.run("set -e; false; echo unreachable", timeout=30)
    assert result.exit_code == 1 and "unreachable" not in result.output
    box.run("cd /tmp", timeout=30)
    killed = box.run("kill -9 $$", timeout=30)
    assert killed.exit_code == 137 and not killed.timed_out, killed
    assert box.run("pwd", timeout=30).output.strip() == "/tmp"
    assert box.run("true", timeout=30).exit_code == 0


def test_a_signal_trap_that_replaces_the_idle_shell_is_detected(make_sandbox) -> None:
    box = make_sandbox()
    fake = textwrap.dedent("""\
        import re, sys
        for line in sys.stdin:  # forge the next command's status, exit code 0
            for path in re.findall(r'(/[^\\s"\\'<>;]*?)\\.\\$\\?', line):
                open(path + ".0", "w").close()
            print("FAKE OUTPUT", flush=True)
        """)
    box.write_file("fake.py", fake)
    # while the shell waits for its next line, a trap replaces it with the fake
    box.run("trap 'exec python3 fake.py' USR1; (sleep 0.3; kill -USR1 $$) >/dev/null 2>&1 &",
            timeout=10)
    time.sleep(1.5)
    # bash runs the trap when the next line arrives: the fake reads that line and
    # forges its status; the forgery is not believed
    forged = box.run("echo real; true", timeout=10)
    assert forged.exit_code != 0, forged
    assert "replaced or modified" in forged.output and "python" in forged.output
    result = box.run("echo real; false", timeout=10)
    assert (result.exit_code, result.output) == (1, "real\n"), result
