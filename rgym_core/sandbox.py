"""The sandbox interface every backend implements (``local``, ``docker``...).

A sandbox holds one episode's workspace.  It offers a *persistent shell*
(:meth:`Sandbox.run`: the working directory and exported variables persist
between calls, as in a terminal) for the agent's commands, one-shot processes
(:meth:`Sandbox.exec`) for tools, file access, and copying in and out.  Every
command runs as the unprivileged agent user where the backend can arrange it.

Backends raise plain exceptions that the runner turns into observations:
``FileNotFoundError``, ``PermissionError``, ``IsADirectoryError``,
:class:`SandboxError` (the sandbox itself broke, e.g. an OOM kill).

A new backend should pass :mod:`rgym_core.testing.conformance`.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from attrs import define, field

from rgym_core.sandboxes.output import truncate_output
from rgym_core.specs import DEFAULT_DISK_MB, PreparedDataset, Resources
from rgym_core.workspace_export import ExportReport, WorkspaceExportError, WorkspaceQuotaExceeded

__all__ = ["DEFAULT_OUTPUT_LIMIT", "TIMEOUT_EXIT_CODE", "EffectiveResources", "ExecResult",
           "ExportReport", "Sandbox", "SandboxConfig", "SandboxError", "SandboxFacts",
           "SandboxSpec", "WorkspaceExportError", "WorkspaceLayout", "WorkspaceQuotaExceeded",
           "host_gpu_count", "merge_resources", "truncate_output"]

#: Default cap on the output of one command, in characters.
DEFAULT_OUTPUT_LIMIT = 32_000
#: Exit code reported when a command ran past its timeout (as coreutils' ``timeout``).
TIMEOUT_EXIT_CODE = 124


def host_gpu_count() -> int:
    """The NVIDIA GPUs this machine exposes (its ``/dev/nvidia<N>`` device nodes): what a
    task profile that declares ``resources.gpus`` is checked against before a run."""
    try:
        names = os.listdir("/dev")
    except OSError:
        return 0
    return sum(1 for n in names if n.startswith("nvidia") and n[6:].isdigit())


class SandboxError(RuntimeError):
    """The sandbox failed (killed by the OOM killer, container gone...).

    ``reason`` is a short machine-readable word such as ``oom`` or ``pids``.
    """

    def __init__(self, message: str, reason: str = "error") -> None:
        super().__init__(message)
        self.reason = reason


@define
class ExecResult:
    """The outcome of a command."""

    exit_code: int
    output: str
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@define(frozen=True)
class SandboxFacts:
    """What an episode's sandbox gives the agent, as the backend enforces it.

    ``None`` means unknown or unlimited.  :meth:`items` lists the set facts, so the
    runner can show them to the agent as they are."""

    backend: str
    #: Who agent commands run as, e.g. ``"uid 61007 (pooled)"``.
    user: str | None = None
    cpus: float | None = None
    gpus: int | None = None
    #: ``"none"`` (no network), ``"loopback"``, ``"host"`` (the host's network).
    network: str | None = None
    #: Memory as the agent should read it, e.g. ``"6.1 GiB available of 7.8 GiB"``.
    memory: str | None = None
    memory_available_mb: int | None = None
    #: Per-process (local) or per-sandbox (Docker) memory limit, in MiB.
    memory_limit_mb: int | None = None
    #: Most processes the episode may run at once.
    pids_limit: int | None = None
    #: The workspace quota (``resources.disk_mb``), in MiB.
    disk_quota_mb: int | None = None
    #: How the sandbox is isolated, e.g. ``"bubblewrap"``, ``"container"``, ``"none"``.
    isolation: str | None = None
    image: str | None = None
    workspace: str | None = None
    #: What the backend cannot enforce here (one sentence each).
    unenforced: tuple[str, ...] = ()
    extras: dict[str, Any] = field(factory=dict)

    def items(self) -> list[tuple[str, Any]]:
        """``(name, value)`` of every fact that is set (extras included)."""
        out = [(f.name, getattr(self, f.name)) for f in attrs.fields(type(self))
               if f.name != "extras"]
        out += list(self.extras.items())
        return [(k, v) for k, v in out if v not in (None, (), [], {}, "")]

    def get(self, name: str, default: Any = None) -> Any:
        value = dict(self.items()).get(name, default)
        return value

    def __getitem__(self, name: str) -> Any:
        facts = dict(self.items())
        if name not in facts:
            raise KeyError(name)
        return facts[name]


@define
class WorkspaceLayout:
    """What the runner lays out in a fresh workspace.

    ``starter`` is copied into the workspace (agent-owned, writable);
    ``datasets`` maps mount folders (relative to the workspace) to prepared
    datasets, whose public part is placed read-only and owned by root.
    The grader's hidden files are never part of a layout.
    """

    starter: Path | None = None
    datasets: dict[str, PreparedDataset] = field(factory=dict)


@define(frozen=True)
class EffectiveResources:
    """The resources one episode's sandbox gets: the task's (with its profile's) and
    the command line's over them, merged once (:func:`merge_resources`).  Backends
    read this value (``SandboxConfig.effective``) and merge nothing themselves."""

    memory_mb: int | None = None
    cpus: float | None = None
    pids: int | None = None
    #: Workspace quota in MiB (``resources.disk_mb``).
    disk_mb: int = DEFAULT_DISK_MB
    #: The task's packages (a backend that builds images installs them).
    requirements: tuple[str, ...] = ()
    network: bool = False
    image: str | None = None
    #: The GPUs to give: ``--gpus`` as given (a count, ``all`` or device ids ``0,3``),
    #: else the task's count (``resources.gpus``); ``None``: none asked.
    gpus: str | None = None
    #: The settings the command line gave that replaced the task's (``memory_mb``,
    #: ``cpus``, ``pids``, ``gpus``, ``image``, ``network``).
    given: frozenset[str] = frozenset()
    #: The settings the user gave explicitly, so a backend that cannot enforce one
    #: can say so without warning about every task's defaults; ``None``: all of them.
    explicit: frozenset[str] | None = None

    @property
    def requested_gpus(self) -> str | None:
        """``--gpus`` as given (``None`` when the command line named none): the local
        backend honours only this, not the task's count."""
        return self.gpus if "gpus" in self.given else None

    def wanted(self, name: str) -> bool:
        """Whether a backend should warn that it cannot enforce the setting ``name``."""
        return self.explicit is None or name in self.explicit


def merge_resources(task: Resources, *, memory_mb: int | None = None, cpus: float | None = None,
                    pids: int | None = None, network: bool | None = None, image: str | None = None,
                    gpus: str | None = None,
                    explicit: set[str] | frozenset[str] | None = None) -> EffectiveResources:
    """The task's ``resources`` with the command line's settings over them (``None``:
    keep the task's; an empty ``image``: the task's image)."""
    given = {name for name, value in (("memory_mb", memory_mb), ("cpus", cpus), ("pids", pids),
                                      ("network", network), ("gpus", gpus)) if value is not None}
    if image:
        given.add("image")
    return EffectiveResources(
        memory_mb=task.memory_mb if memory_mb is None else memory_mb,
        cpus=task.cpus if cpus is None else cpus,
        pids=task.pids if pids is None else pids,
        disk_mb=task.disk_mb, requirements=tuple(task.requirements),
        network=task.network if network is None else network,
        image=image or task.image,
        gpus=gpus if gpus is not None else (str(task.gpus) if task.gpus else None),
        given=frozenset(given), explicit=None if explicit is None else frozenset(explicit))


def _merged(config: SandboxConfig) -> EffectiveResources:
    return merge_resources(config.resources, network=config.network, image=config.image,
                           gpus=config.gpus, explicit=config.explicit)


@define
class SandboxConfig:
    """Everything a backend needs to create one episode's sandbox."""

    run_id: str
    task_id: str = ""
    resources: Resources = field(factory=Resources)
    network: bool | None = None
    image: str | None = None
    gpus: str | None = None
    labels: dict[str, str] = field(factory=dict)
    env: dict[str, str] = field(factory=dict)
    work_root: Path | None = None
    options: dict[str, Any] = field(factory=dict)
    #: The settings the user gave explicitly (``memory_mb``, ``cpus``, ``pids``, ``gpus``,
    #: ``image``, ``network``), so a backend that cannot enforce one can say so without
    #: warning about every task's default resources.  ``None``: treat all as explicit.
    explicit: set[str] | None = None
    #: What the sandbox gets, merged once: the runner passes its plan's value; built
    #: from the fields above when not given.  Backends read this, not the fields above.
    effective: EffectiveResources = field(default=attrs.Factory(_merged, takes_self=True))

    @property
    def network_enabled(self) -> bool:
        """Whether the agent's commands may reach the network (``effective.network``)."""
        return self.effective.network


class Sandbox(abc.ABC):
    """One episode's isolated workspace.

    Paths passed to the file methods may be absolute (inside the sandbox) or
    relative to :attr:`workspace`.
    """

    #: Absolute path of the workspace inside the sandbox.
    workspace: str

    @abc.abstractmethod
    def start(self, layout: WorkspaceLayout) -> None:
        """Create the sandbox, lay out the workspace and start the shell session."""

    @abc.abstractmethod
    def run(self, command: str, *, timeout: float | None = None,
            output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        """Run ``command`` in the persistent shell session.

        On timeout the whole process tree of the command is killed, the result has
        ``timed_out=True`` and exit code 124, and the session stays usable.
        """

    @abc.abstractmethod
    def exec(self, argv: list[str], *, timeout: float | None = None, cwd: str | None = None,
             env: Mapping[str, str] | None = None, input: str | None = None,
             output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        """Run one fresh process (not the shell session) as the agent user."""

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes:
        """Read a file as the agent user would."""

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes | str) -> None:
        """Write a file as the agent user would, creating parent folders."""

    @abc.abstractmethod
    def copy_in(self, src: Path, dest: str) -> None:
        """Copy a host file or folder into the sandbox, owned by the agent user."""

    @abc.abstractmethod
    def copy_out(self, src: str, dest: Path) -> None:
        """Copy a sandbox file or folder to the host path ``dest`` (replaced if it
        exists), never trusting what the agent named or linked: backends extract
        with :func:`rgym_core.workspace_export.extract_archive` (only files and
        folders, links to outside dropped, the workspace quota applies)."""

    @abc.abstractmethod
    def cleanup(self) -> None:
        """Stop every process and remove the sandbox. Safe to call twice."""

    def freeze(self) -> None:
        """Stop every agent process (the whole tree: the episode's uid, pid namespace or
        container) until :meth:`thaw`, so a copy taken meanwhile is one atomic
        snapshot.  Processes started after the freeze (rgym's own copy-out) run.
        Backends that cannot freeze raise :class:`NotImplementedError`; the runner
        then records the snapshot as not frozen."""
        raise NotImplementedError(f"{type(self).__name__} cannot freeze its processes")

    def thaw(self) -> None:
        """Let the processes :meth:`freeze` stopped run again (safe without a freeze)."""

    def kill_processes(self) -> list[str]:
        """Kill every agent process still running (the sandbox and its workspace stay,
        so the workspace can still be copied out) and return the command lines of the
        processes killed, as the host read them (never as the agent reported them).
        Backends that cannot raise :class:`NotImplementedError`."""
        raise NotImplementedError(f"{type(self).__name__} cannot kill its processes")

    def reap_handle(self) -> dict[str, Any]:
        """What :attr:`SandboxSpec.reap` needs to kill this episode's processes after
        rgym itself died (JSON-safe; written into the trajectory at start)."""
        return {}

    def health(self) -> SandboxError | None:
        """Return a :class:`SandboxError` if the sandbox died (e.g. OOM), else None."""
        return None

    def grade(self, eval_dir: Path, argv: list[str], *, timeout: float,
              env: Mapping[str, str]) -> ExecResult:
        """Run a grader isolated from the agent's sandbox, in ``eval_dir`` (a host
        folder holding the clean evaluation layout).  Backends that can start a
        separate short-lived sandbox override this; the default is unsupported."""
        raise NotImplementedError(f"{type(self).__name__} cannot grade in a separate sandbox")

    def export_workspace(self, dest: Path, *, exclude: Sequence[str] = (),
                         include: Sequence[str] | None = None,
                         quota_bytes: int | None = None) -> ExportReport:
        """Copy the workspace into the new host folder ``dest`` in one archive,
        never trusting names or links the agent chose (the rules of
        :mod:`rgym_core.workspace_export`, which every backend uses to extract).

        ``exclude``/``include``: glob patterns on relative paths (dataset mounts
        are the caller's to exclude).  ``quota_bytes`` (default: the task's
        ``resources.disk_mb``) bounds the apparent size copied:
        :class:`WorkspaceQuotaExceeded` past it.  Backends that cannot do this
        raise :class:`NotImplementedError` (callers then copy entry by entry)."""
        raise NotImplementedError(f"{type(self).__name__} cannot export its workspace")

    def describe(self) -> SandboxFacts:
        """Facts for the agent's status block and ``rgym show`` (memory, CPUs,
        GPUs, network, limits, who the agent runs as)."""
        return SandboxFacts(backend=type(self).__name__)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


@define(frozen=True)
class SandboxSpec:
    """A registered sandbox backend, named ``pack/name`` (``rgym/local``);
    ``--sandbox local`` finds it by the part after the slash when unambiguous.

    ``limits``, when given, says what the backend would enforce for a task's
    resources and the sandbox options: ``limits(resources, options)`` returns one
    line per limit (``{"memory": "8192 MB (default), no swap beyond it", ...}``)
    for ``rgym show``.

    ``reap``, when given, kills what a killed episode left running:
    ``reap(handle)`` takes :meth:`Sandbox.reap_handle`'s mapping and returns the
    command lines of the processes it killed (``rgym grade`` calls it before it
    archives a killed run's workspace).  ``export_leftover``, for backends whose
    workspace is no host folder (containers), copies a killed run's workspace out:
    ``export_leftover(handle, dest, exclude)`` fills the new host folder ``dest``
    under the export rules and may remove what is left of the sandbox."""

    name: str
    factory: Callable[[SandboxConfig], Sandbox]
    description: str = ""
    isolated_grading: bool = False
    limits: Callable[[Resources, dict[str, Any]], dict[str, str]] | None = None
    reap: Callable[[dict[str, Any]], list[str]] | None = None
    export_leftover: Callable[[dict[str, Any], Path, Sequence[str]], object] | None = None
