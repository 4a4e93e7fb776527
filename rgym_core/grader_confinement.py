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
import functools
import json
import logging
import os
import secrets
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core import grader_protocol as gp
from rgym_core.grader_kit._manager import COMMAND_TOKEN, WORKDIR_TOKEN
from rgym_core.grader_kit.launcher import ENV_FILE_VAR, python_argv
from rgym_core.isolation import BwrapCommand, bwrap_problem, find_bwrap, interpreter_paths, lease
from rgym_core.isolation.users import UidLease, kill_uid_processes
from rgym_core.isolation.warn import warn_once

log = logging.getLogger(__name__)

#: How much longer than the grader's timeout the host waits for the supervisor.
BACKSTOP_S = 30.0
#: The descriptor number of the grader's end of the supervisor's control socket.
CONTROL_FD = 99
#: Where the grader's environment file appears in its bubblewrap sandbox.
GRADER_ENV_FILE = "/run/rgym/grader-env.json"
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE",
             "OPENBLAS_L2_SIZE", "MKL_NUM_THREADS")


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
    def confined(self) -> bool:
        return self.mode != "none"


@define
class SupervisedRun:
    """What a supervised grading left: the grader's exit code (124: timed out), its
    output (the supervisor's status line removed), and the supervisor's status."""

    exit_code: int
    output: str
    status: dict[str, Any] = field(factory=dict)


# -- what the machine allows -----------------------------------------------------------


def _run_as(argv: list[str], uid: int | None, timeout: float = 30.0) -> subprocess.CompletedProcess[bytes]:
    def demote() -> None:
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)

    return subprocess.run(argv, capture_output=True, timeout=timeout, cwd="/", preexec_fn=demote,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})


@functools.cache
def _interpreter_problem(bwrap: str | None = None) -> str | None:
    """None when an unprivileged (leased) uid can run this interpreter, else the error.

    When a folder on the way is closed to other users (a venv under pytest's
    ``/tmp/pytest-of-root``, under ``/root``...), traverse-only permission (``o+x``,
    never read) is granted on the folders that block it, with one warning naming
    them, as the local sandbox does for its agent users."""
    def probe() -> str | None:
        try:
            with lease() as user:
                result = _run_as([sys.executable, "-s", "-c", "import json"], user.uid)
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            return str(exc)
        if result.returncode != 0:
            return result.stderr.decode(errors="replace").strip()[-300:]
        return None

    problem = probe()
    if problem is None:
        return None
    if bwrap is not None:
        # Under bubblewrap the interpreter's folders are bound into the sandbox below
        # folders it creates (0755): the host's closed parents do not matter.
        return _bwrap_interpreter_problem(bwrap)
    if grant_traverse([sys.executable, os.path.realpath(sys.executable), sys.prefix,
                       sys.base_prefix, sys.exec_prefix, *extra_site_dirs()]):
        problem = probe()
    return problem


def _bwrap_interpreter_problem(bwrap: str) -> str | None:
    """None when a leased uid can run this interpreter in a grader's bubblewrap sandbox."""
    try:
        with lease() as user:
            cmd = (BwrapCommand(bwrap=bwrap, uid=user.uid, gid=user.gid, chdir="/")
                   .tmpfs("/tmp").system())
            for path in _python_binds():
                cmd.ro_bind(path)
            with cmd.prepare([sys.executable, "-s", "-c", "import json"]) as prepared:
                result = subprocess.run(prepared.argv, pass_fds=prepared.pass_fds,
                                        capture_output=True, timeout=60, cwd="/",
                                        stdin=subprocess.DEVNULL)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        return str(exc)
    if result.returncode != 0:
        return result.stderr.decode(errors="replace").strip()[-300:]
    return None


