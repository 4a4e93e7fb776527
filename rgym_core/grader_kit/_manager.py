"""Starting, watching and killing the processes of agent code (the supervisor's side).

Only the grading supervisor (a single-threaded process, see ``supervisor.py``) uses
this module: it runs every worker as the worker uid (when it may switch users),
under the bubblewrap prefix the caller built (when there is one), with rlimits, in a
fresh session, as a child of itself (it is a *child subreaper*, so a worker's
detached descendants stay its descendants), and it kills them all, checking that
none is left, before the grader's scores are accepted.

Standard library only.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field, fields
from typing import Any

from .launcher import python_argv
from .limits import Limits
from .protocol import ENV_WORKER_DIR

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNET = 0x40000000
#: Tokens of a launcher template: the worker's real folder, and its command.
WORKDIR_TOKEN = "@WORKDIR@"
COMMAND_TOKEN = "@COMMAND@"
_COPY_CHUNK = 1 << 20


@dataclass
class ManagerConfig:
    """How the supervisor starts workers.

    ``uid``/``gid``: the worker identity (``None``: the supervisor's own, i.e. no
    user separation); ``switch_user``: the supervisor itself switches to it before
    exec (False when the ``template`` does, e.g. bubblewrap followed by ``setpriv``);
    ``template``: the argv of a confining launcher in which ``@WORKDIR@`` (inside an
    item) becomes the worker's folder and the item ``@COMMAND@`` the worker's command
    (run through ``env -i`` with the worker's environment), empty for none;
    ``template_fds``: descriptors the template reads (bubblewrap data files), rewound
    before every start; ``inside_dir``: the path under which the worker sees its folder
    (``None``: its real path); ``unshare_net``: give each worker an empty network
    namespace (root without bubblewrap); ``env``: the base environment of workers.
    """

    work_parent: str
    submission: str | None = None
    uid: int | None = None
    gid: int | None = None
    switch_user: bool = True
    template: list[str] = field(default_factory=list)
    template_fds: list[int] = field(default_factory=list)
    inside_dir: str | None = None
    python: str = "python3"
    #: The environment's prefixes and site folders: ``"python"`` commands then start
    #: through the fast launcher (:mod:`.launcher`); empty: plain ``python -s``.
    prefix: str | None = None
    exec_prefix: str | None = None
    site_dirs: list[str] = field(default_factory=list)
    unshare_net: bool = False
    env: dict[str, str] = field(default_factory=dict)
    confined: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ManagerConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class ManagerError(Exception):
    """A request the supervisor cannot carry out (said to the grader as is)."""


# -- low-level process facts -----------------------------------------------------------


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def set_subreaper() -> bool:
    """Make this process adopt its descendants' orphans (Linux); False if unsupported."""
    try:
        return _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _proc_pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def _ppid_uid(pid: int) -> tuple[int, int] | None:
    """(parent pid, real uid) of a live process, or None if gone or a zombie."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            text = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    ppid = uid = -1
    for line in text.splitlines():
        if line.startswith("State:") and "Z (zombie)" in line:
            return None
        if line.startswith("PPid:"):
            ppid = int(line.split()[1])
        elif line.startswith("Uid:"):
            uid = int(line.split()[1])
    return ppid, uid


def process_table() -> dict[int, tuple[int, int]]:
    """Every live process: pid -> (parent pid, real uid)."""
    table = {}
    for pid in _proc_pids():
        facts = _ppid_uid(pid)
        if facts is not None:
            table[pid] = facts
    return table


def descendants(root: int, table: Mapping[int, tuple[int, int]] | None = None) -> set[int]:
    """The live descendants of ``root`` (not ``root`` itself)."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in out:
                out.add(child)
                stack.append(child)
    return out


def processes_of(uid: int) -> list[int]:
    return [pid for pid, (_, owner) in process_table().items() if owner == uid]


def _kill(pids: Sequence[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` at once: a child that becomes ``uid`` calls
    ``kill(-1)``, which the kernel applies to all of that user's processes (needs root)."""
    if os.geteuid() != 0 or uid == 0:
        _kill(processes_of(uid))
        return
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        except BaseException:
            os._exit(1)
        os._exit(0)
    os.waitpid(pid, 0)


def reap(known: dict[int, int | None]) -> None:
    """Collect every exited child (ours and adopted orphans); record the exit codes
    of the ``known`` pids (a code, or ``-signal``)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in known:
            known[pid] = os.waitstatus_to_exitcode(status)


# -- files -------------------------------------------------------------------------------


def copy_tree(src: str, dest: str) -> None:
    """Copy regular files and folders of ``src`` into ``dest`` (which exists); links,
    devices, sockets and fifos are left out, and no name is ever followed."""
    src_fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _copy_dir(src_fd, dest)
    finally:
        os.close(src_fd)


def _copy_dir(src_fd: int, dest: str) -> None:
    for entry in os.scandir(src_fd):
        name = entry.name
        try:
            st = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
        except OSError:
            continue
        target = os.path.join(dest, name)
        if stat.S_ISDIR(st.st_mode):
            os.mkdir(target, 0o700)
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=src_fd)
            try:
                _copy_dir(sub, target)
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode):
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src_fd)
            try:
                copy_fd_to(fd, target, stat.S_IMODE(st.st_mode) & 0o755 | 0o600)
            finally:
                os.close(fd)


def copy_fd_to(fd: int, target: str, mode: int = 0o600) -> None:
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        while True:
            chunk = os.read(fd, _COPY_CHUNK)
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view):]
    finally:
        os.close(out)


def safe_relative(name: str) -> list[str]:
    """The parts of a relative POSIX path that stays inside its folder."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or name.startswith("/") or ".." in parts or any("\0" in p for p in parts):
        raise ManagerError(f"'{name}' is not a relative path inside the worker's folder")
    return parts


def open_inside(top: str, name: str) -> int:
    """Open ``top/name`` for reading without following any link on the way; only a
    regular file is accepted."""
    parts = safe_relative(name)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            sub = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = sub
        out = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ManagerError(f"'{name}' is a link or lies behind one; only regular files "
                               "are read") from None
        if exc.errno == errno.ENOENT:
            raise ManagerError(f"'{name}' does not exist") from None
        raise ManagerError(f"cannot open '{name}': {exc.strerror}") from None
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(out).st_mode):
        os.close(out)
        raise ManagerError(f"'{name}' is not a regular file")
    return out


def chown_tree(top: str, uid: int, gid: int) -> None:
    """lchown a folder tree (never following links)."""
    os.lchown(top, uid, gid)
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            try:
                os.lchown(os.path.join(folder, name), uid, gid)
            except OSError:
                pass


# -- the child side ----------------------------------------------------------------------


def child_setup(*, uid: int | None, gid: int | None, unshare_net: bool,
                limits: Limits | None, nproc: int | None) -> Callable[[], None]:
    """The function run in a new child before exec: network namespace, identity,
    parent-death signal, a new session, rlimits (in that order)."""
    libc = _libc()

    def setup() -> None:
        if unshare_net and libc.unshare(CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "cannot create a network namespace")
        if uid is not None and gid is not None:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if limits is not None:
            mib = 1 << 20
            if limits.memory_mb:
                resource.setrlimit(resource.RLIMIT_DATA, (limits.memory_mb * mib,) * 2)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * mib,) * 2)
            resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files,) * 2)
            if limits.cpu_s:
                soft = max(1, int(limits.cpu_s))
                resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 2))
        if nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    return setup


# -- the manager -------------------------------------------------------------------------


@dataclass
class _Worker:
    wid: int
    pid: int
    folder: str
    deadline: float
    proc: subprocess.Popen[bytes]
    killed_for: str | None = None


class WorkerManager:
    """Every worker of one grading."""

    def __init__(self, config: ManagerConfig) -> None:
        self.config = config
        self.workers: dict[int, _Worker] = {}
        self.exit_codes: dict[int, int | None] = {}
        self.started = 0
        self._next = 1

    # starting ---------------------------------------------------------------------

    def _nproc(self, limits: Limits) -> int:
        # a launcher adds up to three processes per worker; without a worker uid the
        # limit counts every process of our own user, so add those that exist now.
        extra = 3 if self.config.template else 0
        if self.config.uid is None:
            own = os.getuid()
            extra += sum(1 for _, uid in process_table().values() if uid == own) + 16
        else:
            extra += len(processes_of(self.config.uid))
        return limits.pids + extra

    def start(self, argv: Sequence[str], *, env: Mapping[str, str], limits: Limits,
              files: Sequence[tuple[str, int]], with_submission: bool) -> tuple[int, list[int]]:
        """Start a worker; return its id and the grader's ends of its stdin, stdout
        and stderr pipes."""
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ManagerError("a worker needs a non-empty argv of strings")
        cfg = self.config
        wid = self._next
        self._next += 1
        folder = os.path.join(cfg.work_parent, f"w{wid}")
        os.mkdir(folder, 0o700)
        if with_submission and cfg.submission:
            copy_tree(cfg.submission, folder)
        for name, fd in files:
            parts = safe_relative(name)
            parent = folder
            for part in parts[:-1]:
                parent = os.path.join(parent, part)
                if not os.path.isdir(parent) or os.path.islink(parent):
                    if os.path.lexists(parent):
                        os.unlink(parent)
                    os.mkdir(parent, 0o700)
            target = os.path.join(parent, parts[-1])
            if os.path.lexists(target) and not os.path.isdir(target):
                os.unlink(target)
            os.lseek(fd, 0, os.SEEK_SET)
            copy_fd_to(fd, target, 0o644)
        inside = cfg.inside_dir or folder
        os.mkdir(os.path.join(folder, ".tmp"), 0o700)
        if cfg.uid is not None and cfg.gid is not None:
            chown_tree(folder, cfg.uid, cfg.gid)
        command = list(argv)
        if command[0] == "python":
            command = python_argv(cfg.python, command[1:], prefix=cfg.prefix,
                                  exec_prefix=cfg.exec_prefix, site_dirs=cfg.site_dirs)
        worker_env = {**cfg.env, "HOME": inside, "TMPDIR": os.path.join(inside, ".tmp"),
                      "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
                      "PYTHONHASHSEED": "0", ENV_WORKER_DIR: inside, **dict(env)}
        if cfg.template:
            if "=" in command[0]:
                raise ManagerError(f"a worker command may not start with '{command[0]}'")
            launched = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in worker_env.items()
                                                if k and "=" not in k), *command]
            full: list[str] = []
            for item in cfg.template:
                if item == COMMAND_TOKEN:
                    full += launched
                else:
                    full.append(item.replace(WORKDIR_TOKEN, folder))
            for fd in cfg.template_fds:
                os.lseek(fd, 0, os.SEEK_SET)
        else:
            full = command
        switch = cfg.switch_user and cfg.uid is not None
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        ours = [stdin_w, stdout_r, stderr_r]
        for fd in ours:
            os.set_inheritable(fd, False)
        try:
            proc = subprocess.Popen(
                full, stdin=stdin_r, stdout=stdout_w, stderr=stderr_w, env=worker_env,
                cwd="/" if cfg.template else folder, close_fds=True,
                pass_fds=tuple(cfg.template_fds),
                preexec_fn=child_setup(uid=cfg.uid if switch else None,
                                       gid=cfg.gid if switch else None,
                                       unshare_net=cfg.unshare_net, limits=limits,
                                       nproc=self._nproc(limits)))
        except (OSError, subprocess.SubprocessError) as exc:
            for fd in ours:
                os.close(fd)
            raise ManagerError(f"cannot start the worker {command[0]}: {exc}") from None
        finally:
            for fd in (stdin_r, stdout_w, stderr_w):
                os.close(fd)
        self.workers[wid] = _Worker(wid, proc.pid, folder, time.monotonic() + limits.wall_s, proc)
        self.exit_codes[proc.pid] = None
        self.started += 1
        return wid, ours

    # watching ---------------------------------------------------------------------

    def _get(self, wid: Any) -> _Worker:
        worker = self.workers.get(wid) if isinstance(wid, int) else None
        if worker is None:
            raise ManagerError(f"no worker {wid!r}")
        return worker

    def status(self, wid: Any) -> dict[str, Any]:
        worker = self._get(wid)
        reap(self.exit_codes)
        code = self.exit_codes.get(worker.pid)
        return {"running": code is None, "exit_code": code, "killed_for": worker.killed_for}

    def enforce_deadlines(self) -> None:
        now = time.monotonic()
        for worker in self.workers.values():
            if self.exit_codes.get(worker.pid) is None and now > worker.deadline:
                worker.killed_for = "wall_time"
                self.kill(worker.wid)

    # killing ----------------------------------------------------------------------

    def kill(self, wid: Any) -> None:
        """Kill one worker and every process below it."""
        worker = self._get(wid)
        for _ in range(200):
            targets = descendants(worker.pid)
            if self.exit_codes.get(worker.pid) is None:
                targets.add(worker.pid)
            if not targets:
                break
            _kill(sorted(targets))
            time.sleep(0.005)
            reap(self.exit_codes)
        if worker.killed_for is None:
            worker.killed_for = "grader"

    def end_all(self, keep: Set[int] = frozenset(), also_uids: Set[int] = frozenset()) -> dict[str, Any]:
        """Kill every worker, every process of the worker uid (and of ``also_uids``)
        and every other descendant of this process except ``keep`` and their
        descendants; check that none is left.  Returns ``{"ok": bool, "left": [pids]}``."""
        me = os.getpid()
        uids = set(also_uids) | ({self.config.uid} if self.config.uid is not None else set())
        left: list[int] = []
        for attempt in range(400):
            table = process_table()
            spared: set[int] = set()
            for pid in keep:
                if pid in table:
                    spared |= {pid} | descendants(pid, table)
            targets = descendants(me, table) - spared
            targets |= {pid for pid, (_, owner) in table.items() if owner in uids}
            targets.discard(me)
            if not targets:
                left = []
                break
            left = sorted(targets)
            for uid in uids:
                kill_uid(uid)
            _kill(left)
            time.sleep(0.002 if attempt < 50 else 0.02)
            reap(self.exit_codes)
        reap(self.exit_codes)
        return {"ok": not left, "left": left}

    def fetch(self, wid: Any, name: str, max_bytes: int) -> int:
        """An open read-only descriptor of a regular file the (stopped) worker wrote."""
        worker = self._get(wid)
        reap(self.exit_codes)
        if self.exit_codes.get(worker.pid) is None:
            raise ManagerError("the worker is still running; wait for it or kill it first")
        fd = open_inside(worker.folder, name)
        size = os.fstat(fd).st_size
        if size > max_bytes:
            os.close(fd)
            raise ManagerError(f"'{name}' has {size} bytes, more than the {max_bytes} allowed")
        return fd
