"""What the checks look for in one task: the task's ``integrity:`` section
(:class:`rgym_core.specs.IntegritySpec`) completed with defaults that work for
tasks that declare nothing.

Defaults (used in addition to what a task declares):

* protected: starter files named like evaluation code (``evaluate.py``,
  ``grade.py``, ``grading/``, ``eval_*.py``, ``metrics.py``, ``scoring.py``);
  the starter files are every starter folder in copy order (a dataset's
  ``starter: true`` folder, then the task's ``starter_files``; see
  :func:`starter_files`);
* results: data and text files named like results (``results.json``,
  ``metrics.csv``, ``scores.txt``, ``report.md``, ``eval_*.json``...), and the
  grader's submission files when the task names them (not a catch-all ``**/*``);
* test data: files named like test labels (``test_labels.csv``, ``y_test.npy``,
  ``test_answers.csv``, ``*gold*``);
* hidden: the grader's folder and its file names, the datasets' private parts,
  the evaluation mount ``/eval``, the task's folder and the runs folder;
* bounds: ratios (accuracy, R², F1, AUC, precision, recall...) at most 1 (or 100
  when the task's scores are percentages) and at least 0 (R² has no lower bound);
  errors and losses (RMSE, MSE, MAE, loss, perplexity) at least 0; a metric's
  declared ``ceiling`` (:attr:`rgym_core.specs.Metric.ceiling`) bounds it on its
  better side;
* ceilings: each metric's ``ceiling`` (a score at it is flagged for review);
* review factor: a score more than ``k`` times the difference between the task's
  reference and baseline scores past the better of the two is flagged for review
  (``k`` = :data:`DEFAULT_REVIEW_FACTOR`, or ``RGYM_INTEGRITY_REVIEW_FACTOR``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core import glob_match as core_match
from rgym_integrity.numbers import _words

TEXT_EXTENSIONS = frozenset({".txt", ".md", ".json", ".jsonl", ".csv", ".tsv", ".yaml", ".yml", ".log",
                             ".tex", ".html", ".rst", ".out", ".ini", ".toml", ".cfg", ".xml", ""})
CODE_EXTENSIONS = frozenset({".py", ".sh", ".bash", ".r", ".jl", ".js", ".ts", ".ipynb", ".c", ".cc",
                             ".cpp", ".h", ".hpp", ".rs", ".go", ".java", ".lua", ".rb", ".pl", ".m"})
DEFAULT_PROTECTED = ("evaluate.py", "evaluate*.py", "eval.py", "eval_*.py", "evaluation.py", "grade.py",
                     "grade*.py", "grader.py", "grade.sh", "evaluate.sh", "grading/**", "**/grading/**",
                     "**/evaluate.py", "**/grade.py", "metrics.py", "scoring.py", "score.py")
DEFAULT_RESULTS_NAMES = re.compile(r"(result|metric|score|report|summary|leaderboard|eval|benchmark|"
                                   r"performance|accurac|final)", re.IGNORECASE)
DEFAULT_TEST_DATA = ("**/*test*label*", "**/*test*answer*", "**/*y_test*", "**/*test_y*",
                     "**/*test*target*", "**/*gold*", "**/*test*solution*", "**/*test*truth*",
                     "**/*hidden*label*")
RATIO_METRICS = frozenset({"accuracy", "acc", "r2", "f1", "auc", "auroc", "auprc", "precision",
                           "recall", "iou", "miou", "dice", "map", "ndcg", "mrr", "top1", "top5",
                           "winrate", "kappa", "mcc", "balanced_accuracy", "aup", "aur", "ssim"})
NON_NEGATIVE_METRICS = frozenset({"rmse", "mse", "mae", "mape", "loss", "perplexity", "ppl", "wer",
                                  "cer", "error", "fid", "rmsle", "logloss", "time", "decisions"})


#: ``k`` of the "far beyond the reference" rule (see the module docstring).
DEFAULT_REVIEW_FACTOR = 1.0
#: The environment variable that sets ``k`` (a non-negative number).
REVIEW_FACTOR_ENV = "RGYM_INTEGRITY_REVIEW_FACTOR"


def review_factor() -> tuple[float, str | None]:
    """``k`` of the "far beyond the reference" rule, and the problem with
    ``RGYM_INTEGRITY_REVIEW_FACTOR`` when it is set but not a non-negative number
    (then the default is used)."""
    raw = os.environ.get(REVIEW_FACTOR_ENV, "").strip()
    if not raw:
        return DEFAULT_REVIEW_FACTOR, None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value >= 0 and value != float("inf")):
        return DEFAULT_REVIEW_FACTOR, (f"{REVIEW_FACTOR_ENV}={raw!r} is not a non-negative number; "
                                       f"the default {DEFAULT_REVIEW_FACTOR:g} was used (set it to e.g. 2)")
    return value, None


def _norm(name: str) -> str:
    return re.sub(r"[\s\-]", "_", name.strip().lower())


def default_bounds(metric: str, scores: Iterable[float]) -> tuple[float | None, float | None]:
    """The default range of a metric by its name, on the scale its known scores use."""
    name = _norm(metric)
    words = set(_words(name)) | {name, name.replace("_", "")}
    scores = [s for s in scores if s is not None]
    if words & RATIO_METRICS:
        high = 100.0 if any(abs(s) > 1.0 for s in scores) else 1.0
        if "r2" in words or name in ("r^2", "r_squared"):
            return None, high
        return 0.0, high
    if words & NON_NEGATIVE_METRICS:
        return 0.0, None
    return None, None


def glob_match(path: str, pattern: str) -> bool:
    """``path`` (relative, ``/``-separated) matches ``pattern`` (``**`` crosses folders;
    a pattern without ``/`` matches the file name in any folder)."""
    if "/" not in pattern.strip("/") and not pattern.startswith("**"):
        return core_match(path, pattern) or core_match(path.rsplit("/", 1)[-1], pattern)
    return core_match(path, pattern.lstrip("/") if not pattern.startswith("/") else pattern)


def any_match(path: str, patterns: Iterable[str]) -> bool:
    return any(glob_match(path, p) for p in patterns)


def extension(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return ("." + name.rsplit(".", 1)[1].lower()) if "." in name.strip(".") else ""


def is_text_like(path: str) -> bool:
    return extension(path) in TEXT_EXTENSIONS


def is_code(path: str) -> bool:
    return extension(path) in CODE_EXTENSIONS


REPORT_EXTENSIONS = frozenset({".md", ".tex", ".html", ".rst", ".org", ".ipynb"})
_REPORT_NAMES = re.compile(r"^(readme|report|notes?|summary|writeup|paper|discussion|analysis)\b", re.IGNORECASE)


def is_report(path: str) -> bool:
    """Prose for people (``REPORT.md``, ``notes.txt``): it quotes results."""
    name = path.rsplit("/", 1)[-1]
    return extension(path) in REPORT_EXTENSIONS or bool(_REPORT_NAMES.match(name))


@define
class IntegrityPolicy:
    """The resolved settings of the checks for one episode."""

    task_id: str
    enabled: bool = True
    protected: list[str] = field(factory=list)
    results: list[str] = field(factory=list)
    declared_results: list[str] = field(factory=list)
    test_data: list[str] = field(factory=list)
    declared_test_data: list[str] = field(factory=list)
    #: Absolute paths (inside the sandbox or on the host) the agent must not read.
    hidden_paths: list[str] = field(factory=list)
    #: File names only the grader has (``answers.csv``): naming one is an attempt to reach it.
    hidden_names: list[str] = field(factory=list)
    bounds: dict[str, tuple[float | None, float | None]] = field(factory=dict)
    reference: dict[str, float] = field(factory=dict)
    baseline: dict[str, float] = field(factory=dict)
    directions: dict[str, str] = field(factory=dict)
    sota_margin: float | None = None
    sota_margins: dict[str, float] = field(factory=dict)
    #: Each metric's ceiling (:attr:`rgym_core.specs.Metric.ceiling`): the best value it can take.
    ceilings: dict[str, float] = field(factory=dict)
    #: ``k``: a score more than ``k`` x |reference - baseline| past the better of the two is
    #: flagged for review.
    review_factor: float = DEFAULT_REVIEW_FACTOR
    #: Why a setting could not be used (shown in the report's limits).
    problems: list[str] = field(factory=list)
    primary: str | None = None
    metric_names: list[str] = field(factory=list)
    #: Mounts of read-only datasets in the workspace (left out of listings).
    mounts: list[str] = field(factory=list)
    #: The grader's submission globs (``**/*`` when the task names none).
    submission: list[str] = field(factory=lambda: ["**/*"])
    submission_exclude: list[str] = field(factory=list)
    #: Numbers the agent was given (task description, baseline and reference scores).
    given_text: str = ""
    #: The leakage policy (:class:`rgym_core.leakage.LeakagePolicy`), or ``None``.
    leakage: Any = None
    leakage_error: str | None = None
    workspace: str = ""
    #: The starter files by workspace path (the host file that won, see :func:`starter_files`).
    starter: dict[str, Path] = field(factory=dict)
    #: Why a starter folder could not be used (a dataset's starter that was not prepared).
    starter_error: str | None = None

    def is_result_file(self, path: str) -> bool:
        """Declared results, named submission files, or a data file named like results
        (``results.json``, ``metrics.csv``, ``scores.txt``); reports (``.md``, ``.tex``,
        ``README``...) are prose that quotes results, not results."""
        if any_match(path, self.declared_results) or any_match(path, self.results):
            return True
        if is_code(path) or is_report(path):
            return False
        if self.submission != ["**/*"] and any_match(path, self.submission):
            return True
        return is_text_like(path) and bool(DEFAULT_RESULTS_NAMES.search(path.rsplit("/", 1)[-1]))

    def is_protected(self, path: str) -> bool:
        return any_match(path, self.protected)

    def is_test_data(self, path: str) -> bool:
        return any_match(path, self.test_data)


def starter_folders_of(task: Any, datasets: Mapping[str, Any] | None = None) -> tuple[list[Path], str | None]:
    """Every folder whose files make up a fresh workspace, in copy order (the core's
    :func:`rgym_core.datasets.starter_folders`: a dataset's ``starter: true`` folder,
    then the task's ``shared_starter_files`` and ``starter_files``), and why a folder is
    missing (``None`` when none is).  Never raises: without the prepared datasets only
    the task's own folders are returned, with the reason."""
    paths = (task.starter_paths() if hasattr(task, "starter_paths")  # shared folders, then own
             else [(task.starter_files, task.path(task.starter_files))])
    fallback = [folder for _, folder in paths if folder is not None and folder.is_dir()]
    try:
        from rgym_core import starter_folders
    except ImportError:  # a core without dataset starters
        return fallback, None
    try:
        return list(starter_folders(task, datasets or {})), None
    except Exception as exc:  # noqa: BLE001 - DatasetError, or a prepare function's odd result
        mount = getattr(task, "starter_dataset", None)
        what = f"dataset '{mount.id}'" if mount is not None else "a dataset"
        return fallback, f"the starter files of {what} are not at hand ({exc}); only the task's own are known"


def starter_files(task: Any, datasets: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """The starter files by workspace path (``a/b.py``) -> the host file that is copied
    there: every folder of :func:`starter_folders_of`, a later folder's file winning
    over an earlier one's with the same path (as the workspace is made)."""
    return merge_starter_folders(starter_folders_of(task, datasets)[0])


def merge_starter_folders(folders: Iterable[Path]) -> dict[str, Path]:
    """The files of ``folders`` by relative path; a later folder's file wins."""
    out: dict[str, Path] = {}
    for folder in folders:
        for rel in _starter_files(folder):
            out[rel] = folder / rel
    return out


def _starter_files(root: Path | None) -> list[str]:
    if root is None or not root.is_dir():
        return []
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", ".git")]
        for name in filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
            if len(out) > 5000:
                return out
    return out


def _grader_names(task: Any) -> tuple[list[str], list[str]]:
    """The grader folder's path and the names of the files only the grader has."""
    paths: list[str] = []
    names: set[str] = set()
    folder = task.path(task.grader.files) if getattr(task, "root", None) is not None else None
    if folder is not None and folder.is_dir():
        paths.append(str(folder))
        for rel in _starter_files(folder):
            names.add(rel.rsplit("/", 1)[-1])
    return paths, sorted(names)


def _dataset_private(datasets: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    paths: list[str] = []
    names: set[str] = set()
    for prepared in datasets.values():
        private = getattr(prepared, "private", None)
        if private is not None and Path(private).exists():
            paths.append(str(private))
            if Path(private).is_dir():
                for rel in _starter_files(Path(private)):
                    names.add(rel.rsplit("/", 1)[-1])
    return paths, sorted(names)


def _public_names(starter: Iterable[str], datasets: Mapping[str, Any]) -> set[str]:
    names = {rel.rsplit("/", 1)[-1] for rel in starter}
    for prepared in datasets.values():
        public = getattr(prepared, "public", None)
        if public is not None and Path(public).is_dir():
            names |= {rel.rsplit("/", 1)[-1] for rel in _starter_files(Path(public))}
    return names


_GENERIC_NAMES = frozenset({"evaluate.py", "__init__.py", "README.md", "readme.md", "requirements.txt",
                            "config.yaml", "config.json", "main.py", "utils.py", "run.sh", "setup.py",
                            "data.csv", "train.csv", "test.csv", "model.py", "grade.py", "LICENSE"})


def _leakage(task: Any) -> tuple[Any, str | None]:
    from rgym_core import KNOWN_KEYS, LeakageConfigError, LeakagePolicy, task_policy

    config = dict(getattr(task, "tool_config", {}) or {})
    try:
        policy = task_policy(config, None, task_id=task.id, base_dir=task.root)
        for key, value in config.items():
            if key == "leakage" or not isinstance(value, Mapping):
                continue
            if any(k in value for k in KNOWN_KEYS):
                policy = policy.merged(task_policy(config, key, task_id=task.id, base_dir=task.root,
                                                   tool_keys=[k for k in value if k not in KNOWN_KEYS]))
    except (LeakageConfigError, OSError, ValueError) as exc:
        return LeakagePolicy(), str(exc)
    return (policy if policy.active else None), None


def resolve_policy(task: Any, datasets: Mapping[str, Any] | None = None, *,
                   run_dir: Path | None = None, workspace: str = "") -> IntegrityPolicy:
    """The settings for ``task`` (a :class:`~rgym_core.specs.TaskSpec`, profile applied)."""
    datasets = datasets or {}
    spec = getattr(task, "integrity", None)
    folders, starter_error = starter_folders_of(task, datasets)
    starter_map = merge_starter_folders(folders)
    starter = list(starter_map)
    protected = list(getattr(spec, "protected", []) or [])
    protected += [f for f in starter if any_match(f, DEFAULT_PROTECTED)]
    grader_paths, grader_names = _grader_names(task)
    private_paths, private_names = _dataset_private(datasets)
    public = _public_names(starter, datasets)
    hidden_names = sorted({n for n in [*grader_names, *private_names]
                           if n not in public and n not in _GENERIC_NAMES and len(n) >= 5
                           and not n.endswith((".pyc",))})
    hidden_paths = [*grader_paths, *private_paths, "/eval"]
    if getattr(task, "root", None) is not None:
        hidden_paths.append(str(task.root))
    if run_dir is not None:
        try:
            hidden_paths.append(str(Path(run_dir).resolve().parent.parent))
        except OSError:
            pass
    hidden_paths += list(getattr(spec, "hidden", []) or [])
    scores = {m.name: [v for v in (task.baseline_scores.get(m.name), task.reference_scores.get(m.name))
                       if v is not None] for m in task.metrics}
    bounds: dict[str, tuple[float | None, float | None]] = {}
    ceilings: dict[str, float] = {}
    for metric in task.metrics:
        ceiling = getattr(metric, "ceiling", None)
        if ceiling is not None:
            ceilings[metric.name] = float(ceiling)
        declared = (getattr(spec, "bounds", {}) or {}).get(metric.name)
        if declared is not None:
            bounds[metric.name] = (declared[0], declared[1])
        else:
            low, high = default_bounds(metric.name, scores[metric.name])
            if ceiling is not None and metric.direction == "minimize":
                low = float(ceiling)
            elif ceiling is not None:
                high = float(ceiling)
            if low is not None or high is not None:
                bounds[metric.name] = (low, high)
    factor, factor_problem = review_factor()
    leakage, leakage_error = _leakage(task)
    given = [task.description, " ".join(f"{k} {v}" for k, v in task.baseline_scores.items()),
             " ".join(f"{k} {v}" for k, v in task.reference_scores.items())]
    for sub in getattr(task, "subtasks", []) or []:
        given.append(" ".join(f"{k} {v}" for k, v in {**sub.baseline_scores, **sub.reference_scores}.items()))
    declared_results = list(getattr(spec, "results", []) or [])
    declared_test = list(getattr(spec, "test_data", []) or [])
    return IntegrityPolicy(
        task_id=task.id, enabled=bool(getattr(spec, "enabled", True)),
        protected=sorted(set(protected)), results=declared_results, declared_results=declared_results,
        test_data=[*declared_test, *DEFAULT_TEST_DATA], declared_test_data=declared_test,
        hidden_paths=[p for p in hidden_paths if p], hidden_names=hidden_names, bounds=bounds,
        reference=dict(task.reference_scores), baseline=dict(task.baseline_scores),
        directions={m.name: m.direction for m in task.metrics},
        sota_margin=getattr(spec, "sota_margin", None), sota_margins=dict(getattr(spec, "sota_margins", {}) or {}),
        ceilings=ceilings, review_factor=factor, problems=[factor_problem] if factor_problem else [],
        primary=task.primary_metric.name, metric_names=[m.name for m in task.metrics],
        mounts=[m.mount for m in task.datasets], submission=list(task.grader.submission),
        submission_exclude=list(task.grader.exclude), given_text="\n".join(given),
        leakage=leakage, leakage_error=leakage_error, workspace=workspace, starter=starter_map,
        starter_error=starter_error)


__all__ = ["CODE_EXTENSIONS", "DEFAULT_PROTECTED", "DEFAULT_REVIEW_FACTOR", "REVIEW_FACTOR_ENV", "DEFAULT_TEST_DATA", "TEXT_EXTENSIONS", "IntegrityPolicy",
           "any_match", "default_bounds", "extension", "glob_match", "is_code", "is_text_like",
           "merge_starter_folders", "resolve_policy", "starter_files",
           "review_factor", "starter_folders_of"]
