"""The grading supervisor: the trusted parent of a grader and of every worker.

Run as a script (``python -I supervisor.py``), in one of two modes:

* **grading** (the runner starts it; configuration in ``$RGYM_SUPERVISOR_CONFIG``):
  it hands the evaluation folder to the grader uid, starts the grader (as that uid,
  under the grader's bubblewrap prefix when there is one) with one end of a control
  socket, serves its requests to start, watch, kill and read workers, enforces the
  grading timeout, and once the grader has exited kills every process left
  (workers, their detached descendants, anything of the worker uid), checks that
  none remains, and prints one status line ``rgym-grading-supervisor <nonce> {json}``.
  Its exit code is the grader's (124 on timeout).
* **serve** (``--serve FD --submission DIR``): started by the kit inside a grader that
  has no supervisor (a grader run by hand or by an older runner): it serves workers
  over the inherited socket ``FD``, without user separation (``confined`` false).

Standard library only; it never imports anything from the evaluation folder after
it has started.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from types import ModuleType
from typing import Any


def _load_kit() -> tuple[ModuleType, ModuleType]:
    """This kit's protocol and manager modules, whatever the kit's folder is called
    (its ``__init__`` and the grader-side modules are not imported)."""
    here = os.path.dirname(os.path.realpath(__file__))
    name = "_rgym_supervised_kit"
    if name not in sys.modules:
        package = ModuleType(name)
        package.__path__ = [here]
        sys.modules[name] = package
    return (importlib.import_module(f"{name}.protocol"), importlib.import_module(f"{name}._manager"))


protocol, manager = _load_kit()

TICK_S = 0.1


class Supervisor:
    """Serves one control channel; see the module docstring."""

    def __init__(self, sock: socket.socket, workers: Any) -> None:
        self.sock = sock
        self.workers = workers
        self.requests = 0

    def handle(self, message: dict[str, Any], fds: list[int]) -> None:
        op = message.get("op")
        reply: dict[str, Any]
        out_fds: list[int] = []
        try:
            if op == "start":
                names = message.get("files") or []
                if len(names) != len(fds):
                    raise manager.ManagerError("the files sent do not match their names")
                limits = manager.Limits.from_dict(message.get("limits") or {})
                env = {str(k): str(v) for k, v in (message.get("env") or {}).items()}
                wid, out_fds = self.workers.start(
                    message.get("argv") or [], env=env, limits=limits,
                    files=list(zip(names, fds, strict=True)),
                    with_submission=bool(message.get("with_submission", True)))
                reply = {"ok": True, "worker": wid}
            elif op == "status":
                reply = {"ok": True, **self.workers.status(message.get("worker"))}
            elif op == "kill":
                self.workers.kill(message.get("worker"))
                reply = {"ok": True, **self.workers.status(message.get("worker"))}
            elif op == "fetch":
                fd = self.workers.fetch(message.get("worker"), str(message.get("path")),
                                        int(message.get("max_bytes") or 0))
                out_fds = [fd]
                reply = {"ok": True}
            elif op == "end":
                reply = self.workers.end_all(keep=self.keep())
            elif op == "hello":
                reply = {"ok": True, "confined": self.workers.config.confined}
            else:
                reply = {"ok": False, "error": f"unknown request {op!r}"}
        except manager.ManagerError as exc:
            reply = {"ok": False, "error": str(exc)}
        except (OSError, ValueError, TypeError) as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            for fd in fds:
                os.close(fd)
        try:
            protocol.send(self.sock, reply, out_fds)
        finally:
            for fd in out_fds:
                os.close(fd)
        self.requests += 1

    def keep(self) -> set[int]:
        return set()

    def serve_once(self, timeout: float, wake: list[int] | None = None) -> bool:
        """Handle at most one request, waiting at most ``timeout`` for it (or for one
        of the ``wake`` descriptors, e.g. the grader's pidfd, to become readable);
        False once the channel is closed."""
        fd = self.sock.fileno()
        ready, _, _ = select.select([fd, *(wake or [])], [], [], timeout)
        if fd in ready:
            try:
                message, fds = protocol.receive(self.sock)
            except protocol.ChannelClosed:
                return False
            self.handle(message, fds)
        manager.reap(self.workers.exit_codes)
        self.workers.enforce_deadlines()
        return True


class GradingSupervisor(Supervisor):
    def __init__(self, sock: socket.socket, workers: Any, grader_pid: int) -> None:
        super().__init__(sock, workers)
        self.grader_pid = grader_pid

    def keep(self) -> set[int]:
        return {self.grader_pid}


def _place(sock: socket.socket, target: Any, avoid: list[int]) -> int:
    """The descriptor of ``sock`` moved to ``target`` (the number the grader was told),
    or left where it is when no number was given.  ``sock`` is detached.  ``avoid``:
    the descriptors that must stay where they are (the grader's other inherited
    descriptors, the parent's end of the socket); ``RuntimeError`` when ``target`` is
    one of them, since ``dup2`` would silently close it."""
    if target is not None and int(target) in avoid:
        raise RuntimeError(f"control fd {int(target)} is already in use")
    fd = sock.detach()
    if target is None:
        os.set_inheritable(fd, True)
        return fd
    target = int(target)
    if fd != target:
        os.dup2(fd, target)
        os.close(fd)
    return target


def _off(sock: socket.socket, target: Any) -> socket.socket:
    """``sock``, moved to another descriptor when it holds number ``target``."""
    if target is None or sock.fileno() != int(target):
        return sock
    moved = sock.dup()  # the lowest free number: not ``target``, which ``sock`` holds
    sock.close()
    return moved


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when the child ``pid`` exits (Linux 5.3+),
    or None where the system has none (the loop then wakes every tick)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _own_tree(path: str, uid: int, gid: int) -> None:
    manager.chown_tree(path, uid, gid)
    os.chmod(path, 0o700)


def run_grading(config: dict[str, Any]) -> int:
    boot = time.monotonic()
    manager.set_subreaper()
    nonce = str(config["nonce"])
    warnings = list(config.get("warnings") or [])
    wcfg = manager.ManagerConfig.from_dict(config["workers"])
    if not os.path.isabs(wcfg.python):
        wcfg.python = sys.executable  # the interpreter that runs this supervisor (the image's)
    wcfg.env.setdefault("PATH", os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin")
    if wcfg.uid is not None and os.geteuid() != 0:
        warnings.append("the supervisor is not root: workers run as the grader's user")
        wcfg.uid = wcfg.gid = None
        wcfg.confined = False
    guid, ggid = config.get("grader_uid"), config.get("grader_gid")
    if guid is not None and os.geteuid() != 0:
        guid = ggid = None
    switch = bool(config.get("grader_switch_user", True))
    os.makedirs(wcfg.work_parent, mode=0o711, exist_ok=True)
    os.chmod(wcfg.work_parent, 0o711)
    for uid in {wcfg.uid, guid}:
        if uid is not None:
            # A crashed earlier holder of the uid may have left processes.
            manager.kill_uid(int(uid))
    eval_root = str(config["eval_root"])
    if guid is not None and ggid is not None:
        _own_tree(eval_root, int(guid), int(ggid))
    workers = manager.WorkerManager(wcfg)
    parent_sock, grader_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    parent_sock = _off(parent_sock, config.get("control_fd"))
    pass_fds = [int(fd) for fd in config.get("grader_pass_fds") or []]
    try:
        grader_fd = _place(grader_sock, config.get("control_fd"),
                           avoid=[parent_sock.fileno(), *pass_fds, *wcfg.template_fds])
    except RuntimeError as exc:
        sys.stdout.write(f"rgym: cannot start the grader: {exc}\n")
        _status(nonce, {"started": False, "confined": False, "error": str(exc),
                        "warnings": warnings})
        return 1
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    env.update({str(k): str(v) for k, v in (config.get("grader_env") or {}).items()})
    env[protocol.ENV_SUPERVISOR_FD] = str(grader_fd)
    env[protocol.ENV_CONFINED] = "1" if wcfg.confined else "0"
    timeout = float(config.get("timeout_s") or 600.0)
    tick = float(config.get("tick_s") or TICK_S)  # how often worker deadlines are checked
    started = time.monotonic()
    try:
        grader = subprocess.Popen(
            list(config["grader_argv"]), env=env, cwd=str(config.get("grader_cwd") or eval_root),
            stdin=subprocess.DEVNULL, pass_fds=(grader_fd, *pass_fds),
            preexec_fn=manager.child_setup(uid=guid if switch else None,
                                           gid=ggid if switch else None,
                                           unshare_net=bool(config.get("grader_unshare_net")),
                                           limits=None, nproc=None))
    except (OSError, subprocess.SubprocessError) as exc:
        sys.stdout.write(f"rgym: cannot start the grader: {exc}\n")
        _status(nonce, {"started": False, "confined": False, "error": str(exc),
                        "warnings": warnings})
        return 1
    os.close(grader_fd)
    for fd in pass_fds:
        os.close(fd)
    workers.exit_codes[grader.pid] = None
    service = GradingSupervisor(parent_sock, workers, grader.pid)
    # The grader's pidfd wakes the loop the moment the grader ends (its control socket
    # can close a little before bubblewrap, the grader's process here, exits).
    grader_exit = _pidfd(grader.pid)
    wake = [grader_exit] if grader_exit is not None else []
    channel_open = True
    timed_out = False
    while True:
        manager.reap(workers.exit_codes)
        if workers.exit_codes.get(grader.pid) is not None:
            break
        left = timeout - (time.monotonic() - started)
        if left <= 0:
            timed_out = True
            break
        if channel_open:
            channel_open = service.serve_once(min(tick, left), wake)
        else:
            if wake:
                select.select(wake, [], [], min(tick, left))
            else:
                time.sleep(min(tick, left))
            workers.enforce_deadlines()
    if grader_exit is not None:
        os.close(grader_exit)
    parent_sock.close()
    grader_done = time.monotonic()
    code = workers.exit_codes.get(grader.pid)
    if guid is not None:
        manager.kill_uid(int(guid))  # anything the grader left running
    ended = workers.end_all(also_uids={int(guid)} if guid is not None else set())
    grader.returncode = code if code is not None else -9
    sys.stdout.flush()
    _status(nonce, {"started": True, "confined": wcfg.confined, "timed_out": timed_out,
                    "exit_code": code, "workers": workers.started,
                    "requests": service.requests, "all_stopped": ended["ok"],
                    "left": ended["left"], "warnings": warnings,
                    "seconds": round(time.monotonic() - started, 3),
                    "timings": {"boot_at": round(boot, 3), "setup_s": round(started - boot, 3),
                                "grader_s": round(grader_done - started, 3),
                                "cleanup_s": round(time.monotonic() - grader_done, 3)}})
    if timed_out:
        return 124
    if code is None:
        return 1
    return code if code >= 0 else 128 - code


def _status(nonce: str, payload: dict[str, Any]) -> None:
    sys.stdout.write(f"\n{protocol.STATUS_WORD} {nonce} {json.dumps(payload)}\n")
    sys.stdout.flush()


def run_serve(fd: int, submission: str | None) -> int:
    import tempfile

    manager.set_subreaper()
    libc = manager._libc()
    libc.prctl(manager.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    sock = socket.socket(fileno=fd)
    with tempfile.TemporaryDirectory(prefix="rgym-workers-") as parent:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
        cfg = manager.ManagerConfig(work_parent=parent, submission=submission,
                                    python=sys.executable, env=env, confined=False)
        workers = manager.WorkerManager(cfg)
        service = Supervisor(sock, workers)
        try:
            while service.serve_once(TICK_S):
                pass
        finally:
            workers.end_all()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "--serve":
        submission = argv[3] if len(argv) >= 4 and argv[2] == "--submission" else None
        return run_serve(int(argv[1]), submission)
    raw = os.environ.pop(protocol.ENV_SUPERVISOR_CONFIG, None)
    if not raw:
        sys.stderr.write(f"supervisor.py: ${protocol.ENV_SUPERVISOR_CONFIG} is not set\n")
        return 2
    return run_grading(json.loads(raw))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
