"""How the local sandbox confines one episode, and how it starts processes in it.

Three modes, chosen at start (``Confinement.mode``):

``bubblewrap`` (bwrap installed and usable; root or a normal user)
    A long-lived sandbox per episode: bubblewrap's mount, pid, network, IPC and
    UTS namespaces around a tiny *keeper* process (pid 1 of the namespace, immune
    to signals from inside it, reaping orphans).  The sandbox shows the workspace
    (``/workspace``), the datasets read-only, the interpreter's files and a few
    ``/etc`` entries, and private ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (size
    capped).  Every agent process (the shell, one-shot commands, file copies)
    joins the keeper's namespaces with ``nsenter``, then runs under the seccomp
    filter that refuses new user namespaces
    (:func:`rgym_core.isolation.seccomp.exec_wrapper_argv`); killing the keeper
    ends the namespace and every process in it.  As root, agent processes run as a uid
    leased from the machine-wide pool; as a normal user, as that user inside a
    user namespace.
``uid`` (root without bubblewrap)
    Agent processes run as a pooled uid (``setpriv``: no groups, no
    capabilities, no-new-privileges) on the host's file system.
``none`` (a normal user without bubblewrap)
    Agent processes run as the user running rgym.

In every mode rlimits apply (:class:`rgym_core.isolation.Limits`): processes
(per uid, so per episode where the uid is the episode's own), file size (the
workspace quota) and, where the task or ``--memory`` asks, memory per process.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rgym_core.isolation import (
    BwrapCommand,
    Limits,
    UidLease,
    bwrap_problem,
    interpreter_paths,
    lease,
)
from rgym_core.isolation.bubblewrap import drop_privileges_argv
from rgym_core.isolation.seccomp import exec_wrapper_argv
from rgym_core.isolation.users import kill_uid_processes, uid_processes
from rgym_core.isolation.warn import warn_once
from rgym_core.sandbox import SandboxConfig, SandboxError
from rgym_core.sandboxes.local import procs
from rgym_core.sandboxes.local.inotify import Inotify

MODE_BUBBLEWRAP = "bubblewrap"
MODE_UID = "uid"
MODE_NONE = "none"

#: The workspace as agent processes see it under bubblewrap.
SANDBOX_WORKSPACE = "/workspace"
#: Where the sandbox's own files (status folder, shell binary) appear under bubblewrap.
RGYM_DIR = "/.rgym"
#: Set in every agent process; cleanup without namespaces finds strays by it.
SANDBOX_ID_VAR = "RGYM_SANDBOX_ID"
#: Default process limit when the task and the command line set none.
DEFAULT_PIDS = 2048
MIB = 1 << 20

#: pid 1 of a bubblewrap sandbox (a bash: it starts in a few milliseconds): says it
#: is ready on fd $2 (the sandbox is then set up), reaps orphans (bash's SIGCHLD
#: handler reaps every child, adopted ones included), and exits when the runner
#: closes its control pipe (fd $1).  As pid 1 it cannot be signalled from inside.
KEEPER = ('trap "" INT TERM HUP QUIT USR1 USR2 PIPE; echo ready >&"$2"; eval "exec $2>&-"; '
          'while :; do read -r -t 0.2 -u "$1" _; rc=$?; '
          'if [ $rc -le 128 ]; then [ $rc -eq 0 ] || exit 0; fi; done')

@functools.cache
def installed_plugin_paths() -> tuple[str, ...]:
    """The folders (or module files) of every installed rgym plugin distribution
    (entry-point group ``rgym``: task packs with their graders and answers, tools,
    agents, the core with its demo task).  Under bubblewrap those that lie inside
    the interpreter's folders (packs installed with ``pip install``, not editable)
    are hidden behind empty folders: agent code needs none of them."""
    from importlib.metadata import entry_points

    tops = {ep.value.split(":")[0].split(".")[0] for ep in entry_points(group="rgym")}
    places: set[str] = set()
    for top in sorted(tops):
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError, AttributeError):
            continue
        if spec is None:
            continue
        found = list(spec.submodule_search_locations or [])
        if not found and spec.origin and os.path.isabs(spec.origin):
            found = [spec.origin]
        places.update(os.path.realpath(p) for p in found if os.path.exists(p))
    return tuple(sorted(places))


def _hidden_in(roots: list[str]) -> list[str]:
    """The plugin paths inside ``roots`` (bound into the sandbox), outermost only."""
    out: list[str] = []
    for path in installed_plugin_paths():
        inside = any(path.startswith(r.rstrip("/") + "/") for r in roots)
        if inside and not any(path.startswith(o + "/") for o in out):
            out.append(path)
    return out


def _ns_id(pid: int, name: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{name}")
    except OSError:
        return None


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _truthy(value: Any) -> bool | None:
    """True/False for yes/no-like option values, None for "auto"."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("auto", ""):
        return None
    return text in ("1", "true", "yes", "on")


