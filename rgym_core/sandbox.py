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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core.specs import PreparedDataset, Resources

#: Default cap on the output of one command, in characters.
DEFAULT_OUTPUT_LIMIT = 32_000
#: Exit code reported when a command ran past its timeout (as coreutils' ``timeout``).
TIMEOUT_EXIT_CODE = 124


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


def truncate_output(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and tail of ``text`` within ``limit`` characters, with a marker
    in the middle saying how much was cut."""
    if limit <= 0 or len(text) <= limit:
        return text, False
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    marker = f"\n[... {cut} characters truncated; redirect output to a file and read it in parts ...]\n"
    return text[:head] + marker + text[len(text) - tail :], True


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

    @property
    def network_enabled(self) -> bool:
        return self.resources.network if self.network is None else self.network


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
        """Copy a sandbox file or folder to the host path ``dest``."""

    @abc.abstractmethod
    def cleanup(self) -> None:
        """Stop every process and remove the sandbox. Safe to call twice."""

    def health(self) -> SandboxError | None:
        """Return a :class:`SandboxError` if the sandbox died (e.g. OOM), else None."""
        return None

    def grade(self, eval_dir: Path, argv: list[str], *, timeout: float,
              env: Mapping[str, str]) -> ExecResult:
        """Run a grader isolated from the agent's sandbox, in ``eval_dir`` (a host
        folder holding the clean evaluation layout).  Backends that can start a
        separate short-lived sandbox override this; the default is unsupported."""
        raise NotImplementedError(f"{type(self).__name__} cannot grade in a separate sandbox")

    def describe(self) -> dict[str, Any]:
        """Facts for the agent's status block (memory, GPUs, network)."""
        return {}

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


@define(frozen=True)
class SandboxSpec:
    """A registered sandbox backend, named ``pack/name`` (``rgym/local``);
    ``--sandbox local`` finds it by the part after the slash when unambiguous."""

    name: str
    factory: Callable[[SandboxConfig], Sandbox]
    description: str = ""
    isolated_grading: bool = False