def grant_traverse(targets: list[str]) -> list[str]:
    """Add ``o+x`` (traverse, never list or read) to the folders above ``targets``
    that lack it, so other users can reach them; log one warning naming the folders
    changed, and return them."""
    changed: list[str] = []
    for target in sorted(set(targets)):
        for folder in reversed(Path(target).parents):
            try:
                mode = os.stat(folder).st_mode
                if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                    os.chmod(folder, stat.S_IMODE(mode) | stat.S_IXOTH)
                    changed.append(str(folder))
            except OSError:
                continue
    if changed:
        log.warning("rgym: unprivileged users could not run %s; granted traverse-only "
                    "permission (o+x) on: %s", sys.executable, ", ".join(changed))
    return changed


def host_confinement() -> Confinement:
    """What this machine allows gradings (probed once per process and setting)."""
    return _host_confinement(os.geteuid() == 0, find_bwrap())


@functools.cache
def _host_confinement(as_root: bool, bwrap: str | None) -> Confinement:
    warnings: list[str] = []
    uids = as_root
    bwrap_issue = bwrap_problem()
    if bwrap_issue is not None:
        bwrap = None
    if as_root:
        problem = _interpreter_problem(bwrap)
        if problem:
            uids = False
            warnings.append(f"an unprivileged user cannot run {sys.executable} ({problem}); "
                            "install Python where other users can read it")
    if bwrap_issue is not None and not uids:
        warnings.append(bwrap_issue)
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
                        "the grader's files; scores are recorded with confined: false. Install "
                        "bubblewrap, or run rgym as root or with --sandbox docker")
    return Confinement(mode=mode, bwrap=bwrap, warnings=tuple(warnings))


#: The start of every grading warning.
WARNING_PREFIX = "rgym grading: "


# -- bubblewrap --------------------------------------------------------------------------


def _is_inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


@functools.cache
def extra_site_dirs() -> tuple[str, ...]:
    """Site folders on ``sys.path`` outside the interpreter's own folders (a venv
    layered on another one through a ``.pth`` file, e.g.
    :class:`rgym_core.testing.venvs.ChildEnv`): graders and workers see them
    read-only, and the fast launcher puts them on ``sys.path``.  Only folders named
    ``site-packages``/``dist-packages``: an editable pack's checkout on ``sys.path``
    (graders, answers) is never shown to workers."""
    import site

    roots = [os.path.realpath(p) for p in interpreter_paths()]
    user_site = os.path.realpath(site.getusersitepackages())  # graders run with -s: never
    out: list[str] = []
    for entry in sys.path:
        if not entry or os.path.basename(entry.rstrip("/")) not in ("site-packages",
                                                                     "dist-packages"):
            continue
        real = os.path.realpath(entry)
        if os.path.isdir(real) and real not in out and not _is_inside(real, roots) \
                and not real.startswith("/usr/") and real != user_site:
            out.append(real)
    return tuple(out)


def _python_binds() -> tuple[str, ...]:
    """Folders bound read-only, beyond :meth:`BwrapCommand.system`, for the interpreter."""
    return extra_site_dirs()


@functools.cache
def _hidden_package_dirs() -> tuple[str, ...]:
    """Folders of installed rgym plugins (task packs hold hidden grader files) inside
    the interpreter's folders: workers must not see them."""
    from importlib.metadata import entry_points

    roots = [os.path.realpath(r) for r in [*interpreter_paths(), *_python_binds()]]
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


def grader_command(bwrap: str, *, eval_root: Path, uid: int | None,
                   env: Mapping[str, str]) -> BwrapCommand:
    """The grader's sandbox: the system and the interpreter read-only, the evaluation
    folder read-write at ``/eval``, a private ``/tmp``, no network."""
    # The private /tmp first: an interpreter (a venv) under the host's /tmp is bound
    # on top of it by system() and _python_binds(), and stays visible.
    cmd = (BwrapCommand(bwrap=bwrap, uid=uid, gid=uid, env=dict(env), chdir=gp.EVAL_MOUNT)
           .tmpfs("/tmp")
           .system())
    for path in _python_binds():
        cmd.ro_bind(path)
    return cmd.bind(eval_root, gp.EVAL_MOUNT)


