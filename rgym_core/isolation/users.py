"""A machine-wide pool of unprivileged uids for confined code.

Every confined episode or grader worker leases its own uid, so no two of them
share files, process limits or the right to signal each other::

    from rgym_core.isolation.users import lease

    with lease() as user:            # UidLease(uid=61007, gid=61007, privileged=True)
        subprocess.run([...], user=user.uid, group=user.gid, extra_groups=[])

The pool is ``61000-61999`` unless ``RGYM_UID_POOL`` says otherwise
(``START-END``, inclusive).  A lease holds an ``flock`` on ``<lock dir>/<uid>.lock``
for as long as it lives: held by another process (another runner on this
machine), the uid is skipped; a holder that crashed frees its uid because the
kernel drops its lock.  Uids that belong to a user in the passwd database are
never handed out.

Lock folder: ``/run/rgym/uids`` (root-only) when running as root, otherwise a
folder of the current user (``$XDG_RUNTIME_DIR/rgym/uids`` or
``~/.cache/rgym/uids``).  Uids are used raw (no passwd entry); bubblewrap
sandboxes get a generated ``/etc/passwd`` naming the uid (:func:`passwd_text`).

Only root can actually switch to a pooled uid.  For a normal user the lease is
still unique (``privileged`` is False) and serves as the uid *inside* a
bubblewrap user namespace, where it maps to the caller's own uid.

A new lease (as root) first kills any process still running under the uid and
removes what it left in ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (the leftovers of
a holder that crashed), so the new holder starts clean; :meth:`UidLease.release`
does the same when the holder is done, and marks the lock file so that the next
lease can skip that work.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pwd
import random
import shutil
import signal
import time
from pathlib import Path

from attrs import define, field

#: The default pool, overridden by ``RGYM_UID_POOL=START-END``.
DEFAULT_POOL = range(61000, 62000)
POOL_VAR = "RGYM_UID_POOL"
#: Folders whose leftovers a leased uid's cleanup removes (entries owned by the uid).
SHARED_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


#: What a lock file says once its holder released the uid with nothing left behind.
_CLEAN = b"released clean\n"


class PoolExhausted(RuntimeError):
    """Every uid of the pool is leased by a live holder."""


def pool_from_env() -> range:
    """The uid pool: ``RGYM_UID_POOL`` (``START-END``) or :data:`DEFAULT_POOL`."""
    text = os.environ.get(POOL_VAR, "").strip()
    if not text:
        return DEFAULT_POOL
    try:
        start_text, _, end_text = text.partition("-")
        start, end = int(start_text), int(end_text or start_text)
    except ValueError:
        raise ValueError(f"{POOL_VAR}={text!r}: expected START-END, e.g. 61000-61999") from None
    if not 1000 <= start <= end < 2**31:
        raise ValueError(f"{POOL_VAR}={text!r}: uids must satisfy 1000 <= START <= END")
    return range(start, end + 1)


def default_lock_dir() -> Path:
    """Where lease locks live: root-only ``/run/rgym/uids`` as root, else a
    folder of the current user."""
    if os.geteuid() == 0:
        return Path("/run/rgym/uids")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.stat(runtime).st_uid == os.geteuid():
        return Path(runtime) / "rgym" / "uids"
    return Path.home() / ".cache" / "rgym" / "uids"


def _private_dir(path: Path) -> None:
    """Create ``path`` (mode 0700) and check that this user owns it and that
    nobody else can write it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.geteuid() \
            or st.st_mode & 0o022:
        raise PermissionError(errno.EPERM, "lease folder is not a private folder of this user",
                              str(path))


@define
class UidLease:
    """One leased uid (and gid, equal to it); release it with :meth:`release`
    or by leaving its ``with`` block."""

    uid: int
    gid: int
    #: True when this process can switch to the uid (it runs as root).
    privileged: bool
    lock_path: Path
    _fd: int | None = field(default=None, repr=False)

    @property
    def active(self) -> bool:
        return self._fd is not None

    def release(self, *, clean: bool = True, known_clean: bool = False) -> None:
        """Kill what still runs under the uid, remove its leftovers in the shared
        temporary folders (as root, when ``clean``), then free the uid.  Pass
        ``known_clean`` when nothing of the uid can have outlived its holder (it only
        ran inside a pid namespace that is gone): the next lease then skips the
        sweep.  Safe to call twice."""
        if self._fd is None:
            return
        try:
            if clean and self.privileged:
                kill_uid_processes(self.uid)
                sweep_uid_files(self.uid)
                known_clean = True
            if known_clean:
                os.ftruncate(self._fd, 0)
                os.pwrite(self._fd, _CLEAN, 0)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> UidLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass


