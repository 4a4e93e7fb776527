"""Confined grading on this machine and in grader containers: who runs what, as whom.

Every grading runs under the grading supervisor (``rgym_core/grader_kit/supervisor.py``),
the trusted parent of the grader and of every worker the grader starts to run agent
code.  This module decides how much isolation the machine allows and writes the
supervisor's configuration:

==========================  =======================================================
rgym runs as                the grader / the workers
==========================  =======================================================
root, bubblewrap works      two leased unprivileged uids, each under bubblewrap (own
                            pid, mount, network namespaces; the grader sees only the
                            evaluation folder at ``/eval`` writable, a worker only
                            its own folder at ``/work``); rlimits
root, no bubblewrap         two leased uids, each in an empty network namespace; rlimits
a user, bubblewrap works    the same user, each under bubblewrap as above
a user, no bubblewrap       the same user, no isolation: ``confined: false``, one warning
a grader container          fixed uids (the supervisor runs as root in the container)
==========================  =======================================================

Workers never see ``grader/``, ``private/``, the seed (it is only in the grader's
environment) or the grader's process; the supervisor kills every process they started
and checks that none is left before the grader's scores are read.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core import grader_protocol as gp

log = logging.getLogger(__name__)

#: Uids the grading falls back to when the core's uid pool is not available.
FALLBACK_UIDS = range(64200, 64400)
_LOCK_DIR = Path("/run/rgym-grading-uids")
#: How much longer than the grader's timeout the host waits for the supervisor.
BACKSTOP_S = 30.0
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE",
             "OPENBLAS_L2_SIZE", "MKL_NUM_THREADS")
_SYSTEM_RO = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc/alternatives",
              "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
              "/etc/nsswitch.conf")


@define(frozen=True)
class Confinement:
    """How gradings run on this machine (see the module docstring)."""

    #: ``bubblewrap+uids``, ``uids``, ``bubblewrap`` or ``none``.
    mode: str
    bwrap: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def uids(self) -> bool:
        return "uids" in self.mode

    @property
    def bubblewrap(self) -> bool:
        return self.bwrap is not None

    @property
    def confined(self) -> bool:
        return self.mode != "none"


@define
class SupervisedRun:
    """What a supervised grading left: the grader's exit code (124: timed out), its
    output (the supervisor's status line removed), and the supervisor's status."""

    exit_code: int
    output: str
    status: dict[str, Any] = field(factory=dict)

    @property
    def confined(self) -> bool:
        return bool(self.status.get("confined"))

    @property
    def all_stopped(self) -> bool:
        return bool(self.status.get("all_stopped", False))


# -- what the machine allows -----------------------------------------------------------


def find_bwrap() -> str | None:
    """The bubblewrap executable (the core's isolation module decides when present)."""
    try:
        from rgym_core.isolation import bubblewrap  # type: ignore[import-not-found]

        finder = getattr(bubblewrap, "find_bwrap", None) or getattr(bubblewrap, "find", None)
        if callable(finder):
            found = finder()
            return str(found) if found else None
    except ImportError:
        pass
    return shutil.which("bwrap")


def _run_as(argv: list[str], uid: int | None, timeout: float = 30.0) -> subprocess.CompletedProcess[bytes]:
    def demote() -> None:
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)

    return subprocess.run(argv, capture_output=True, timeout=timeout, cwd="/", preexec_fn=demote,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})


@functools.cache
def _bwrap_works(bwrap: str, as_root: bool) -> str | None:
    """None when bubblewrap can run Python as an unprivileged user here, else why not."""
    probe_uid = FALLBACK_UIDS[-1] if as_root else None
    argv = [*bwrap_prefix(bwrap), "--chdir", "/", sys.executable, "-s", "-c", "pass"]
    try:
        result = _run_as(argv, probe_uid)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if result.returncode != 0:
        return result.stderr.decode(errors="replace").strip()[-300:] or f"exit {result.returncode}"
    return None


@functools.cache
def _interpreter_problem(as_root: bool) -> str | None:
    """None when an unprivileged uid can run this interpreter, else the error."""
    if not as_root:
        return None
    try:
        result = _run_as([sys.executable, "-s", "-c", "import json"], FALLBACK_UIDS[-1])
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if result.returncode != 0:
        return result.stderr.decode(errors="replace").strip()[-300:]
    return None