def worker_command(bwrap: str, *, uid: int | None) -> BwrapCommand:
    """A worker's sandbox template: the system and the interpreter read-only (the
    installed rgym plugins hidden), its own folder read-write at ``/rgym/work``
    (``@WORKDIR@``), a private ``/tmp``, no network."""
    cmd = (BwrapCommand(bwrap=bwrap, uid=uid, gid=uid, env={"HOME": gp.WORKER_MOUNT},
                        chdir=gp.WORKER_MOUNT)
           .tmpfs("/tmp")  # first: a venv under the host's /tmp is bound on top of it
           .system())
    for path in _python_binds():
        cmd.ro_bind(path)
    cmd.bind(WORKDIR_TOKEN, gp.WORKER_MOUNT)
    for path in _hidden_package_dirs():
        cmd.tmpfs(path, mode=0o755)
    return cmd


# -- the supervisor's configuration -------------------------------------------------------


def grader_environment(root: str, *, kind: str, seed: int | None,
                       extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The grader protocol's environment for an evaluation folder seen at ``root``."""
    home = f"{root}/{gp.HOME_DIR}"
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP}
    env.update(dict(extra or {}))
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


@functools.cache
def _python_facts() -> dict[str, Any]:
    """This interpreter's prefixes and site folders, for the fast launcher."""
    import site

    dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]
    dirs += [d for d in extra_site_dirs() if d not in dirs]
    return {"prefix": sys.prefix, "exec_prefix": sys.exec_prefix, "site_dirs": dirs}