def lease(pool: range | None = None, *, lock_dir: Path | None = None,
          clean: bool = True) -> UidLease:
    """Lease a uid that no live holder on this machine has; raise
    :class:`PoolExhausted` when there is none.  As root (and with ``clean``),
    processes and temporary files a crashed holder left under it are removed
    first."""
    pool = pool if pool is not None else pool_from_env()
    folder = lock_dir if lock_dir is not None else default_lock_dir()
    _private_dir(folder)
    privileged = os.geteuid() == 0
    offset = random.randrange(len(pool))
    # First a uid under which nothing runs: a released uid's last processes may still
    # be exiting (a sandbox's pid 1 waits for its namespace to empty), and a grading
    # supervisor must not find them among its own.  Then, if every free uid has some,
    # one whose processes are killed here.
    busy: set[int] = set()
    for index in range(len(pool) * 2):
        uid = pool[(offset + index) % len(pool)]
        second_pass = index >= len(pool)
        if (second_pass and uid not in busy) or _is_named_user(uid):
            continue
        path = folder / f"{uid}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        if privileged and not second_pass and uid_processes(uid):
            busy.add(uid)
            os.close(fd)
            continue
        previous = os.pread(fd, 64, 0)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        held = UidLease(uid=uid, gid=uid, privileged=privileged, lock_path=path, fd=fd)
        if privileged and clean and previous != _CLEAN:
            try:
                kill_uid_processes(uid)
                sweep_uid_files(uid)
            except BaseException:
                held.release(clean=False)
                raise
        return held
    raise PoolExhausted(f"all {len(pool)} uids of the pool {pool.start}-{pool.stop - 1} are "
                        f"leased (lock files in {folder}); finish other episodes or widen "
                        f"{POOL_VAR}")


def _is_named_user(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


# -- cleaning up after a uid ----------------------------------------------------------


def uid_processes(uid: int) -> list[int]:
    """Live (not zombie) processes whose real uid is ``uid``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                status = f.read()
        except OSError:
            continue
        state = b""
        for line in status.splitlines():
            if line.startswith(b"State:"):
                state = line.split()[1]
            elif line.startswith(b"Uid:"):
                if int(line.split()[1]) == uid and state not in (b"Z", b"X"):
                    found.append(int(name))
                break
    return found


#: How long :func:`kill_uid_processes` waits for killed processes to finish exiting
#: (a namespace's pid 1 exits only once the kernel has reaped all of its namespace).
SETTLE_S = 5.0


def kill_uid_processes(uid: int, *, rounds: int = 50, settle_s: float = SETTLE_S) -> int:
    """Stop, then kill, every process of ``uid`` until none is left (a process may
    fork while we look), waiting up to ``settle_s`` seconds for killed ones still
    exiting; return how many were killed.  Needs root (or the uid)."""
    if uid == 0 or uid == os.getuid() and os.geteuid() != 0:
        raise ValueError("refusing to kill every process of the caller's own uid")
    killed: set[int] = set()
    deadline = time.monotonic() + settle_s
    done = 0
    while True:
        pids = [p for p in uid_processes(uid) if p != os.getpid()]
        if not pids:
            break
        done += 1
        if done > rounds:  # only processes already killed and still exiting are left
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    continue
                if sig == signal.SIGKILL:
                    killed.add(pid)
        time.sleep(0.002)
    return len(killed)


def sweep_uid_files(uid: int, folders: tuple[str, ...] = SHARED_TEMP_DIRS) -> list[str]:
    """Remove the entries of ``folders`` (top level) owned by ``uid``; return them.
    Symlinks are removed, never followed."""
    removed = []
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid != uid:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
                removed.append(entry.path)
            except OSError:
                pass
    return removed


def passwd_text(uid: int, gid: int, *, name: str = "agent", home: str = "/workspace") -> str:
    """A minimal ``/etc/passwd`` for a sandbox: root, ``name`` (the leased uid) and nobody."""
    lines = ["root:x:0:0:root:/root:/usr/sbin/nologin"]
    if uid != 0:
        lines.append(f"{name}:x:{uid}:{gid}:rgym agent:{home}:/bin/bash")
    lines.append("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin")
    return "\n".join(lines) + "\n"


def group_text(gid: int, *, name: str = "agent") -> str:
    """The ``/etc/group`` that goes with :func:`passwd_text`."""
    lines = ["root:x:0:"]
    if gid != 0:
        lines.append(f"{name}:x:{gid}:")
    lines.append("nogroup:x:65534:")
    return "\n".join(lines) + "\n"