def host_confinement() -> Confinement:
    """What this machine allows gradings (probed once per process)."""
    return _host_confinement(os.geteuid() == 0)


@functools.cache
def _host_confinement(as_root: bool) -> Confinement:
    warnings: list[str] = []
    uids = as_root
    if as_root:
        problem = _interpreter_problem(True)
        if problem:
            uids = False
            warnings.append(f"an unprivileged user cannot run {sys.executable} ({problem}); "
                            "install Python where other users can read it")
    bwrap = find_bwrap()
    if bwrap is not None:
        problem = _bwrap_works(bwrap, uids)
        if problem:
            warnings.append(f"bubblewrap is installed but does not work here ({problem})")
            bwrap = None
    elif not uids:
        warnings.append("bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    if uids and bwrap:
        mode = "bubblewrap+uids"
    elif uids:
        mode = "uids"
    elif bwrap:
        mode = "bubblewrap"
    else:
        mode = "none"
        warnings.append("grading is NOT confined: the submission's code that graders run "
                        "(strategies, heuristics, models) runs as your own user and could read "
                        "the grader's files or change its scores; scores are recorded with "
                        "confined: false. Install bubblewrap, or run rgym as root or with "
                        "--sandbox docker")
    return Confinement(mode=mode, bwrap=bwrap, warnings=tuple(warnings))


_warned: set[str] = set()


def warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("rgym grading: %s", message)


# -- uids --------------------------------------------------------------------------------


@contextlib.contextmanager
def lease_uids(count: int) -> Iterator[list[int]]:
    """``count`` unprivileged uids no other grading or episode on this machine holds
    (the core's uid pool when present, else a pool of this module's own); every
    process of each uid is killed when the lease ends."""
    try:
        from rgym_core.isolation import users  # type: ignore[import-not-found]
    except ImportError:
        users = None
    lease = getattr(users, "lease", None) if users is not None else None
    with contextlib.ExitStack() as stack:
        got: list[int] = []
        for _ in range(count):
            if callable(lease):
                held = stack.enter_context(lease())
                got.append(int(getattr(held, "uid", held)))
            else:
                got.append(stack.enter_context(_fallback_lease()))
        for uid in got:
            _kill_uid(uid)
        try:
            yield got
        finally:
            for uid in got:
                _kill_uid(uid)
                _remove_owned_tmp(uid)


@contextlib.contextmanager
def _fallback_lease() -> Iterator[int]:
    _LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
    for uid in FALLBACK_UIDS[:-1]:  # the last one is the probe uid
        fd = os.open(_LOCK_DIR / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield uid
        finally:
            os.close(fd)
        return
    raise RuntimeError(f"every grading uid ({FALLBACK_UIDS.start}-{FALLBACK_UIDS.stop - 2}) "
                       "is in use by other gradings")


def _processes_of(uid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid:
                            out.append(int(name))
                        break
        except OSError:
            continue
    return out


def _kill_uid(uid: int) -> None:
    """Kill every process of ``uid`` (root only), until none is left."""
    if os.geteuid() != 0 or uid == 0:
        return
    for _ in range(200):
        pids = _processes_of(uid)
        if not pids:
            return
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.01)
    log.error("rgym grading: processes of uid %d survive SIGKILL: %s", uid, _processes_of(uid))


def _remove_owned_tmp(uid: int) -> None:
    """Files a grading uid left in the machine's shared temporary folders."""
    for top in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


# -- bubblewrap --------------------------------------------------------------------------


def _python_roots() -> list[str]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(os.path.realpath(sys.executable)).parent.parent)}
    return sorted(r for r in roots if r and os.path.isdir(r))


@functools.cache
def _hidden_package_dirs() -> tuple[str, ...]:
    """Folders of installed rgym plugins (task packs hold hidden grader files) inside
    the interpreter's folders: workers must not see them."""
    from importlib.metadata import entry_points

    roots = [os.path.realpath(r) for r in _python_roots()]
    out: set[str] = set()
    seen: set[str] = set()
    for ep in entry_points(group="rgym"):
        dist = ep.dist
        if dist is None or dist.name in seen:
            continue
        seen.add(dist.name)
        for file in dist.files or ():
            top = file.parts[0] if file.parts else ""
            if not top or top.endswith((".dist-info", ".egg-info", ".pth")) or top == "..":
                continue
            location = os.path.realpath(str(dist.locate_file(top)))
            if os.path.isdir(location) and any(location.startswith(r + "/") for r in roots):
                out.add(location)
    return tuple(sorted(out))


