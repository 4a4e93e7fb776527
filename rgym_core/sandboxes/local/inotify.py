"""A minimal inotify watcher (ctypes), for the shell's status folder."""

from __future__ import annotations

import ctypes
import errno
import os
import struct

IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_Q_OVERFLOW = 0x00004000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_HEADER = struct.Struct("iIII")

_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


class Inotify:
    """Watches one folder for names created or moved into it."""

    def __init__(self, folder: str) -> None:
        lib = _lib()
        fd = lib.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"inotify_init1: {os.strerror(code)}")
        self.fd: int | None = fd
        wd = lib.inotify_add_watch(fd, os.fsencode(folder), IN_CREATE | IN_MOVED_TO)
        if wd < 0:
            code = ctypes.get_errno()
            os.close(fd)
            self.fd = None
            raise OSError(code, f"inotify_add_watch: {os.strerror(code)}", folder)
        self.folder = folder

    def read(self) -> tuple[list[str], bool]:
        """Names that appeared since the last call (non-blocking), and whether the
        kernel's queue overflowed (some names were lost: list the folder)."""
        assert self.fd is not None
        names: list[str] = []
        overflow = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return names, overflow
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            pos = 0
            while pos + _HEADER.size <= len(data):
                _wd, mask, _cookie, length = _HEADER.unpack_from(data, pos)
                raw = data[pos + _HEADER.size:pos + _HEADER.size + length]
                pos += _HEADER.size + length
                if mask & IN_Q_OVERFLOW:
                    overflow = True
                name = raw.split(b"\0", 1)[0]
                if name:
                    names.append(os.fsdecode(name))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
