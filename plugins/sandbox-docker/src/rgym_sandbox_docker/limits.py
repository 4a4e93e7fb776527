"""The limits every Docker episode gets: the task's or the command line's, else safe
defaults (issue 10 item 5), and how the workspace's size is bounded on this engine.

A task that sets nothing still runs with a memory limit (no swap beyond it), a
process-count limit and a workspace size limit:

* ``storage="quota"``: the engine bounds the container's writable layer
  (``--storage-opt size=``; overlay2 on XFS with ``pquota``, btrfs, zfs...).
  The workspace, ``/tmp`` and every other writable place share the quota and
  live on the engine's disk.
* ``storage="tmpfs"`` (the fallback, and what this project's machines use: overlay2
  on ext4 has no quotas): the root file system is read-only, and the workspace,
  ``/tmp`` and ``/var/tmp`` are size-limited tmpfs mounts.  Nothing the agent writes
  reaches the engine's disk; what it writes counts against the container's memory
  limit (the kernel charges tmpfs pages to the container's memory cgroup), so the
  memory limit also bounds the sum.
* ``storage="auto"`` (default): ``quota`` where the engine supports it, else ``tmpfs``.

Datasets are not part of either: they live in per-episode volumes, root-owned and
read-only to the agent, so they never take the agent's space.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attrs import define

from rgym_core import Resources

if TYPE_CHECKING:
    from rgym_core import EffectiveResources

#: Memory limit (MB) of an episode whose task and command line set none.
DEFAULT_MEMORY_MB = 8192
#: Process (task) limit of an episode whose task and command line set none; threads count.
DEFAULT_PIDS = 1024
#: Workspace size limit (MB) when neither the task nor ``rgym_core`` gives one.
DEFAULT_DISK_MB = 2048
#: Size (MB) of /tmp and of /var/tmp in tmpfs mode: the workspace's, capped.
SCRATCH_CAP_MB = 1024
STORAGE_MODES = ("auto", "quota", "tmpfs")


@define(frozen=True)
class EpisodeLimits:
    """The limits a Docker episode runs with, and where each came from
    (``task``: the task or the command line; ``default``: this backend's default)."""

    memory_mb: int
    pids: int
    disk_mb: int
    cpus: float | None
    sources: dict[str, str]

    def describe(self, storage: str | None = None) -> dict[str, str]:
        """One line per limit, for ``rgym show`` and the agent's status block."""
        def src(name: str) -> str:
            return " (default)" if self.sources.get(name) == "default" else ""

        where = {"tmpfs": ", in memory (tmpfs)", "quota": ", on disk (storage quota)"}.get(
            storage or "", "")
        lines = {"memory": f"{self.memory_mb} MB{src('memory_mb')}, no swap beyond it",
                 "processes": f"{self.pids}{src('pids')}",
                 "workspace": f"{self.disk_mb} MB{src('disk_mb')}{where}"}
        lines["cpus"] = f"{self.cpus:g}" if self.cpus else "all of the machine's"
        return lines


def _spec_default_disk_mb() -> int:
    """The core's default workspace quota (``rgym_core.DEFAULT_DISK_MB``)."""
    import rgym_core

    return int(getattr(rgym_core, "DEFAULT_DISK_MB", DEFAULT_DISK_MB))


def disk_mb_of(resources: Resources | EffectiveResources) -> int | None:
    """``Resources.disk_mb`` where the core has it (older cores: None)."""
    value = getattr(resources, "disk_mb", None)
    return int(value) if value else None


def episode_limits(resources: Resources | EffectiveResources,
                   options: dict[str, Any] | None = None) -> EpisodeLimits:
    """The limits of an episode with these resources (already merged with the command
    line by the runner).  ``options`` may hold ``disk_mb`` (``--sandbox-option``)."""
    options = options or {}
    sources: dict[str, str] = {}

    def pick(name: str, given: Any, default: int) -> int:
        if given:
            sources[name] = "task"
            return int(given)
        sources[name] = "default"
        return default

    memory = pick("memory_mb", resources.memory_mb, DEFAULT_MEMORY_MB)
    pids = pick("pids", resources.pids, DEFAULT_PIDS)
    given_disk = options.get("disk_mb") or disk_mb_of(resources)
    disk = pick("disk_mb", given_disk, _spec_default_disk_mb())
    if not options.get("disk_mb") and given_disk == _spec_default_disk_mb():
        sources["disk_mb"] = "default"  # the spec's default, not the task's choice
    return EpisodeLimits(memory_mb=memory, pids=pids, disk_mb=disk, cpus=resources.cpus,
                         sources=sources)


def scratch_mb(limits: EpisodeLimits) -> int:
    """Size of /tmp and /var/tmp in tmpfs mode."""
    return max(64, min(limits.disk_mb, SCRATCH_CAP_MB))


def describe_limits(resources: Resources, options: dict[str, Any] | None = None) -> dict[str, str]:
    """The Docker limits of a task, one line each (``rgym show``)."""
    return episode_limits(resources, options).describe()