def bwrap_prefix(bwrap: str, *, hide: Sequence[str] = ()) -> list[str]:
    """bubblewrap's argv for a process that sees the system's programs and this
    interpreter read-only and nothing else of the host: own user, pid, mount,
    network, IPC and UTS namespaces, a private ``/tmp``, killed with its parent."""
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session"]
    for path in _SYSTEM_RO:
        argv += ["--ro-bind-try", path, path]
    for root in _python_roots():
        argv += ["--ro-bind", root, root]
        real = os.path.realpath(root)
        if real != root:
            argv += ["--ro-bind", real, real]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in hide:
        argv += ["--tmpfs", path]
    return argv


# -- the supervisor's configuration -------------------------------------------------------


def grader_environment(root: str, *, kind: str, seed: int | None,
                       extra: Mapping[str, str] = ()) -> dict[str, str]:  # type: ignore[assignment]
    """The grader protocol's environment for an evaluation folder seen at ``root``."""
    home = f"{root}/{gp.HOME_DIR}"
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP}
    env.update(dict(extra))
    env.update({
        gp.ENV_SUBMISSION_DIR: f"{root}/{gp.SUBMISSION_DIR}",
        gp.ENV_GRADER_DIR: f"{root}/{gp.GRADER_DIR}",
        gp.ENV_DATA_DIR: f"{root}/{gp.DATA_DIR}",
        gp.ENV_PRIVATE_DIR: f"{root}/{gp.PRIVATE_DIR}",
        gp.ENV_SCORES_FILE: f"{root}/{gp.SCORES_FILE}",
        gp.ENV_GRADE_KIND: kind,
        "HOME": home, "PYTHONUSERBASE": f"{home}/.local", "TMPDIR": f"{home}/tmp",
        "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
        "USER": "rgym-grader", "LOGNAME": "rgym-grader",
    })
    if seed is not None:
        env[gp.ENV_SEED] = str(seed)
    return env


def _worker_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    env.setdefault("LANG", "C.UTF-8")
    env.update({"USER": "rgym-worker", "LOGNAME": "rgym-worker", "OMP_NUM_THREADS": "1"})
    return env


def host_config(*, eval_root: Path, work_parent: Path, entry: str, kind: str, seed: int | None,
                env: Mapping[str, str], timeout: float, confinement: Confinement,
                grader_uid: int | None, worker_uid: int | None, nonce: str) -> dict[str, Any]:
    """The supervisor's configuration for a grading on this machine."""
    bwrap = confinement.bwrap
    inside = gp.EVAL_MOUNT if bwrap else str(eval_root)
    grader_env = grader_environment(inside, kind=kind, seed=seed, extra=env)
    grader_argv = [sys.executable, "-s", f"{gp.GRADER_DIR}/{entry}"]
    worker_prefix: list[str] = []
    if bwrap:
        grader_argv = [*bwrap_prefix(bwrap), "--bind", str(eval_root), gp.EVAL_MOUNT,
                       "--chdir", gp.EVAL_MOUNT, *grader_argv]
        worker_prefix = [*bwrap_prefix(bwrap, hide=_hidden_package_dirs()),
                         "--bind", "@WORKDIR@", gp.WORKER_MOUNT, "--chdir", gp.WORKER_MOUNT]
    unshare_net = bwrap is None and os.geteuid() == 0
    return {
        "nonce": nonce,
        "eval_root": str(eval_root),
        "grader_argv": grader_argv,
        "grader_env": grader_env,
        "grader_cwd": str(eval_root) if not bwrap else "/",
        "grader_uid": grader_uid, "grader_gid": grader_uid,
        "grader_unshare_net": unshare_net,
        "timeout_s": timeout,
        "warnings": list(confinement.warnings),
        "workers": {
            "work_parent": str(work_parent),
            "submission": str(eval_root / gp.SUBMISSION_DIR),
            "uid": worker_uid, "gid": worker_uid,
            "prefix": worker_prefix,
            "inside_dir": gp.WORKER_MOUNT if bwrap else None,
            "python": sys.executable,
            "unshare_net": unshare_net,
            "env": _worker_env(),
            "confined": confinement.confined,
        },
    }


