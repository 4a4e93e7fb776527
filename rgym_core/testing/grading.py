"""Grading helpers for pack tests: a task's real grader on files you choose.

Two levels:

* :func:`grade` runs the task's grader exactly as an episode does (rgym's
  :class:`~rgym_core.grading.Grader`: a fresh evaluation folder, the grader kit,
  the supervisor and its confinement, the score checks) on a submission made of
  the starter files plus the files you give, and returns the
  :class:`~rgym_core.records.ScoreRecord`::

      from rgym_core.testing import grade

      record = grade(TASK_DIR, {"strategy.py": "def row_strategy(history):\\n    return 0\\n"})
      assert record.valid and record.scores["Score"] > -0.3

* :class:`EvalFolder` lays out the grader protocol's folders by hand
  (``submission/``, ``grader/`` with the kit, ``data/``, ``private/``) and runs
  ``python grader/<entry>`` unconfined with the protocol's environment, for fast
  tests of a grader's own logic::

      folder = EvalFolder.for_task(tmp_path, TASK_DIR, {"answer.txt": "hello"})
      assert folder.run().scores == {"scores": {"accuracy": 1.0}}
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core import grader_protocol as gp
from rgym_core.packs import load_task
from rgym_core.records import ScoreRecord
from rgym_core.specs import PreparedDataset, TaskSpec

#: The grader secret of the evaluation folders :class:`EvalFolder` lays out: random for
#: each test process, so a test of a baseline sees formulas, opponents or evaluation
#: seeds it was not measured on.
TEST_SECRET = os.urandom(32)

#: What a file of a submission may be given as: its text, its bytes, or a host file to copy.
FileContent = str | bytes | Path
Files = Mapping[str, FileContent]


def write_files(root: Path, files: Files | None) -> None:
    """Write ``files`` (relative name -> text, bytes or a host path) under ``root``."""
    for name, content in (files or {}).items():
        target = root / name
        if target.resolve() != root.resolve() and root.resolve() not in target.resolve().parents:
            raise ValueError(f"file name {name!r} leaves the folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            if content.is_dir():
                shutil.copytree(content, target, dirs_exist_ok=True)
            else:
                shutil.copyfile(content, target)
        elif isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)


def as_task(task: TaskSpec | Path | str, profile: str | None = None) -> TaskSpec:
    """A task spec from a spec, a task folder or a ``task.yaml``, with ``profile`` applied
    (``None``: the task's default profile)."""
    spec = task if isinstance(task, TaskSpec) else load_task(task)
    return spec.with_profile(profile)


def profile_environment(task: TaskSpec) -> dict[str, str]:
    """The environment a task's grader gets from the task: its ``env`` and ``RGYM_PROFILE``."""
    env = {str(k): str(v) for k, v in task.env.items()}
    if task.profile is not None:
        env[gp.ENV_PROFILE] = task.profile
    return env


# --------------------------------------------------------------------------- EvalFolder


@define
class GraderRun:
    """What one run of a grader left: its exit code, output and ``scores.json``."""

    returncode: int
    output: str
    scores: Any = None

    @property
    def error(self) -> str | None:
        return self.scores.get("error") if isinstance(self.scores, dict) else None


@define
class EvalFolder:
    """An evaluation folder laid out as the grader protocol says (see
    :mod:`rgym_core.grader_protocol`)."""

    root: Path
    entry: str = "evaluate.py"
    env: dict[str, str] = field(factory=dict)

    @classmethod
    def create(cls, root: Path, *, grader: Path, submission: Files | None = None,
               data: Mapping[str, Files | Path] | None = None,
               private: Mapping[str, Files | Path] | None = None, entry: str = "evaluate.py",
               includes: Mapping[str, Path] | None = None,
               env: Mapping[str, str] | None = None,
               secret: bytes | None = None) -> EvalFolder:
        """Lay out ``root`` (created): ``submission/`` from ``submission``, ``grader/``
        from the folder ``grader`` (plus ``includes``: name -> host path) and the
        grader kit, ``data/<mount>`` and ``private/<mount>`` from folders or files, and
        the grader secret (``secret``, default :data:`TEST_SECRET`: new for each test
        process, so hidden seeds differ from run to run as between machines)."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        (root / gp.SUBMISSION_DIR).mkdir(exist_ok=True)
        write_files(root / gp.SUBMISSION_DIR, submission)
        shutil.copytree(grader, root / gp.GRADER_DIR, dirs_exist_ok=True)
        for name, source in (includes or {}).items():
            write_files(root / gp.GRADER_DIR, {name: Path(source)})
        gp.install_kit(root / gp.GRADER_DIR)
        for folder, parts in ((gp.DATA_DIR, data), (gp.PRIVATE_DIR, private)):
            (root / folder).mkdir(exist_ok=True)
            for mount, content in (parts or {}).items():
                target = root / folder / mount
                if isinstance(content, Path):
                    shutil.copytree(content, target, dirs_exist_ok=True)
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    write_files(target, content)
        (root / gp.PRIVATE_DIR / gp.SECRET_FILE).write_text((secret or TEST_SECRET).hex() + "\n")
        (root / gp.HOME_DIR).mkdir(exist_ok=True)
        return cls(root=root, entry=entry, env=dict(env or {}))

    @classmethod
    def for_task(cls, root: Path, task: TaskSpec | Path | str, submission: Files | None = None, *,
                 starter: bool = False, profile: str | None = None,
                 data: Mapping[str, Files | Path] | None = None,
                 private: Mapping[str, Files | Path] | None = None) -> EvalFolder:
        """An evaluation folder for a task: its grader folder and ``grader.include``
        files, its profile's environment, and the submission (the starter files
        first when ``starter``)."""
        from rgym_core.grading import resolve_includes

        spec = as_task(task, profile)
        grader = spec.path(spec.grader.files)
        if grader is None or not grader.is_dir():
            raise FileNotFoundError(f"task '{spec.id}' has no grader folder '{spec.grader.files}'")
        files: dict[str, FileContent] = {}
        for _, starter_dir in spec.starter_paths() if starter else []:  # shared ones first
            if starter_dir is not None and starter_dir.is_dir():
                files.update({p.relative_to(starter_dir).as_posix(): p
                              for p in starter_dir.rglob("*") if p.is_file()})
        files.update(submission or {})
        return cls.create(root, grader=grader, submission=files, data=data, private=private,
                          entry=spec.grader.entry, includes=resolve_includes(spec),
                          env=profile_environment(spec))

    def environment(self, kind: str = "submit", seed: int | None = None) -> dict[str, str]:
        """The protocol's environment for a grader run in this folder."""
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")}
        env.update(self.env)
        env.update({
            gp.ENV_SUBMISSION_DIR: str(self.root / gp.SUBMISSION_DIR),
            gp.ENV_GRADER_DIR: str(self.root / gp.GRADER_DIR),
            gp.ENV_DATA_DIR: str(self.root / gp.DATA_DIR),
            gp.ENV_PRIVATE_DIR: str(self.root / gp.PRIVATE_DIR),
            gp.ENV_SCORES_FILE: str(self.root / gp.SCORES_FILE),
            gp.ENV_GRADE_KIND: kind,
            "HOME": str(self.root / gp.HOME_DIR),
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        if seed is not None:
            env[gp.ENV_SEED] = str(seed)
        return env

    def run(self, *, kind: str = "submit", seed: int | None = None, timeout: float = 600,
            python: str = sys.executable, extra_env: Mapping[str, str] | None = None) -> GraderRun:
        """Run ``python grader/<entry>`` here (unconfined: for tests of the grader's
        logic; :func:`grade` runs it the way episodes do) and read ``scores.json``."""
        scores_file = self.root / gp.SCORES_FILE
        if scores_file.exists():
            scores_file.unlink()
        env = {**self.environment(kind, seed), **(extra_env or {})}
        done = subprocess.run([python, f"{gp.GRADER_DIR}/{self.entry}"], cwd=self.root, env=env,
                              capture_output=True, text=True, timeout=timeout)
        scores = json.loads(scores_file.read_text()) if scores_file.is_file() else None
        return GraderRun(done.returncode, done.stdout + done.stderr, scores)


# --------------------------------------------------------------------------- grade()


class _FolderWorkspace:
    """A host folder standing in for a sandbox's workspace: all :class:`Grader`
    needs to collect a submission (``export_workspace``)."""

    def __init__(self, folder: Path) -> None:
        self.workspace = folder

    def export_workspace(self, dest: Path, *, exclude: Sequence[str] = (),
                         include: Sequence[str] | None = None, quota_bytes: int | None = None) -> None:
        from rgym_core.globs import glob_match

        def ignore(folder: str, names: list[str]) -> list[str]:
            out = []
            for name in names:
                path = Path(folder) / name
                rel = path.relative_to(self.workspace).as_posix()
                if path.is_symlink() or any(glob_match(rel, p) for p in exclude):
                    out.append(name)
            return out

        shutil.copytree(self.workspace, dest, ignore=ignore)

    def grade(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _prepare_datasets(task: TaskSpec, datasets: Mapping[str, PreparedDataset | Path] | None,
                      data_dir: Path | None) -> dict[str, PreparedDataset]:
    prepared: dict[str, PreparedDataset] = {}
    given = dict(datasets or {})
    for mount in task.datasets:
        if mount.mount in given:
            value = given[mount.mount]
            prepared[mount.mount] = value if isinstance(value, PreparedDataset) else \
                PreparedDataset(id=mount.id, public=Path(value))
            continue
        from rgym_core.datasets import prepare_dataset
        from rgym_core.registry import load_registry

        registry = load_registry(lazy=True)
        prepared[mount.mount] = prepare_dataset(registry.dataset(mount.id), data_dir=data_dir)
    return prepared


def grade(task: TaskSpec | Path | str, files: Files | None = None, *, starter: bool = True,
          kind: str = "submit", seed: int | None = None, profile: str | None = None,
          datasets: Mapping[str, PreparedDataset | Path] | None = None, data_dir: Path | None = None,
          run_dir: Path | None = None) -> ScoreRecord:
    """Grade a submission with the task's grader, the way an episode's ``submit`` does.

    The submission is the task's starter files (unless ``starter=False``) with
    ``files`` written over them.  Datasets come from ``datasets`` (mount -> a
    :class:`PreparedDataset` or a folder of public files), else from the installed
    packs (prepared as ``rgym run`` does, with ``data_dir``).  The grader's logs go
    to ``run_dir/grader/`` (a temporary folder by default).  Never raises for a
    grader failure: the record is invalid and says why.
    """
    from rgym_core.grading import Grader

    spec = as_task(task, profile)
    with tempfile.TemporaryDirectory(prefix="rgym-test-grade-") as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        prepared = _prepare_datasets(spec, datasets, data_dir)
        if starter:  # the task's starter files, with those a dataset supplies (starter: true)
            from rgym_core.datasets import starter_folders

            for folder in starter_folders(spec, prepared):
                shutil.copytree(folder, workspace, symlinks=True, dirs_exist_ok=True)
        write_files(workspace, files)
        grader = Grader(spec, _FolderWorkspace(workspace), prepared,  # type: ignore[arg-type]
                        run_dir or Path(tmp) / "run", seed=seed, env=profile_environment(spec))
        return grader.grade(kind, 0)


__all__ = ["EvalFolder", "FileContent", "Files", "GraderRun", "as_task", "grade", "profile_environment",
           "write_files"]
