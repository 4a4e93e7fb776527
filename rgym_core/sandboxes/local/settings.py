"""Settings the local sandbox cannot enforce, said once at start."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from rgym_core.sandbox import SandboxConfig
from rgym_core.specs import Resources


def visible_devices(gpus: str | None) -> str | None:
    """CUDA_VISIBLE_DEVICES for ``--gpus``: a count ``N`` means the first N devices
    (as the Docker backend reads it), a comma list names devices, ``all`` (or
    nothing) leaves the variable unset."""
    if gpus is None or gpus.strip() in ("", "all"):
        return None
    gpus = gpus.strip()
    return ",".join(str(i) for i in range(int(gpus))) if gpus.isdigit() else gpus


def unenforced_settings(config: SandboxConfig, *, network_isolated: bool = False) -> list[str]:
    """One warning line per limit the user or the task set that this backend cannot
    enforce.  The task's default (network off) is not warned about, only an
    explicit ``--no-network``; under bubblewrap (``network_isolated``) it holds.
    Processes, file size and memory (per process) are always enforced with rlimits."""
    docker = "--sandbox docker"
    found: list[str] = []
    res = config.effective
    wanted = res.wanted
    if "network" in res.given and not res.network and wanted("network") and not network_isolated:
        found.append("--no-network is not enforced by the local sandbox without bubblewrap: "
                     f"agent commands can reach the network (install bubblewrap or use {docker})")
    if res.cpus is not None and wanted("cpus"):
        found.append(f"the CPU limit ({res.cpus:g} CPUs; --cpus or the task's resources) is not "
                     f"enforced by the local sandbox (use {docker} to enforce it)")
    if res.requested_gpus is not None and wanted("gpus"):
        devices = visible_devices(res.requested_gpus)
        applied = ("the agent sees every GPU of this machine" if devices is None else
                   f"it only sets CUDA_VISIBLE_DEVICES={devices!r}, which programs may ignore")
        found.append(f"--gpus {res.requested_gpus} is not enforced by the local sandbox: {applied} "
                     f"(use {docker} to restrict GPUs)")
    source = "--image" if "image" in res.given else "the task's image"
    if res.image and wanted("image"):
        found.append(f"{source} {res.image} is not used by the local sandbox: commands run on "
                     f"this machine with {sys.executable} (use {docker} to run in the image)")
    return [f"rgym/local: {line}" for line in found]


def describe_limits(resources: Resources, options: Mapping[str, Any]) -> dict[str, str]:
    """What the local sandbox enforces for a task's ``resources`` on this machine,
    one line per limit (``SandboxSpec.limits``, shown by ``rgym show``)."""
    from rgym_core.isolation import bwrap_problem
    from rgym_core.sandboxes.local.confinement import DEFAULT_PIDS

    problem = bwrap_problem() if str(options.get("bubblewrap", "auto")).lower() not in (
        "0", "false", "no", "off") else "turned off"
    root = os.geteuid() == 0
    if problem is None:
        isolation = ("bubblewrap, a uid leased for the episode" if root
                     else "bubblewrap in a user namespace")
        network = "allowed (host)" if resources.network else "none (loopback only)"
    else:
        isolation = (f"a uid leased for the episode, no namespaces ({problem})" if root
                     else f"none: your own user ({problem})")
        network = "not enforced (host)"
    pids = resources.pids or int(options.get("pids_default", DEFAULT_PIDS))
    return {
        "isolation": isolation,
        "processes": f"{pids}{'' if resources.pids else ' (default)'} for the episode",
        "memory": (f"{resources.memory_mb} MB per process" if resources.memory_mb
                   else "not limited"),
        "workspace": f"{resources.disk_mb} MB (copy-out quota; also the largest file)",
        "network": network,
        "cpus": "not limited" if resources.cpus is None else
                f"{resources.cpus:g} asked, not enforced by the local sandbox",
    }