def container_config(*, entry: str, kind: str, seed: int | None, env: Mapping[str, str],
                     timeout: float, nonce: str) -> dict[str, Any]:
    """The supervisor's configuration inside a grader container (evaluation folder at
    :data:`~rgym_core.grader_protocol.EVAL_MOUNT`, the supervisor started as root)."""
    root = gp.EVAL_MOUNT
    grader_env = grader_environment(root, kind=kind, seed=seed, extra=env)
    for name in ("PATH", "TZ", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                 "MKL_NUM_THREADS"):
        grader_env.pop(name, None)  # the image's own
    return {
        "nonce": nonce,
        "eval_root": root,
        "grader_argv": ["python3", "-s", f"{gp.GRADER_DIR}/{entry}"],
        "grader_env": grader_env,
        "grader_cwd": root,
        "grader_uid": gp.CONTAINER_GRADER_UID, "grader_gid": gp.CONTAINER_GRADER_UID,
        "grader_unshare_net": False,
        "timeout_s": timeout,
        "warnings": [],
        "workers": {
            "work_parent": "/tmp/rgym-workers",
            "submission": f"{root}/{gp.SUBMISSION_DIR}",
            "uid": gp.CONTAINER_WORKER_UID, "gid": gp.CONTAINER_WORKER_UID,
            "prefix": [], "inside_dir": None, "python": "python3", "unshare_net": False,
            "env": {"LANG": "C.UTF-8", "USER": "rgym-worker", "LOGNAME": "rgym-worker",
                    "OMP_NUM_THREADS": "1"},
            "confined": True,
        },
    }


def supervisor_argv(script: str) -> list[str]:
    return [sys.executable, "-I", "-S", script]


def new_nonce() -> str:
    return secrets.token_hex(16)


def split_status(output: str, nonce: str) -> tuple[str, dict[str, Any]]:
    """The output without the supervisor's status line, and the status (``{}`` if
    there is none: the supervisor died or never ran)."""
    marker = f"{gp.STATUS_WORD} {nonce} "
    pos = output.rfind(marker)
    if pos < 0:
        return output, {}
    end = output.find("\n", pos)
    line = output[pos + len(marker): end if end >= 0 else len(output)]
    rest = output[:pos].rstrip("\n") + ("\n" + output[end + 1:] if end >= 0 and output[end + 1:] else "")
    try:
        status = json.loads(line)
    except ValueError:
        status = {}
    return rest, status if isinstance(status, dict) else {}


# -- running on this machine --------------------------------------------------------------


def run_on_host(*, eval_root: Path, work_parent: Path, entry: str, kind: str, seed: int | None,
                env: Mapping[str, str], timeout: float) -> SupervisedRun:
    """Grade the evaluation folder ``eval_root`` on this machine, confined as well as
    the machine allows.  ``eval_root`` and ``work_parent`` must be new folders inside
    a folder that other users may traverse (mode 0711)."""
    confinement = host_confinement()
    for message in confinement.warnings:
        warn_once(message)
    nonce = new_nonce()
    with contextlib.ExitStack() as stack:
        grader_uid = worker_uid = None
        if confinement.uids:
            grader_uid, worker_uid = stack.enter_context(lease_uids(2))
        config = host_config(eval_root=eval_root, work_parent=work_parent, entry=entry, kind=kind,
                             seed=seed, env=env, timeout=timeout, confinement=confinement,
                             grader_uid=grader_uid, worker_uid=worker_uid, nonce=nonce)
        script = str(gp.supervisor_script())
        proc_env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
        proc_env[gp.ENV_SUPERVISOR_CONFIG] = json.dumps(config)
        code, output = _run(supervisor_argv(script), proc_env, timeout + BACKSTOP_S)
        text, status = split_status(output, nonce)
        if code == 124 and not status:
            status = {"timed_out": True, "confined": confinement.confined}
        return SupervisedRun(code, text, status)


def _run(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run the supervisor, killing its whole group on timeout or interruption."""
    proc = subprocess.Popen(argv, cwd="/", env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        _killpg(proc.pid)
        out, _ = proc.communicate()
        return 124, out.decode(errors="replace")
    except BaseException:
        _killpg(proc.pid)
        proc.wait()
        raise


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