class Confinement:
    """One episode's confinement: mode, agent uid, limits, and the way to start
    agent processes.  :meth:`prepare` before laying out the workspace,
    :meth:`start` once it is laid out, :meth:`close` at the end."""

    def __init__(self, config: SandboxConfig, sandbox_id: str) -> None:
        self.config = config
        self.sandbox_id = sandbox_id
        self.root_user = os.geteuid() == 0
        options = config.options
        wanted = _truthy(options.get("bubblewrap", "auto"))
        problem = bwrap_problem() if wanted is not False else \
            "bubblewrap is turned off (sandbox option bubblewrap=false)"
        if problem is not None and wanted is True:
            raise SandboxError(f"rgym/local: bubblewrap was requested but {problem}",
                               reason="bubblewrap")
        self.bwrap_problem = problem
        if problem is None:
            self.mode = MODE_BUBBLEWRAP
        else:
            self.mode = MODE_UID if self.root_user else MODE_NONE
        self.lease: UidLease | None = None
        self.uid = os.getuid()
        self.gid = os.getgid()
        res = config.effective
        pids = res.pids or int(options.get("pids_default", DEFAULT_PIDS))
        self.pids_limit = pids
        self.limits = Limits(processes=pids, file_size_bytes=res.disk_mb * MIB,
                             memory_bytes=res.memory_mb * MIB if res.memory_mb else None)
        self.host_root: Path | None = None
        self.host_workspace: Path | None = None
        self.host_status: Path | None = None
        self.status_watch: Inotify | None = None
        self.host_shell: str | None = None
        self.keeper: subprocess.Popen[bytes] | None = None
        self.keeper_pid: int | None = None
        self.pid_ns: int | None = None
        self._ns_flags: list[str] = []
        self._ended_cleanly = False
        self._control_fd: int | None = None
        self._errors: Any = None
        self.network = bool(config.effective.network)

    # -- facts --------------------------------------------------------------------

    @property
    def workspace(self) -> str:
        """The workspace path agent processes see."""
        if self.mode == MODE_BUBBLEWRAP:
            return SANDBOX_WORKSPACE
        assert self.host_workspace is not None
        return str(self.host_workspace)

    @property
    def status_dir(self) -> str:
        """The shell's status folder as agent processes see it."""
        if self.mode == MODE_BUBBLEWRAP:
            return f"{RGYM_DIR}/status"
        assert self.host_status is not None
        return str(self.host_status)

    @property
    def shell_binary(self) -> str:
        """The bash the persistent shell runs (an execute-only copy where that makes
        the shell unreadable to its own children)."""
        if self.mode == MODE_BUBBLEWRAP:
            return f"{RGYM_DIR}/bash"
        assert self.host_shell is not None
        return self.host_shell

    @property
    def separate_user(self) -> bool:
        """True when agent processes run as a uid other than the runner's."""
        return self.root_user

    def user_text(self) -> str:
        if self.mode == MODE_BUBBLEWRAP and self.root_user:
            return f"uid {self.uid} (leased for this episode)"
        if self.mode == MODE_BUBBLEWRAP:
            return f"uid {self.uid} inside a user namespace (your own user outside)"
        if self.mode == MODE_UID:
            return f"uid {self.uid} (leased for this episode)"
        return f"{self._own_name()} (the user running rgym)"

    @staticmethod
    def _own_name() -> str:
        import pwd

        try:
            return pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            return f"uid {os.getuid()}"

    def warnings(self) -> list[str]:
        """What this mode cannot protect (one line each), for the start-up warning."""
        if self.mode == MODE_BUBBLEWRAP:
            return []
        why = self.bwrap_problem or "bubblewrap is not available"
        if self.mode == MODE_UID:
            return [f"rgym/local: {why}; agent commands run as a pooled uid with rlimits, but "
                    "without bubblewrap they can read every file of this machine that other "
                    "users may read (pack checkouts, --data-dir, caches), list and see other "
                    "processes, use the network, and share /tmp, /var/tmp and /dev/shm with "
                    "the host (their leftovers are removed at the end of the episode); install "
                    "bubblewrap for full isolation"]
        return [f"rgym/local: {why}; agent commands run as your own user: they can read and "
                "change everything you can (rgym itself, run directories, grader files, other "
                "episodes), signal your processes, use the network and forge the shell's "
                "reports; only rlimits apply; install bubblewrap or use --sandbox docker"]

    # -- lifecycle ----------------------------------------------------------------

    def prepare(self, host_root: Path) -> None:
        """Lease the uid and create the host folders under ``host_root``."""
        self.host_root = host_root
        if self.mode in (MODE_BUBBLEWRAP, MODE_UID):
            # As root, a real host uid; as a normal user under bubblewrap, the uid
            # inside the user namespace (the caller's own uid outside).
            self.lease = lease()
            self.uid, self.gid = self.lease.uid, self.lease.gid
        os.chmod(host_root, 0o711 if self.mode == MODE_UID else 0o700)
        ws = host_root / "workspace"
        ws.mkdir(mode=0o700)
        self.host_workspace = ws
        # On a tmpfs when there is one: a report is a file created and removed per
        # command, which costs a journal write on a disk file system.
        shm = Path("/dev/shm")
        if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
            status = Path(tempfile.mkdtemp(prefix=f"rgym-status-{self.sandbox_id}-", dir=shm))
        else:
            status = host_root / "status"
            status.mkdir()
        # Watched from now on (watching needs read permission, which goes next), then
        # writable by the agent (it creates its report there) but not listable; as
        # root, writable by the agent's group only (not by other episodes).
        self.status_watch = Inotify(str(status))
        if self.root_user:
            os.chown(status, 0, self.gid)
            os.chmod(status, 0o1330)
        else:
            os.chmod(status, 0o1333)
        self.host_status = status
        if self.mode == MODE_NONE:
            self.host_shell = shutil.which("bash") or "/bin/bash"
        else:
            # An execute-only copy: a process exec'ed from a file it cannot read is
            # not dumpable, so the agent's own processes cannot read its memory.
            source = os.path.realpath(shutil.which("bash") or "/bin/bash")
            target = host_root / "bash"
            shutil.copyfile(source, target)
            os.chmod(target, 0o111)
            self.host_shell = str(target)
        if self.mode == MODE_NONE and self.limits.processes is not None:
            # RLIMIT_NPROC counts every process of this user: leave room for the others.
            own = len(uid_processes(os.getuid()))
            self.limits = Limits(processes=own + self.limits.processes,
                                 file_size_bytes=self.limits.file_size_bytes,
                                 memory_bytes=self.limits.memory_bytes)

    def start(self, env: Mapping[str, str], datasets: Mapping[str, Path]) -> None:
        """Start the sandbox (bubblewrap: the keeper and its namespaces)."""
        for line in self.warnings():
            warn_once(line)
        if self.mode != MODE_BUBBLEWRAP:
            return
        assert self.host_workspace is not None and self.host_status is not None
        assert self.host_root is not None and self.host_shell is not None
        size = self.config.effective.disk_mb * MIB
        info_r, info_w = os.pipe()
        control_r, control_w = os.pipe()
        ready_r, ready_w = os.pipe()
        # Agent processes join the sandbox with nsenter: no nested user namespace
        # (bwrap nests one for --disable-userns and for --dev).
        cmd = BwrapCommand(uid=self.uid, gid=self.gid, network=self.network, env=dict(env),
                           chdir=SANDBOX_WORKSPACE, as_pid_1=True, info_fd=info_w,
                           disable_userns=False, dev=False)
        cmd.minimal_dev()
        gpus = self.config.effective.requested_gpus
        if gpus is None or gpus.strip() not in ("0", ""):
            # GPUs (NVIDIA's device nodes; DRI render nodes): bound when present.
            for node in sorted(glob.glob("/dev/nvidia*")) + (["/dev/dri"] if
                                                              os.path.isdir("/dev/dri") else []):
                cmd.dev_bind(node)
        for folder in ("/tmp", "/var/tmp", "/dev/shm"):  # first: a venv under /tmp stays visible
            cmd.tmpfs(folder, size_bytes=size)
        cmd.system()
        for path in _hidden_in(["/usr", *(os.path.realpath(p) for p in interpreter_paths())]):
            if os.path.isdir(path):  # an installed pack: graders, answers (see above)
                cmd.tmpfs(path, size_bytes=4096, mode=0o555).remount_ro(path)
            else:
                cmd.file(path, b"", mode=0o444)
        # CPU topology and device information that numerical libraries read.
        cmd.ro_bind("/sys", missing_ok=True)
        cmd.bind(self.host_workspace, SANDBOX_WORKSPACE)
        for mount, public in datasets.items():
            if public == Path("/dev/null/rgym-cover"):  # layout.COVER: a private part
                dest = f"{SANDBOX_WORKSPACE}/{mount}"
                cmd.tmpfs(dest, size_bytes=4096, mode=0o555).remount_ro(dest)
            else:
                cmd.ro_bind(public, f"{SANDBOX_WORKSPACE}/{mount}")
        cmd.dir(RGYM_DIR, mode=0o755)
        cmd.bind(self.host_status, f"{RGYM_DIR}/status")
        cmd.ro_bind(self.host_shell, f"{RGYM_DIR}/bash")
        cmd.remount_ro("/dev")
        cmd.remount_ro("/")
        # The keeper forks nothing: the limits go on each agent process (see command()).
        keeper = ["/bin/bash", "--noprofile", "--norc", "-c", KEEPER, "rgym-keeper",
                  str(control_r), str(ready_w)]
        self._errors = tempfile.TemporaryFile()
        try:
            with cmd.prepare(keeper) as prepared:
                self.keeper = subprocess.Popen(
                    prepared.argv, pass_fds=(*prepared.pass_fds, info_w, control_r, ready_w),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._errors,
                    start_new_session=True)
        except BaseException:
            for fd in (info_r, ready_r, control_w):
                os.close(fd)
            raise
        finally:
            for fd in (info_w, control_r, ready_w):
                os.close(fd)
        self._control_fd = control_w
        try:
            info = json.loads(self._read_until(info_r, lambda data: _json_or_none(data)))
            self._read_until(ready_r, lambda data: data.startswith(b"ready"))
        finally:
            os.close(info_r)
            os.close(ready_r)
        self.keeper_pid = int(info["child-pid"])
        self.pid_ns = info.get("pid-namespace")
        # Join the namespaces the sandbox has of its own (not the shared network, nor a
        # cgroup namespace bwrap could not create).
        flags = {"mnt": "-m", "pid": "-p", "net": "-n", "ipc": "-i", "uts": "-u",
                 "cgroup": "-C"}
        self._ns_flags = [flag for name, flag in flags.items()
                          if _ns_id(self.keeper_pid, name) != _ns_id(os.getpid(), name)]

    def _read_until(self, fd: int, complete: Any) -> bytes:
        """Read ``fd`` until ``complete(data)`` holds; a clear error if the sandbox
        ends or does not get there within a minute."""
        assert self.keeper is not None
        data = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                chunk = os.read(fd, 65536)
                data += chunk
                if complete(data):
                    return data
                if not chunk:
                    break
            elif self.keeper.poll() is not None:
                break
        self.keeper.kill()
        self.keeper.wait()
        raise SandboxError(f"rgym/local: bubblewrap could not start the sandbox: "
                           f"{self._error_text() or 'no reason given'}", reason="bubblewrap")

    def _error_text(self) -> str:
        if self._errors is None:
            return ""
        self._errors.seek(0)
        return self._errors.read().decode("utf-8", "replace").strip()[-2000:]

    def alive(self) -> bool:
        """False once a bubblewrap sandbox has ended (its keeper is gone)."""
        if self.mode != MODE_BUBBLEWRAP:
            return True
        return self.keeper is not None and self.keeper.poll() is None

    # -- starting agent processes ---------------------------------------------------

    def command(self, argv: Sequence[str], *, cwd: str | None = None) -> list[str]:
        """The host command line that runs ``argv`` as the agent, inside the
        sandbox, under the episode's limits, in ``cwd`` (entered as the agent)."""
        inner = list(argv)
        if cwd is not None:
            inner = ["/bin/bash", "-c", 'cd -- "$1" || exit 125; shift; exec "$@"', "rgym-cd",
                     cwd, *inner]
        limits = self.limits.prlimit_argv()
        if self.mode == MODE_BUBBLEWRAP:
            assert self.keeper_pid is not None
            setpriv = shutil.which("setpriv") or "setpriv"
            nsenter = shutil.which("nsenter") or "nsenter"
            enter = [nsenter, "-t", str(self.keeper_pid), *self._ns_flags, "-r", "-w"]
            if self.root_user:
                enter += ["-S", str(self.uid), "-G", str(self.gid), "--"]
            else:
                # Joining its own user namespace gives nsenter every capability there
                # until it execs: let a fixed program be that exec (the seccomp wrapper,
                # else env), so the command (the shell: made non-dumpable by its
                # unreadable file) starts without any.
                enter += ["-U", "--preserve-credentials", "--"]
            # nsenter's children do not descend from bwrap (whose --seccomp covers the
            # keeper only): the wrapper puts them under the same filter, inside.
            wrapper = exec_wrapper_argv()
            if wrapper is None:
                wrapper = [] if self.root_user else [shutil.which("env") or "env", "--"]
            return [*limits, setpriv, "--no-new-privs", "--", *enter, *wrapper, *inner]
        if self.mode == MODE_UID:
            # The same filter on nested user namespaces, after the privileges are dropped.
            wrapper = exec_wrapper_argv() or []
            return [*limits, *drop_privileges_argv(self.uid, self.gid), *wrapper, *inner]
        return [*limits, *inner]

    def popen(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None = None,
              **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start ``argv`` as the agent (see :meth:`command`); ``kwargs`` go to Popen."""
        if self.mode == MODE_NONE:
            return subprocess.Popen(self.command(argv), env=dict(env),
                                    cwd=cwd or self.workspace, **kwargs)
        if cwd is None or cwd == self.workspace:
            # The workspace is the agent's own: entering it first grants nothing.
            # (Under bubblewrap nsenter starts in the keeper's folder, the workspace.)
            start = "/" if self.mode == MODE_BUBBLEWRAP else self.workspace
            return subprocess.Popen(self.command(argv), env=dict(env), cwd=start, **kwargs)
        return subprocess.Popen(self.command(argv, cwd=cwd), env=dict(env), cwd="/", **kwargs)

    def target_pid(self, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
        """The pid of the agent process itself (under bubblewrap, ``nsenter``'s child)."""
        if self.mode != MODE_BUBBLEWRAP:
            return proc.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            kids = procs.children(proc.pid)
            if kids:
                return kids[0]
            if proc.poll() is not None:
                break
            time.sleep(0.0005)
        raise SandboxError("rgym/local: the shell did not start inside the sandbox",
                           reason="shell")

    def in_sandbox(self, pid: int) -> bool:
        """True when ``pid`` is one of this episode's agent processes."""
        if self.mode == MODE_BUBBLEWRAP:
            return self.pid_ns is not None and procs.pid_namespace(pid) == self.pid_ns \
                and pid != self.keeper_pid
        if self.mode == MODE_UID:
            return procs.uid_of(pid) == self.uid
        return procs.environ_has(pid, procs.needle(SANDBOX_ID_VAR, self.sandbox_id))

    # -- the end --------------------------------------------------------------------

    def kill_all(self, extra_sessions: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        """Kill every process of the episode."""
        if self.mode == MODE_BUBBLEWRAP:
            if self.keeper_pid is not None:
                procs.kill(self.keeper_pid)  # pid 1: the whole namespace goes with it
            if self.keeper is not None and self.keeper.poll() is None:
                procs.kill(self.keeper.pid)  # bwrap itself: nothing left to wait for
            if self._control_fd is not None:
                os.close(self._control_fd)
                self._control_fd = None
            if self.keeper is not None:
                try:
                    self.keeper.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.keeper.kill()
                    self.keeper.wait()
            self._ended_cleanly = self.keeper is not None and self.keeper.poll() is not None
        elif self.mode == MODE_UID:
            kill_uid_processes(self.uid)
        else:
            needle = procs.needle(SANDBOX_ID_VAR, self.sandbox_id)
            uid = os.getuid()
            procs.kill_matching(lambda p: procs.environ_has(p, needle)
                                or (procs.session_of(p) in extra_sessions
                                    and procs.uid_of(p) == uid))

    def close(self) -> None:
        """Release the uid (as root this also sweeps its leftovers in the shared
        temporary folders), remove the status folder and close the control files."""
        if self.status_watch is not None:
            self.status_watch.close()
            self.status_watch = None
        if self.host_status is not None and self.host_root is not None \
                and not self.host_status.is_relative_to(self.host_root):
            shutil.rmtree(self.host_status, ignore_errors=True)
        if self._control_fd is not None:
            os.close(self._control_fd)
            self._control_fd = None
        if self._errors is not None:
            self._errors.close()
            self._errors = None
        if self.lease is not None:
            if self.mode == MODE_BUBBLEWRAP:
                # Its processes lived only in the pid namespace (gone), its files only
                # in the workspace and the sandbox's own tmpfs (gone).
                self.lease.release(clean=False, known_clean=self._ended_cleanly)
            else:
                self.lease.release()
            self.lease = None
