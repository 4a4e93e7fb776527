"""Inspect's sandbox type ``rgym``: one sample, one rgym episode.

``sample_init`` checks the rgym task named by the config (:class:`RgymSandboxConfig`)
and sets up a :class:`~rgym_inspect.episode.BridgedEpisode`, which starts on the
sample's first use of the sandbox: rgym's runner builds the sandbox with the chosen
backend (``local`` by default), lays out the workspace, makes the run directory
and runs its step loop with an agent fed by this sandbox.  (Started on first use so
that a solver that never uses the sandbox, :func:`rgym_inspect.solvers.rgym_agent`,
leaves no empty episode behind.)

* ``exec`` is one rgym ``bash`` step: the argv as a shell command line (with ``cwd``,
  ``env``, ``input`` and a ``timeout`` shorter than the task's action timeout written
  into it), run in the episode's shell under rgym's budgets, recorded in
  ``trajectory.jsonl`` and seen by the plugins' hooks.  Its output comes back as
  ``stdout`` (rgym's shell merges ``stderr`` into it); an rgym timeout is Inspect's
  ``TimeoutError``.  An ``exec`` as another ``user`` (Inspect's root probe at sample
  init) raises ``SandboxUserUnsupportedError``: every step runs as the episode's
  agent user.  Once the episode has ended (a budget, or the scorer's
  submission), ``exec`` answers with a failed result saying so.
* ``read_file`` and ``write_file`` go to the episode's sandbox directly: rgym has no
  tool that writes a whole file (``create`` refuses an existing one), so they are
  not steps; they still happen before the final snapshot, which grades what they
  wrote.  After the end they raise ``PermissionError``.
* :meth:`RgymSandboxEnvironment.finish` (the scorer) submits and returns the
  episode's result; ``sample_cleanup`` ends an episode still running (the sample was
  not scored) as the agent's stop, which rgym still grades.
"""

from __future__ import annotations

import base64
import functools
import shlex
from pathlib import Path
from typing import Any, Literal, overload

import anyio.to_thread
from attrs import evolve
from inspect_ai.util import (
    ExecResult,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxUserUnsupportedError,
    sample_limits,
    sandboxenv,
)
from pydantic import BaseModel

from rgym_core import Action, EpisodeResult, Registry, RunConfig, TaskSpec, Usage, load_registry
from rgym_inspect.episode import BridgedEpisode, EpisodeEnded, EpisodePlugin


class RgymSandboxConfig(BaseModel, frozen=True):
    """Which rgym task a sample's episode runs, and how (as ``rgym run``'s options)."""

    task: str
    profile: str | None = None
    backend: str = "local"
    data_dir: str | None = None
    grader_seed: int | None = None
    #: Where the run directory goes (``None``: rgym's default, ``runs`` in the current folder).
    runs_dir: str | None = None


@functools.cache
def registry() -> Registry:
    """rgym's registry of the installed packs and plugins, with the bridge's own plugin
    (:class:`~rgym_inspect.episode.EpisodePlugin`), loaded once per process."""
    return load_registry(lazy=True, extra_plugins=[("rgym-inspect", EpisodePlugin())])


def load_task_spec(name: str, profile: str | None = None) -> TaskSpec:
    """The installed rgym task ``name`` (``pack/task``) with ``profile`` applied."""
    spec: TaskSpec = registry().task(name)
    return spec.with_profile(profile)


#: Shell builtins that would change the episode's persistent shell: run in a subshell.
_STATEFUL = frozenset({"cd", "pushd", "popd", "export", "unset", "set", "shopt", "source", ".",
                       "alias", "unalias", "exec", "umask", "ulimit", "trap", "declare", "readonly",
                       "local", "eval", "exit", "logout"})