def _worker_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    env.setdefault("LANG", "C.UTF-8")
    env.update({"USER": "rgym-worker", "LOGNAME": "rgym-worker", "OMP_NUM_THREADS": "1",
                "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    return env


@contextlib.contextmanager
def host_config(*, eval_root: Path, work_parent: Path, entry: str, kind: str, seed: int | None,
                env: Mapping[str, str], timeout: float, confinement: Confinement,
                grader_uid: int | None, worker_uid: int | None,
                nonce: str) -> Iterator[tuple[dict[str, Any], list[int]]]:
    """The supervisor's configuration for a grading on this machine, and the
    descriptors it must inherit (bubblewrap's data files), open for the block."""
    bwrap = confinement.bwrap
    python = _python_facts()
    grader_argv = python_argv(sys.executable, [f"{gp.GRADER_DIR}/{entry}"], **python)
    workers: dict[str, Any] = {
        "work_parent": str(work_parent), "submission": str(eval_root / gp.SUBMISSION_DIR),
        "uid": worker_uid, "gid": worker_uid, "python": sys.executable, **python,
        "env": _worker_env(), "confined": confinement.confined,
    }
    config: dict[str, Any] = {
        "nonce": nonce, "eval_root": str(eval_root), "timeout_s": timeout,
        "grader_uid": grader_uid, "grader_gid": grader_uid, "control_fd": CONTROL_FD,
        "warnings": list(confinement.warnings), "workers": workers,
    }
    with contextlib.ExitStack() as stack:
        fds: list[int] = []
        if bwrap:
            inside = grader_environment(gp.EVAL_MOUNT, kind=kind, seed=seed, extra=env)
            inside.update({gp.ENV_SUPERVISOR_FD: str(CONTROL_FD),
                           gp.ENV_CONFINED: "1" if confinement.confined else "0"})
            # Only what the interpreter reads at start-up goes on bubblewrap's command
            # line; the rest (the seed...) reaches the grader in a data file.
            startup = {k: v for k, v in inside.items()
                       if k.startswith("PYTHON") or k in ("PATH", "HOME", "LANG", "LC_ALL")}
            startup[ENV_FILE_VAR] = GRADER_ENV_FILE
            command = grader_command(bwrap, eval_root=eval_root, uid=grader_uid, env=startup)
            command.file(GRADER_ENV_FILE, json.dumps(inside), mode=0o444)
            # The supervisor puts the grader's control socket at CONTROL_FD: no data
            # file the grader's or a worker's bubblewrap reads may have that number.
            grader = stack.enter_context(command.prepare(grader_argv, avoid_fds=(CONTROL_FD,)))
            template = stack.enter_context(worker_command(bwrap, uid=worker_uid)
                                           .prepare([COMMAND_TOKEN], avoid_fds=(CONTROL_FD,)))
            config.update({"grader_argv": grader.argv, "grader_env": {}, "grader_cwd": "/",
                           "grader_pass_fds": list(grader.pass_fds),
                           "grader_switch_user": False, "grader_unshare_net": False})
            workers.update({"template": template.argv, "template_fds": list(template.pass_fds),
                            "switch_user": False, "inside_dir": gp.WORKER_MOUNT,
                            "unshare_net": False})
            fds = [*grader.pass_fds, *template.pass_fds]
        else:
            unshare_net = os.geteuid() == 0
            config.update({"grader_argv": grader_argv, "grader_cwd": str(eval_root),
                           "grader_env": grader_environment(str(eval_root), kind=kind, seed=seed,
                                                            extra=env),
                           "grader_switch_user": True, "grader_unshare_net": unshare_net})
            workers.update({"switch_user": True, "unshare_net": unshare_net})
        yield config, fds


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
        "grader_switch_user": True, "grader_unshare_net": False,
        "timeout_s": timeout,
        "warnings": [],
        "workers": {
            "work_parent": "/tmp/rgym-workers",
            "submission": f"{root}/{gp.SUBMISSION_DIR}",
            "uid": gp.CONTAINER_WORKER_UID, "gid": gp.CONTAINER_WORKER_UID, "switch_user": True,
            "python": "python3", "unshare_net": False,
            "env": {"LANG": "C.UTF-8", "USER": "rgym-worker", "LOGNAME": "rgym-worker",
                    "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
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
        warn_once(WARNING_PREFIX + message)
    nonce = new_nonce()
    with contextlib.ExitStack() as stack:
        grader_uid = worker_uid = None
        checked = threading.Event()
        if confinement.uids:
            # Under bubblewrap the uids cannot leave files in the host's shared temporary
            # folders, so their leases skip that sweep; the supervisor kills whatever
            # still runs under them, before and after the grading.
            clean = confinement.bwrap is None
            grader_lease = stack.enter_context(_released(lease(clean=clean), clean, checked))
            worker_lease = stack.enter_context(_released(lease(clean=clean), clean, checked))
            grader_uid, worker_uid = grader_lease.uid, worker_lease.uid
        config, fds = stack.enter_context(host_config(
            eval_root=eval_root, work_parent=work_parent, entry=entry, kind=kind, seed=seed,
            env=env, timeout=timeout, confinement=confinement, grader_uid=grader_uid,
            worker_uid=worker_uid, nonce=nonce))
        proc_env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
        proc_env[gp.ENV_SUPERVISOR_CONFIG] = json.dumps(config)
        code, output = _run(supervisor_argv(str(gp.supervisor_script())), proc_env,
                            timeout + BACKSTOP_S, fds)
        text, status = split_status(output, nonce)
        if status.get("all_stopped"):
            checked.set()  # the supervisor killed and checked both uids itself
        if code == 124 and not status:
            status = {"timed_out": True, "confined": confinement.confined}
        return SupervisedRun(code, text, status)


@contextlib.contextmanager
def _released(held: UidLease, clean: bool, checked: threading.Event) -> Iterator[UidLease]:
    """Hold a lease for the block; on release, kill what runs under the uid (unless
    the supervisor reported it checked that nothing does) and sweep its temporary
    files (when ``clean``)."""
    try:
        yield held
    finally:
        try:
            if not checked.is_set():
                kill_uid_processes(held.uid)
        finally:
            held.release(clean=clean)


def _run(argv: list[str], env: dict[str, str], timeout: float,
         fds: list[int]) -> tuple[int, str]:
    """Run the supervisor, killing its whole group on timeout or interruption."""
    proc = subprocess.Popen(argv, cwd="/", env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, pass_fds=tuple(fds))
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
