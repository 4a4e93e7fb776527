"""A seccomp filter that keeps confined processes out of new user namespaces.

Inside a user namespace of its own a process is uid 0 with every capability
there: kernel code that checks only namespaced capabilities (mounting file
systems, netfilter, ...) opens up to it.  Docker's default seccomp profile
closes this; :func:`userns_filter` does the same for rgym's sandboxes, as a
classic BPF program (``struct sock_filter[]``) for this machine's architecture:

* ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` in their flags: ``EPERM``;
* ``setns`` (any namespace: the sandbox holds no capability to join one): ``EPERM``;
* ``clone3`` (its flags lie in memory, out of a filter's reach): ``ENOSYS``, so
  the C library falls back to ``clone``, as under Docker;
* x32 system calls, and every call made through another architecture's
  interface (32-bit x86 on x86-64): ``EPERM``.

Two ways in, both irrevocable and inherited by every descendant:

* bubblewrap's ``--seccomp FD`` (:class:`~rgym_core.isolation.BwrapCommand`
  passes it by default), for sandboxes that bwrap itself starts;
* :func:`exec_wrapper_argv`, a command prefix that installs the filter
  (``prctl(PR_SET_NO_NEW_PRIVS)``, then ``prctl(PR_SET_SECCOMP)``) and execs the
  command: for processes that join an existing sandbox with ``nsenter``, which
  do not descend from bwrap.  It is a ``python3 -I -S`` of this interpreter
  (about 15 ms per command) and needs no rgym module inside the sandbox.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import struct
import sys

#: ``unshare``/``clone`` flag that makes a new user namespace.
CLONE_NEWUSER = 0x10000000
EPERM = 1
ENOSYS = 38

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
# Offsets in struct seccomp_data: nr, arch, instruction pointer, args[6] (64-bit each;
# the low half of an argument comes first on these little-endian machines).
_NR, _ARCH, _ARG0 = 0, 4, 16

#: Per machine: audit architecture, and the numbers of clone, unshare, setns and clone3.
_ARCHES: dict[str, tuple[int, int, int, int, int]] = {
    "x86_64": (0xC000003E, 56, 272, 308, 435),
    "aarch64": (0xC00000B7, 220, 97, 268, 435),
}
_X32_BIT = 0x40000000


@functools.cache
def userns_filter(machine: str | None = None) -> bytes | None:
    """The filter (see the module docstring) for ``machine`` (default: this one,
    ``platform.machine()``), or None on an architecture it does not know."""
    name = machine or platform.machine()
    if name not in _ARCHES:
        logging.getLogger(__name__).warning(
            "rgym: no seccomp filter for %s: processes in sandboxes can create user namespaces",
            name)
        return None
    arch, clone, unshare, setns, clone3 = _ARCHES[name]
    # (code, jump-if-true label, jump-if-false label, k); labels resolve to offsets.
    program: list[tuple[int, str | None, str | None, int]] = [
        (_LD_W_ABS, None, None, _ARCH),
        (_JEQ_K, None, "deny", arch),
        (_LD_W_ABS, None, None, _NR),
    ]
    if name == "x86_64":
        program.append((_JGE_K, "deny", None, _X32_BIT))
    program += [
        (_JEQ_K, "nosys", None, clone3),
        (_JEQ_K, "deny", None, setns),
        (_JEQ_K, "flags", None, unshare),
        (_JEQ_K, "flags", "allow", clone),
    ]
    labels = {"flags": len(program)}
    program += [(_LD_W_ABS, None, None, _ARG0), (_JSET_K, "deny", "allow", CLONE_NEWUSER)]
    labels["allow"] = len(program)
    program.append((_RET_K, None, None, _RET_ALLOW))
    labels["deny"] = len(program)
    program.append((_RET_K, None, None, _RET_ERRNO | EPERM))
    labels["nosys"] = len(program)
    program.append((_RET_K, None, None, _RET_ERRNO | ENOSYS))
    out = b""
    for index, (code, true, false, k) in enumerate(program):
        jt = labels[true] - index - 1 if true else 0
        jf = labels[false] - index - 1 if false else 0
        out += struct.pack("<HBBI", code, jt, jf, k)
    return out


#: The exec wrapper's program (``python3 -I -S -c``): argv[1] the filter in hex,
#: argv[2] ``--``, then the command, found on ``PATH`` as ``env`` would (exit 127 when
#: missing, 126 when it cannot run, 126 when the filter cannot be installed), with
#: ``SIGPIPE`` and ``SIGXFSZ`` back to their default action.
WRAPPER_CODE = """\
import ctypes, os, signal, sys
for name in ("SIGPIPE", "SIGXFSZ"):  # Python ignores them; the command must not inherit that
    signal.signal(getattr(signal, name), signal.SIG_DFL)
prog = bytes.fromhex(sys.argv[1])
argv = sys.argv[3:]
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
libc = ctypes.CDLL(None, use_errno=True)
fprog = Fprog(len(prog) // 8, prog)
if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
    sys.stderr.write("rgym: cannot install the seccomp filter: %s\\n"
                     % os.strerror(ctypes.get_errno()))
    sys.exit(126)
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    sys.stderr.write("rgym: %s: %s\\n" % (argv[0], exc.strerror))
    sys.exit(127 if isinstance(exc, FileNotFoundError) else 126)
"""


def exec_wrapper_argv(python: str | None = None) -> list[str] | None:
    """A command prefix that runs the rest of the command line under
    :func:`userns_filter` (see the module docstring), or None on an architecture
    it does not know.  ``python``: the interpreter, as the process will see it
    (default: this one, resolved past a virtual environment's symlink)."""
    program = userns_filter()
    if program is None:
        return None
    interpreter = python or os.path.realpath(sys.executable)
    return [interpreter, "-I", "-S", "-c", WRAPPER_CODE, program.hex(), "--"]


__all__ = ["CLONE_NEWUSER", "WRAPPER_CODE", "exec_wrapper_argv", "userns_filter"]