def shell_command(cmd: list[str], *, input: str | bytes | None = None, cwd: str | None = None,
                  env: dict[str, str] | None = None, timeout: float | None = None) -> str:
    """The shell command line of one Inspect ``exec``: ``cmd`` run as a process (in a
    subshell when it would change the shell, or with ``cwd``), with ``env`` set,
    ``input`` on its standard input and, given ``timeout``, under ``timeout``."""
    argv = list(cmd)
    if timeout is not None:
        argv = ["timeout", "-k", "5", f"{timeout:g}", *argv]
    if env:
        argv = ["env", *(f"{k}={v}" for k, v in env.items()), *argv]
    line = shlex.join(argv)
    if input is not None:
        data = input.encode() if isinstance(input, str) else input
        if b"\0" not in data and _is_text(data):
            line = f"printf '%s' {shlex.quote(data.decode())} | {line}"
        else:
            line = f"printf '%s' {base64.b64encode(data).decode()} | base64 -d | {line}"
    if cwd is not None:
        line = f"(cd {shlex.quote(cwd)} && {line})"
    elif cmd and cmd[0] in _STATEFUL:
        line = f"({line})"
    return line


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@sandboxenv(name="rgym")
class RgymSandboxEnvironment(SandboxEnvironment):
    """One Inspect sample's rgym episode (see the module's description)."""

    def __init__(self, spec: TaskSpec, config: RgymSandboxConfig) -> None:
        super().__init__()
        self.spec = spec
        runs_dir = Path(config.runs_dir) if config.runs_dir else RunConfig(task=spec.id).runs_dir
        self.run_config = RunConfig(task=spec.id, profile=spec.profile, sandbox=config.backend,
                                    grader_seed=config.grader_seed, runs_dir=runs_dir.absolute(),
                                    data_dir=Path(config.data_dir) if config.data_dir else None)
        self.episode: BridgedEpisode | None = None
        self._seen_cost = 0.0

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return RgymSandboxConfig(**config)

    @classmethod
    async def sample_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                          metadata: dict[str, str]) -> dict[str, SandboxEnvironment]:
        if not isinstance(config, RgymSandboxConfig):
            raise ValueError("the 'rgym' sandbox needs an RgymSandboxConfig naming the rgym task")
        spec = await anyio.to_thread.run_sync(load_task_spec, config.task, config.profile)
        return {"default": cls(spec, config)}

    @classmethod
    async def sample_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                             environments: dict[str, SandboxEnvironment], interrupted: bool) -> None:
        for environment in environments.values():
            if isinstance(environment, RgymSandboxEnvironment) and environment.episode is not None \
                    and environment.episode.begun:
                why = "interrupted" if interrupted else "ended without being scored"
                await anyio.to_thread.run_sync(environment.episode.finish, f"the Inspect sample {why}")

    def _episode(self) -> BridgedEpisode:
        """The sample's episode (made on first use, with the sample's Inspect model as
        the run's model name)."""
        if self.episode is None:
            from inspect_ai.model import get_model

            try:
                model: str | None = str(get_model())
            except Exception:  # noqa: BLE001 - outside a sample: no model to name
                model = None
            self.episode = BridgedEpisode(evolve(self.run_config, model=model), registry())
        return self.episode

    def _usage(self) -> Usage:
        """The sample's model cost since the last action (Inspect's cost meter), so
        rgym's cost budget and totals count the Inspect model's spending."""
        try:
            cost = float(sample_limits().cost.usage)
        except (RuntimeError, LookupError, TypeError, ValueError):
            return Usage()
        delta, self._seen_cost = max(0.0, cost - self._seen_cost), max(cost, self._seen_cost)
        return Usage(cost_usd=delta)

    async def exec(self, cmd: list[str], input: str | bytes | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None, timeout: int | None = None,
                   timeout_retry: bool = True, concurrency: bool = True) -> ExecResult[str]:
        if user is not None:  # Inspect's root probe among them: not the agent's action
            raise SandboxUserUnsupportedError(f"the rgym sandbox runs every command as the episode's "
                                              f"agent user, not as '{user}'")
        budget = self.spec.budget.action_timeout_s
        wrap = timeout if timeout is not None and timeout < budget else None
        action = Action.bash(shell_command(list(cmd), input=input, cwd=cwd, env=env, timeout=wrap),
                             usage=self._usage())
        episode = self._episode()
        try:
            future = await anyio.to_thread.run_sync(episode.act, action)
            observation = await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        except EpisodeEnded as exc:
            return ExecResult(success=False, returncode=1, stdout="", stderr=str(exc))
        code = observation.exit_code
        if observation.info.get("timed_out") or (wrap is not None and code == 124):
            raise TimeoutError(f"command timed out after {wrap or budget:g} s")
        return ExecResult(success=code == 0, returncode=code if code is not None else 1,
                          stdout=observation.output, stderr="")

    async def write_file(self, file: str, contents: str | bytes) -> None:
        sandbox = await self._live()
        await anyio.to_thread.run_sync(sandbox.write_file, file, contents)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        sandbox = await self._live()
        data = await anyio.to_thread.run_sync(sandbox.read_file, file)
        return data.decode() if text else data

    async def _live(self) -> Any:
        try:
            return await anyio.to_thread.run_sync(self._episode().live_sandbox)
        except EpisodeEnded as exc:
            raise PermissionError(str(exc)) from None

    async def finish(self) -> EpisodeResult:
        """Submit (unless a budget ended the episode already) and wait for the
        episode's final grading; returns its result (``result.json``)."""
        episode, usage = self._episode(), self._usage()
        return await anyio.to_thread.run_sync(episode.finish, None, usage)
