"""Moving files in and out of a local episode, always as the agent would.

Reads, writes and archives run as agent processes inside the sandbox (so a
symbolic link the agent planted resolves in the agent's view, with the agent's
rights), and everything that comes out passes through
:mod:`rgym_core.workspace_export`.
"""

from __future__ import annotations

import errno
import logging
import os
import posixpath
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from rgym_core.sandboxes.local.confinement import MODE_NONE, SANDBOX_ID_VAR, Confinement
from rgym_core.sandboxes.local.procs import exit_code
from rgym_core.workspace_export import ExportReport, extract_archive

log = logging.getLogger("rgym_core.sandboxes.local")
_READ_SIZE = 1 << 16
#: Longest a copy out of the sandbox may take before its archiver is killed.
EXPORT_TIMEOUT_S = 1800.0
#: GNU tar options for archives of agent files: holes of sparse files stay holes,
#: no owner names, no extended attributes.
TAR_CREATE = ["tar", "--sparse", "--numeric-owner", "--no-xattrs", "--no-acls",
              "--no-selinux", "-cf", "-"]

_ERRORS = (("No such file", FileNotFoundError, errno.ENOENT),
           ("Permission denied", PermissionError, errno.EACCES),
           ("Operation not permitted", PermissionError, errno.EPERM),
           ("Read-only file system", PermissionError, errno.EROFS),
           ("Is a directory", IsADirectoryError, errno.EISDIR),
           ("Not a directory", NotADirectoryError, errno.ENOTDIR))


def os_error(message: str, path: str) -> OSError:
    """The exception Python would raise for a tool's error ``message`` about ``path``."""
    for words, cls, code in _ERRORS:
        if words in message:
            return cls(code, os.strerror(code), path)
    return OSError(errno.EIO, message.strip() or "failed", path)


