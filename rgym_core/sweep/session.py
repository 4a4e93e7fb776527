"""One ``rgym sweep`` invocation from start to summary (the Python API of the command).

::

    from rgym_core.registry import load_registry
    from rgym_core.sweep import SweepSession, SweepSpec

    spec = SweepSpec(tasks=["rgym/demo"], agents=["scripted", "baseline"], seeds=[1, 2, 3])
    code = SweepSession(registry=load_registry(), spec=spec, sweep_dir="sweeps/demo",
                        max_parallel=4).run(quiet=True)
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rgym_core.sweep.display import Display
from rgym_core.sweep.engine import Plan, SweepEngine, plan, preflight_cells, sweep_dir_default
from rgym_core.sweep.executors import Executor, ExecutorOptions, find_executor
from rgym_core.sweep.folder import SweepFolder
from rgym_core.sweep.matrix import Cell, SweepError, SweepSpec, expand


class SweepSession:
    """Plan, check, run and summarise one sweep folder."""

    def __init__(self, *, registry: Any, spec: SweepSpec, sweep_dir: Path | str | None = None,
                 resume_only: bool = False, max_parallel: int = 4, max_connections: int | None = None,
                 retry_errors: int = 1, executor: str = "local",
                 executor_options: dict[str, Any] | None = None, address: str | None = None) -> None:
        self.registry = registry
        self.spec = spec
        self.resume_only = resume_only
        self.folder = SweepFolder(Path(sweep_dir) if sweep_dir is not None else sweep_dir_default(spec))
        self.max_parallel = max_parallel
        self.max_connections = max_connections
        self.retry_errors = retry_errors
        self.executor_name = executor
        self.executor_options = dict(executor_options or {})
        self.address = address
        self.engine: SweepEngine | None = None

    def cells(self) -> list[Cell]:
        """The cells this invocation covers (with ``resume_only``: the manifest's)."""
        if self.resume_only:
            if self.folder.read_manifest() is None:
                raise SweepError(f"{self.folder.path}: no sweep here (no sweep.json); name tasks "
                                 "(or --file) to start one")
            given = dict(self.spec.run)  # options on the command line apply on top
            self.spec = self.folder.manifest_spec()
            self.spec.run.update(given)
            return self.folder.manifest_cells()
        return expand(self.spec, self.registry)

    @property
    def settings(self) -> dict[str, Any]:
        """The sweep's own settings, recorded in the manifest (a bare resume reuses them)."""
        return {"max_parallel": self.max_parallel, "max_connections": self.max_connections,
                "retry_errors": self.retry_errors, "executor": self.executor_name,
                "executor_options": self.executor_options, "address": self.address}

    def run(self, *, as_json: bool = False, quiet: bool = False, dry_run: bool = False,
            print_summary: Callable[[Path], None] | None = None, stream: Any = None) -> int:
        """Run the sweep; returns the exit code (0 all done, 1 some failed, 130 stopped).

        Raises :class:`~rgym_core.sweep.matrix.SweepError` (usage: exit 2) before
        anything runs: a bad matrix, other options than the folder's runs were made
        with, a cell that cannot start, another sweep on the folder."""
        cells = self.cells()
        existed = self.folder.path.exists()
        try:
            return self._run(cells, as_json=as_json, quiet=quiet, dry_run=dry_run,
                             print_summary=print_summary, stream=stream)
        except SweepError:
            if not existed:
                self._remove_empty_folder()
            raise

    def _remove_empty_folder(self) -> None:
        """Remove a sweep folder this invocation created and left empty (a sweep that
        could not start leaves nothing behind)."""
        state = self.folder.state_dir
        try:
            if {p.name for p in self.folder.path.iterdir()} <= {state.name} and \
                    {p.name for p in state.iterdir()} <= {"lock"}:
                shutil.rmtree(self.folder.path)
        except OSError:
            pass

    def _run(self, cells: list[Cell], *, as_json: bool, quiet: bool, dry_run: bool,
             print_summary: Callable[[Path], None] | None, stream: Any) -> int:
        with self.folder.locked():
            if self.folder.read_manifest() is not None:
                old = self.folder.manifest_spec()
                if old.fingerprint() != self.spec.fingerprint():
                    raise SweepError(self.folder._mismatch(old, self.spec))
            if dry_run:
                self._dry_run(cells, stream or sys.stdout)
                return 0
            the_plan = plan(self.folder, cells, retry_errors=self.retry_errors,
                            resumable=self._resumable())
            if the_plan.to_run:
                problems = preflight_cells(the_plan.to_run, self.spec, self.folder, self.registry)
                if problems:
                    raise SweepError("cannot start the sweep:\n  " + "\n  ".join(problems))
            self.folder.write_manifest(self.spec, cells, executor=self.executor_name,
                                       settings=self.settings)
            code = 0
            if not the_plan.nothing_to_do:
                code = self._execute(the_plan, as_json=as_json, quiet=quiet, stream=stream)
            elif the_plan.failed:
                code = 1
        if print_summary is not None and any(self.folder.cell_dir(c).exists() for c in cells):
            print_summary(self.folder.path)
        return code

    def _resumable(self) -> Callable[[Cell], bool] | None:
        """For an executor that resumes in place (the local one): whether a cell's
        interrupted run can go on (:func:`rgym_core.resume.plan_resume` accepts it and
        its agent has ``resume``); ``None`` otherwise (such cells run again)."""
        try:
            spec = find_executor(self.registry, self.executor_name)
        except (ValueError, ImportError):
            return None
        if not getattr(spec.factory, "resumes_in_place", False):
            return None
        from rgym_core.resume import ResumeError, plan_resume
        from rgym_core.runner import Episode, RunError

        def resumable(cell: Cell) -> bool:
            try:
                resume = plan_resume(self.folder.cell_dir(cell), self.registry)
                episode = Episode(resume.run_config, self.registry, resume=resume)
                episode.prepare()
            except (ResumeError, RunError):
                return False
            except Exception:  # noqa: BLE001 - a cell that cannot be checked runs again
                return False
            try:
                return callable(getattr(episode.agent, "resume", None))
            finally:
                episode.close()
        return resumable

    def make_executor(self) -> Executor:
        spec = find_executor(self.registry, self.executor_name)
        return spec.factory(ExecutorOptions(
            max_parallel=self.max_parallel, max_connections=self.max_connections,
            address=self.address, sweep_dir=self.folder.path, options=self.executor_options))

    def _execute(self, the_plan: Plan, *, as_json: bool, quiet: bool, stream: Any) -> int:
        try:
            executor = self.make_executor()
        except (ValueError, ImportError) as exc:
            raise SweepError(str(exc)) from None
        holder: dict[str, SweepEngine] = {}
        display = Display(lambda: holder["engine"].status, mode=Display.choose(as_json, quiet, stream),
                          stream=stream)
        engine = SweepEngine(self.folder, self.spec, the_plan, executor, registry=self.registry,
                             retry_errors=self.retry_errors, sinks=[display], on_hard_stop=display.close)
        holder["engine"] = self.engine = engine
        display.start()
        try:
            outcome = engine.run()
        finally:
            display.close()
        display.final()
        return outcome.exit_code

    def _dry_run(self, cells: list[Cell], stream: Any) -> None:
        states = [(c, self.folder.state(c)) for c in cells]
        print(f"sweep {self.folder.path}: {len(cells)} episodes", file=stream)
        for cell, status in states:
            detail = f" ({status.detail})" if status.detail else ""
            print(f"  {cell.key}  {status.state.value}{detail}", file=stream)


__all__ = ["SweepSession"]
