"""Resource limits (rlimits) for confined processes.

A :class:`Limits` value says what a process and its descendants may use; it is
applied at spawn time by prefixing the command with util-linux ``prlimit``
(:meth:`Limits.prlimit_argv`, atomic: the limits are in place before the first
instruction of the program runs), or to a running process with
:meth:`Limits.apply` (``prlimit(2)``).

Each limit is a Linux rlimit, so it is *per process* except ``processes``,
which the kernel counts per user (per user namespace and uid): give every
confined episode its own uid (:mod:`rgym_core.isolation.users`) and
``processes`` bounds that episode as a whole, which is what stops a fork bomb.
Root is exempt from ``processes``; confined code never runs as root.
"""

from __future__ import annotations

import resource
import shutil

from attrs import define, field

MIB = 1 << 20


def _positive_or_none(_instance: object, attribute: object, value: int | None) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{getattr(attribute, 'name', 'limit')} must be >= 0, got {value}")


@define(frozen=True)
class Limits:
    """rlimits for a confined process tree; ``None`` leaves a limit as inherited.

    * ``processes``: ``RLIMIT_NPROC``, processes and threads of the process's uid.
    * ``open_files``: ``RLIMIT_NOFILE``.
    * ``file_size_bytes``: ``RLIMIT_FSIZE``, the largest file a process may write
      (a write past it fails with ``EFBIG`` and sends ``SIGXFSZ``).
    * ``memory_bytes``: ``RLIMIT_DATA``, the private writable memory of one process
      (heap and anonymous mappings, what "memory use" means for Python, NumPy and
      PyTorch; address-space reservations that are never written do not count).
    * ``address_space_bytes``: ``RLIMIT_AS``, the whole virtual address space (breaks
      programs that reserve large ranges; prefer ``memory_bytes``).
    * ``cpu_seconds``: ``RLIMIT_CPU``, CPU time of one process.
    * ``core_bytes``: ``RLIMIT_CORE``; 0 (the default) writes no core files.
    """

    processes: int | None = field(default=None, validator=_positive_or_none)
    open_files: int | None = field(default=None, validator=_positive_or_none)
    file_size_bytes: int | None = field(default=None, validator=_positive_or_none)
    memory_bytes: int | None = field(default=None, validator=_positive_or_none)
    address_space_bytes: int | None = field(default=None, validator=_positive_or_none)
    cpu_seconds: int | None = field(default=None, validator=_positive_or_none)
    core_bytes: int | None = field(default=0, validator=_positive_or_none)

    def rlimits(self) -> dict[int, int]:
        """``{resource.RLIMIT_*: value}`` for every limit that is set (soft = hard)."""
        pairs = ((resource.RLIMIT_NPROC, self.processes), (resource.RLIMIT_NOFILE, self.open_files),
                 (resource.RLIMIT_FSIZE, self.file_size_bytes),
                 (resource.RLIMIT_DATA, self.memory_bytes),
                 (resource.RLIMIT_AS, self.address_space_bytes),
                 (resource.RLIMIT_CPU, self.cpu_seconds), (resource.RLIMIT_CORE, self.core_bytes))
        return {res: value for res, value in pairs if value is not None}

    def prlimit_argv(self) -> list[str]:
        """A command prefix that starts the rest of the command line under these
        limits (``prlimit --nproc=N:N ... --``); empty when nothing is set."""
        flags = {resource.RLIMIT_NPROC: "nproc", resource.RLIMIT_NOFILE: "nofile",
                 resource.RLIMIT_FSIZE: "fsize", resource.RLIMIT_DATA: "data",
                 resource.RLIMIT_AS: "as", resource.RLIMIT_CPU: "cpu",
                 resource.RLIMIT_CORE: "core"}
        limits = self.rlimits()
        if not limits:
            return []
        tool = shutil.which("prlimit") or "prlimit"
        return [tool, *(f"--{flags[res]}={_clamped(res, v)}:{_clamped(res, v)}"
                        for res, v in limits.items()), "--"]

    def apply(self, pid: int = 0) -> None:
        """Set these limits on a running process (0: this one).  Limits above the
        process's current hard limit are lowered to it rather than refused."""
        for res, value in self.rlimits().items():
            value = _clamped(res, value)
            resource.prlimit(pid, res, (value, value))

    def preexec(self) -> None:
        """Apply to the calling process; usable as ``preexec_fn`` where the parent
        has no other threads (prefer :meth:`prlimit_argv`)."""
        self.apply(0)


def _clamped(res: int, value: int) -> int:
    """``value``, or the current hard limit when that is lower (an unprivileged
    process cannot raise it, and a lower one is already stricter)."""
    _soft, hard = resource.getrlimit(res)
    return value if hard == resource.RLIM_INFINITY or value <= hard else hard


def describe(limits: Limits) -> str:
    """One line such as ``processes 512, file size 2048 MiB, memory 4096 MiB``."""
    parts = []
    for name, value, unit in (("processes", limits.processes, ""),
                              ("open files", limits.open_files, ""),
                              ("file size", limits.file_size_bytes, "MiB"),
                              ("memory per process", limits.memory_bytes, "MiB"),
                              ("address space", limits.address_space_bytes, "MiB"),
                              ("CPU time", limits.cpu_seconds, "s")):
        if value is None:
            continue
        parts.append(f"{name} {value // MIB} MiB" if unit == "MiB" else
                     f"{name} {value} s" if unit == "s" else f"{name} {value}")
    return ", ".join(parts) or "none"