class AgentFiles:
    """File access for one episode, through agent processes."""

    def __init__(self, conf: Confinement, sandbox_id: str, workspace: str) -> None:
        self.conf = conf
        self.workspace = workspace
        self.env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", SANDBOX_ID_VAR: sandbox_id}

    def resolve(self, path: str) -> str:
        return path if posixpath.isabs(path) else posixpath.join(self.workspace, path)

    def _run(self, argv: list[str], data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        proc = self.conf.popen(argv, env=self.env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate(data)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    # -- single files -------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        full = self.resolve(path)
        if self.conf.mode == MODE_NONE:
            with open(full, "rb") as f:
                return f.read()
        proc = self._run(["cat", "--", full])
        if proc.returncode != 0:
            raise os_error(proc.stderr.decode("utf-8", "replace"), full)
        return proc.stdout

    def write(self, path: str, data: bytes | str) -> None:
        full = self.resolve(path)
        payload = data.encode() if isinstance(data, str) else data
        if self.conf.mode == MODE_NONE:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(payload)
            return
        proc = self._run(["bash", "-c", 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"',
                          "write_file", full], payload)
        if proc.returncode != 0:
            raise os_error(proc.stderr.decode("utf-8", "replace"), full)

    # -- trees ------------------------------------------------------------------------

    def copy_in(self, src: Path, dest: str) -> None:
        """Copy host ``src`` to sandbox ``dest`` (the copy's own name; a folder merges
        into an existing one).  The agent unpacks it, so it owns the copy and
        symlinks in the workspace cannot redirect it."""
        src = Path(src)
        if not src.exists() and not src.is_symlink():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(src))
        full = self.resolve(dest).rstrip("/")
        parent, name = posixpath.split(full)
        with tempfile.TemporaryFile() as errors:
            proc = self.conf.popen(
                ["bash", "-c", 'mkdir -p -- "$1" && exec tar --no-same-owner -xf - -C "$1"',
                 "copy_in", parent or "/"],
                env=self.env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors)
            assert proc.stdin is not None
            try:
                with tarfile.open(fileobj=proc.stdin, mode="w|") as tar:
                    tar.add(src, arcname=name)
            except BrokenPipeError:
                pass  # tar stopped reading: after the end marker (fine), or it failed
            finally:
                try:
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
            returncode = proc.wait()  # only tar's own status tells a failure
            if returncode != 0:
                errors.seek(0)
                message = errors.read().decode("utf-8", "replace")
                raise os_error(message or f"tar ended with exit status {exit_code(returncode)}",
                               full)

    def copy_out(self, src: str, dest: Path, *, quota_bytes: int | None) -> ExportReport:
        """Copy sandbox ``src`` (file or folder) to host ``dest`` (the copy's own
        name), under the rules of :mod:`rgym_core.workspace_export`.  An existing
        ``dest`` is replaced."""
        full = self.resolve(src).rstrip("/") or "/"
        parent, name = posixpath.split(full)
        dest = Path(dest)
        if name in ("", ".", "..") or ".." in full.split("/"):
            raise OSError(errno.EINVAL, "copy_out needs a path that names a file or folder, "
                          "without '.' or '..'", src)
        if dest.name in ("", ".", "..") or ".." in dest.parts:
            raise OSError(errno.EINVAL, "copy_out needs a destination without '..'", str(dest))
        if dest.is_dir() and not dest.is_symlink():
            import shutil

            shutil.rmtree(dest)
        elif dest.exists() or dest.is_symlink():
            dest.unlink()
        return self._archive([*TAR_CREATE, "-C", parent or "/", "--", name], dest,
                             root=name, quota_bytes=quota_bytes, sandbox_root=full, path=full)

    def export(self, dest: Path, *, exclude: Sequence[str], include: Sequence[str] | None,
               quota_bytes: int | None, timeout: float | None) -> ExportReport:
        """The whole workspace into the new folder ``dest``.  Under bubblewrap the
        read-only dataset mounts are other file systems and are skipped."""
        argv = [*TAR_CREATE, "--one-file-system", "-C", self.workspace]
        plain = [p for p in exclude if p and not any(c in p for c in "*?[]/\\")]
        if plain:
            argv.append("--anchored")
            argv += [f"--exclude=./{p}" for p in plain]
        argv += ["--", "."]
        return self._archive(argv, Path(dest), root=".", exclude=exclude, include=include,
                             quota_bytes=quota_bytes, sandbox_root=self.workspace,
                             path=self.workspace, timeout=timeout)

    def _archive(self, argv: list[str], dest: Path, *, root: str, quota_bytes: int | None,
                 sandbox_root: str, path: str, exclude: Sequence[str] = (),
                 include: Sequence[str] | None = None,
                 timeout: float | None = EXPORT_TIMEOUT_S) -> ExportReport:
        with tempfile.TemporaryFile() as errors:
            proc = self.conf.popen(argv, env=self.env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=errors)
            assert proc.stdout is not None
            watchdog = None
            expired = threading.Event()
            if timeout is not None:
                def expire() -> None:
                    expired.set()
                    proc.kill()

                watchdog = threading.Timer(timeout, expire)
                watchdog.daemon = True
                watchdog.start()
            failure: BaseException | None = None
            report = None
            try:
                report = extract_archive(proc.stdout, dest, root=root, exclude=exclude,
                                         include=include, quota_bytes=quota_bytes,
                                         sandbox_root=sandbox_root)
                # tarfile stops at the end-of-archive marker; tar still writes the rest
                # of its last record: read to the end, or it dies of SIGPIPE.
                while proc.stdout.read(_READ_SIZE):
                    pass
            except BaseException as exc:  # noqa: BLE001 - reported below, with tar's words
                failure = exc
            finally:
                if failure is not None and proc.poll() is None:
                    proc.kill()
                proc.stdout.close()
                returncode = proc.wait()
                if watchdog is not None:
                    watchdog.cancel()
            errors.seek(0)
            message = errors.read().decode("utf-8", "replace").strip()
        if failure is not None:
            if isinstance(failure, FileNotFoundError) and message:
                raise os_error(message, path) from None
            if expired.is_set():
                raise OSError(errno.ETIMEDOUT, f"copying out took longer than {timeout:g} s",
                              path) from None
            raise failure
        assert report is not None
        # Exit 1: a file changed while tar read it (a job still writing its log):
        # every file was copied, that one as it was at the time.
        if returncode == 1:
            log.warning("rgym/local: %s changed while it was copied out: %s", path, message)
        elif returncode != 0:
            # Files the agent made unreadable are left out; the rest is whole.
            for line in message.splitlines():
                if "Cannot open" in line or "Cannot stat" in line or "Cannot read" in line:
                    from rgym_core.workspace_export import DroppedEntry

                    report.dropped.append(DroppedEntry(line.removeprefix("tar: ")[:200],
                                                       "unreadable"))
                elif line.strip() and "Exiting with failure" not in line:
                    log.warning("rgym/local: copying %s out: %s", path, line)
        return report
