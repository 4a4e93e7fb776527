"""Declarative specs: tasks, datasets, metrics, baselines, resources and budgets.

All specs are frozen attrs classes.  They are read from YAML or JSON with
:func:`rgym_core.serialization.load_spec`, which reports a bad file as one line
``path: field.path: what is wrong``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

import attrs
from attrs import define, field

Direction = Literal["maximize", "minimize"]
GraderLocation = Literal["host", "sandbox"]


class FieldError(ValueError):
    """A validator's verdict on one field: ``field`` is its name, ``message`` what is
    wrong.  Spec loading reports it as ``file: path.to.field: message``."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"'{field}' {message}")


def _positive(instance: Any, attribute: attrs.Attribute, value: float | int | None) -> None:
    if value is not None and value <= 0:
        raise FieldError(attribute.name, f"must be positive, got {value!r}")


def _non_negative(instance: Any, attribute: attrs.Attribute, value: float | int | None) -> None:
    if value is not None and value < 0:
        raise FieldError(attribute.name, f"must be non-negative, got {value!r}")


def _finite(instance: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or not math.isfinite(value)):
        raise FieldError(attribute.name, f"must be a finite number (or null for none), got {value!r}")


def _last_digit(value: float | None) -> float:
    """Half a unit of the last digit written in ``value`` (``-0.24851`` -> ``5e-6``,
    ``31000`` -> ``0.5``), at least ``1e-9`` relative: the rounding a recorded score
    carries.  A recorded zero is exact."""
    if value is None or not math.isfinite(value) or value == 0:
        return 1e-12
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    decimals = len(mantissa.partition(".")[2].rstrip("0")) - int(exponent or 0)
    return max(0.5 * 10.0 ** -decimals, abs(value) * 1e-9)


def _namespaced(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    parts = value.split("/")
    if len(parts) != 2 or not all(parts) or any(c.isspace() for c in value):
        raise FieldError(attribute.name, f"must be namespaced as 'pack/name' without spaces, got {value!r}")


@define(frozen=True)
class Metric:
    """A metric the grader reports. Exactly one metric of a task is primary.

    ``ceiling``: the best value the metric can take, when it has one (accuracy 1.0,
    R² 1.0, a percentage 100; for a minimised metric its floor: RMSE 0).  A score
    at the ceiling is what copied test labels or a broken grader give, so the
    integrity monitor flags it for review, and a score past it as impossible.
    """

    name: str
    direction: Direction = "maximize"
    primary: bool = False
    description: str = ""
    ceiling: float | None = field(default=None, validator=_finite)

    def better(self, a: float | None, b: float | None) -> bool:
        """True when ``a`` is strictly better than ``b`` (see :func:`rgym_core.direction.better`)."""
        from rgym_core.direction import better

        return better(a, b, self.direction)


#: What a recorded baseline ran on (``Baseline.measured_on``): ``data``, the data the
#: task (or profile) declares, so its runs are graded on the same; ``fixture``, a test
#: fixture or other stand-in (generated images, a tiny sample) used because the real
#: data was not at hand; ``published``, not measured by rgym at all: the original's
#: published figure, copied (also in :class:`Published`) until rgym reproduces it.
#: A ``fixture`` figure only checks that the baseline still reproduces (``rgym
#: check-pack``): it is never a baseline for scoring, nor shown to the agent.
MeasuredOn = Literal["data", "fixture", "published"]
#: Fields of a baseline that describe one measurement: a profile that records its
#: own ``scores`` does not inherit the task's.
MEASUREMENT_FIELDS = ("measured_on", "machine", "data")


@define(frozen=True)
class Baseline:
    """How to run the starter solution, and the scores rgym recorded for it.

    ``rgym check-pack`` runs ``command`` in a local sandbox, grades the result and
    compares each score with ``scores``: a measured score passes when it is within
    ``tolerance`` of the recorded one (an absolute difference; ``tolerances`` sets
    it per metric).  The default allows rounding in the last recorded digit only,
    so a grader with run-to-run noise states its tolerance here.

    ``measured_on``, ``machine`` and ``data`` say where the scores were measured
    (see :data:`MeasuredOn`); the original benchmark's own figures go in
    :class:`Published`, never here.  :attr:`usable_scores` is what runs are scored,
    and agents prompted, against.
    """

    command: str | None = None
    scores: dict[str, float] = field(factory=dict)
    description: str = ""
    tolerance: float | None = field(default=None, validator=_non_negative)
    tolerances: dict[str, float] = field(factory=dict)
    measured_on: MeasuredOn | None = None
    machine: str = ""
    data: str = ""

    @property
    def on_fixture(self) -> bool:
        """True when the scores were measured on a test fixture (see :data:`MeasuredOn`)."""
        return self.measured_on == "fixture"

    @property
    def usable_scores(self) -> dict[str, float]:
        """The scores a run may be compared with: none when measured on a fixture."""
        return {} if self.on_fixture else dict(self.scores)

    @tolerances.validator
    def _check_tolerances(self, attribute: attrs.Attribute, value: dict[str, float]) -> None:
        for name, tol in value.items():
            if tol < 0:
                raise FieldError(f"tolerances['{name}']", f"must be non-negative, got {tol!r}")

    def tolerance_for(self, metric: str) -> float:
        """The absolute difference allowed between a measured and the recorded score."""
        if metric in self.tolerances:
            return self.tolerances[metric]
        if self.tolerance is not None:
            return self.tolerance
        return _last_digit(self.scores.get(metric))


@define(frozen=True)
class Published:
    """The original benchmark's own figures for a task (or profile), as published.

    ``baseline``: the original's baseline scores (MLGym's ``baseline_scores``, a
    paper's baseline row); ``reference``: its best or state-of-the-art figure, when
    it publishes one.  ``source`` cites where they are (a repository file at a
    commit, or a paper's table) and is required with any figure; ``setting`` says
    what they were measured on (hardware, data, sizes) when it is known.  These are
    never rgym's measurements: ``rgym score --baselines published`` uses them.
    ``comparable: false`` says that rgym's metric is not the original's (other data,
    another definition): ``rgym score`` then never picks them by default.
    """

    baseline: dict[str, float] = field(factory=dict)
    reference: dict[str, float] = field(factory=dict)
    source: str = ""
    setting: str = ""
    note: str = ""
    comparable: bool = True

    def __attrs_post_init__(self) -> None:
        for what in ("baseline", "reference"):
            for name, value in getattr(self, what).items():
                if isinstance(value, bool) or not math.isfinite(value):
                    raise FieldError(f"{what}['{name}']", f"must be a finite number, got {value!r}")
        if (self.baseline or self.reference) and not self.source.strip():
            raise FieldError("source", "is required with published figures: cite the repository "
                                       "file (at a commit) or the paper's table they come from")


@define(frozen=True)
class SubTask:
    """A part of a research task, scored on its own (ResearchGym's sub-tasks)."""

    id: str
    description: str = ""
    metric: str | None = None
    baseline_scores: dict[str, float] = field(factory=dict)
    reference_scores: dict[str, float] = field(factory=dict)
    weight: float = field(default=1.0, validator=_positive)
    primary: bool = False
    #: False: declared by the original but not graded by rgym (yet): listed by ``rgym show``
    #: and ``rgym score``, left out of completion and of the normalised means, which then
    #: say "of N graded".
    graded: bool = True


#: Default workspace quota (``resources.disk_mb``), in MiB.
DEFAULT_DISK_MB = 2048


@define(frozen=True)
class Resources:
    """What a task needs, and the limits its sandbox gets."""

    memory_mb: int | None = field(default=None, validator=_positive)
    cpus: float | None = field(default=None, validator=_positive)
    pids: int | None = field(default=None, validator=_positive)
    gpus: int = 0
    network: bool = False
    image: str | None = None
    requirements: list[str] = field(factory=list)
    #: Workspace quota in MiB: the most the agent's workspace may hold when it is
    #: copied out for grading or archiving (apparent size, sparse files counted in full).
    disk_mb: int = field(default=DEFAULT_DISK_MB, validator=_positive)


#: MLGym's training-command words (``mlgym/environment/env.py``, ``configs/tasks/README.md``).
TRAINING_COMMANDS = ("torchrun", "python", "python3", "accelerate", "deepspeed")


@define(frozen=True)
class Budget:
    """Limits of one episode. ``None`` means unlimited."""

    max_steps: int | None = field(default=50, validator=_positive)
    time_limit_s: float | None = field(default=3600.0, validator=_positive)
    action_timeout_s: float = field(default=600.0, validator=_positive)
    cost_limit_usd: float | None = field(default=None, validator=_positive)
    token_limit: int | None = field(default=None, validator=_positive)
    #: The timeout of a training command (MLGym's ``training_timeout``): a shell command
    #: in which one of ``training_commands`` occurs; ``None``: ``action_timeout_s`` for all.
    training_timeout_s: float | None = field(default=None, validator=_positive)
    #: The words that make a shell command a training command, matched as substrings of
    #: the whole command line as MLGym's ``env.step`` does (so ``python3`` and
    #: ``cd src && python train.py`` count).
    training_commands: list[str] = field(factory=lambda: list(TRAINING_COMMANDS))

    def merged(self, **overrides: Any) -> Budget:
        """A copy with every override that is not ``None`` applied."""
        return attrs.evolve(self, **{k: v for k, v in overrides.items() if v is not None})

    def is_training_command(self, command: str) -> bool:
        """Whether shell ``command`` gets ``training_timeout_s`` (MLGym's rule: any
        of ``training_commands`` occurs in it)."""
        return any(word and word in command for word in self.training_commands)

    def timeout_for(self, command: str | None) -> float:
        """The timeout of one action: ``training_timeout_s`` for a training shell
        command (``command`` is the shell command line, ``None`` for other tools),
        else ``action_timeout_s``."""
        if self.training_timeout_s is not None and command is not None \
                and self.is_training_command(command):
            return self.training_timeout_s
        return self.action_timeout_s


@define(frozen=True)
class GraderSpec:
    """Where the grader lives and how it runs.

    ``files`` is a folder of the task directory that only the grader sees;
    ``entry`` a Python script inside it.  The runner lays out a fresh evaluation
    folder for every grading (``submission/``, ``grader/``, ``data/<mount>`` and
    ``private/<mount>``), runs ``python grader/<entry>`` there with
    ``RGYM_SCORES_FILE`` pointing at the JSON file the grader must write, and
    never executes a file the agent could edit.  ``include`` maps extra files or
    folders of the pack (paths relative to the task folder, e.g.
    ``../_shared/arena.py``) to names inside ``grader/``, so tasks of one pack share
    grader code without copies.  ``location`` chooses the host or
    a separate short-lived sandbox (for backends that support it).
    """

    entry: str = "evaluate.py"
    files: str = "grader"
    include: dict[str, str] = field(factory=dict)
    location: GraderLocation = "host"
    timeout_s: float = field(default=600.0, validator=_positive)
    submission: list[str] = field(factory=lambda: ["**/*"])
    exclude: list[str] = field(factory=lambda: ["data/**"])


@define(frozen=True)
class DatasetMount:
    """A dataset a task uses, and the folder of the workspace it appears in.

    ``starter: true`` makes the dataset supply the agent's starter files as well:
    its prepared :attr:`PreparedDataset.starter` folder (else its public folder)
    is copied into the workspace, writable, before the task's own
    ``starter_files`` (which win where both have a file).  A task whose starter
    files must be prepared on the user's machine (a verified checkout of another
    repository, with test labels moved out) declares them this way instead of
    writing a machine-specific path into ``starter_files``.  At most one mount of
    a task (or of a profile) is the starter.
    """

    id: str = field(validator=_namespaced)
    mount: str = "data"
    starter: bool = False


def _one_starter(where: str, mounts: list[DatasetMount]) -> None:
    starters = [m.id for m in mounts if m.starter]
    if len(starters) > 1:
        raise FieldError(where, f"at most one dataset may have 'starter: true', found {len(starters)} "
                                f"({', '.join(starters)})")
    folders = [m.mount for m in mounts]
    doubled = sorted({f for f in folders if folders.count(f) > 1})
    if doubled:
        raise FieldError(where, f"mount folder(s) {', '.join(doubled)} used by more than one dataset")


def _check_subtasks(where: str, subtasks: list[SubTask], metrics: set[str]) -> None:
    ids = [s.id for s in subtasks]
    doubled = sorted({i for i in ids if ids.count(i) > 1})
    if doubled:
        raise FieldError(where, f"sub-task ids must be unique, {', '.join(doubled)} repeated")
    primaries = [s.id for s in subtasks if s.primary]
    if len(primaries) > 1:
        raise FieldError(where, f"at most one sub-task may be primary, found {', '.join(primaries)}")
    for sub in subtasks:
        named = {sub.metric} | set(sub.baseline_scores) | set(sub.reference_scores)
        unknown = sorted(m for m in named if m is not None and m not in metrics)
        if unknown:
            raise FieldError(where, f"sub-task '{sub.id}' names unknown metric(s) {', '.join(unknown)}; "
                                    f"the task's metrics: {', '.join(sorted(metrics))}")


@define(frozen=True)
class IntegritySpec:
    """What the integrity monitor (the ``rgym-integrity`` plugin) checks for a task.

    Paths are globs relative to the workspace (``**`` crosses folders), or absolute
    paths.  ``protected``: evaluation files the agent must not change (hashed at the
    start, at every validation and at the end; the default: starter files named like
    evaluation code).  ``results``: files the evaluation or the agent's report reads as
    results, which must be written by a process that computed them.  ``test_data``:
    test data that training commands must not read.  ``hidden``: paths the agent must
    not try to read (the grader's files and private data are always hidden).
    ``bounds``: a metric's possible range, ``[low, high]`` (``null`` for no bound).
    ``sota_margin``: a score better than the reference score by more than this
    fraction of it is implausible; ``sota_margins``: the same per metric, as an
    absolute difference.  ``enabled: false`` turns the monitor off for the task.
    """

    enabled: bool = True
    protected: list[str] = field(factory=list)
    results: list[str] = field(factory=list)
    test_data: list[str] = field(factory=list)
    hidden: list[str] = field(factory=list)
    bounds: dict[str, list[float | None]] = field(factory=dict)
    sota_margin: float | None = field(default=None, validator=_non_negative)
    sota_margins: dict[str, float] = field(factory=dict)

    @bounds.validator
    def _check_bounds(self, attribute: attrs.Attribute, value: dict[str, list[float | None]]) -> None:
        for name, pair in value.items():
            if len(pair) != 2:
                raise FieldError(f"bounds['{name}']", f"must be [low, high] (null for no bound), got {pair!r}")
            low, high = pair
            if low is not None and high is not None and low > high:
                raise FieldError(f"bounds['{name}']", f"low {low!r} is above high {high!r}")

    @sota_margins.validator
    def _check_margins(self, attribute: attrs.Attribute, value: dict[str, float]) -> None:
        for name, margin in value.items():
            if margin < 0:
                raise FieldError(f"sota_margins['{name}']", f"must be non-negative, got {margin!r}")


#: The parts of a task a profile may override.
PROFILE_SECTIONS = ("budget", "resources", "grader", "baseline", "reference_scores", "datasets", "subtasks",
                    "env", "published")
#: The profile sections that replace the task's whole (the others merge field by field).
WHOLE_SECTIONS = ("reference_scores", "datasets", "subtasks", "published")


@define(frozen=True)
class TaskProfile:
    """A named configuration of a task (``cpu``, ``mlgym``...): same code, other sizes.

    In ``task.yaml`` each profile is a *partial* override of the task: the fields it
    gives in ``budget``, ``resources``, ``grader`` and ``baseline`` replace the task's,
    field by field (a ``baseline.scores`` mapping is replaced whole: it is that
    profile's own measurement); ``reference_scores``, ``datasets`` and ``subtasks``
    replace the task's (a profile that grades other sub-tasks than the task's,
    e.g. a small generated benchmark standing in for the real-data ones, lists
    them, primary first, with that profile's baselines); ``env`` adds variables
    to the task's.  Once loaded, every section a
    profile gave holds the merged, validated value, and a section left ``None``
    means "as the task".  :meth:`TaskSpec.with_profile` applies one.

    ``prompt`` (or ``prompt_file``, a text file relative to the task folder) replaces
    the task's ``description``, the statement the agent reads (the ``mlgym`` profile
    gives MLGym's text); ``tool_config`` is merged into the task's per tool namespace
    and key (``{rgym: {window: 1000}}`` changes only the viewer's window).
    """

    description: str = ""
    budget: Budget | None = None
    resources: Resources | None = None
    grader: GraderSpec | None = None
    baseline: Baseline | None = None
    reference_scores: dict[str, float] | None = None
    datasets: list[DatasetMount] | None = None
    subtasks: list[SubTask] | None = None
    env: dict[str, str] | None = None
    published: Published | None = None
    prompt: str | None = None
    prompt_file: str | None = None
    tool_config: dict[str, dict[str, Any]] | None = None
    #: Why rgym cannot run this profile as the original did (its data, weights or grader
    #: are not there yet): ``rgym run`` refuses it with this text, ``rgym show`` says it,
    #: rather than grading something smaller under the original's name.
    unavailable: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.prompt is not None and self.prompt_file is not None:
            raise FieldError("prompt_file", "give either 'prompt' (the text) or 'prompt_file' "
                                            "(a file of the task folder), not both")


def _shared_starters(instance: Any, attribute: attrs.Attribute, value: list[str]) -> None:
    for i, entry in enumerate(value):
        if not isinstance(entry, str) or not entry.strip():
            raise FieldError(f"{attribute.name}[{i}]", "must be a folder path relative to the task "
                                                       "folder, e.g. '../_shared/starter'")
        if entry.startswith(("/", "\\")) or (len(entry) > 1 and entry[1] == ":"):
            raise FieldError(f"{attribute.name}[{i}]", f"must be relative to the task folder (e.g. "
                                                       f"'../_shared/starter'), not a machine-specific "
                                                       f"path like {entry!r}")


def _env_names(instance: Any, attribute: attrs.Attribute, value: dict[str, str]) -> None:
    for key in value:
        if not key or "=" in key or "\0" in key or key[0].isdigit():
            raise FieldError(attribute.name, f"has an invalid variable name {key!r}")
        if key == "RGYM_PROFILE":
            raise FieldError(attribute.name, "must not set RGYM_PROFILE: rgym sets it to the profile's name")


@define(frozen=True)
class TaskSpec:
    """Everything rgym needs to know to run and grade one task.

    ``profiles`` names configurations of the task (see :class:`TaskProfile`);
    ``default_profile`` (else the first profile) is the one a run gets when it
    asks for none.  A spec returned by :meth:`with_profile` has the profile
    applied and its name in ``profile``; ``env`` is extra environment for the
    agent's shell and the grader (rgym adds ``RGYM_PROFILE``).

    ``shared_starter_files`` lists folders of starter files that several tasks of a
    pack share (paths relative to the task folder, e.g. ``../_shared/ppo``): they are
    copied into the workspace in order before the task's own ``starter_files``, whose
    files win (see :meth:`starter_paths`).
    """

    id: str = field(validator=_namespaced)
    description: str
    metrics: list[Metric] = field()
    name: str = ""
    starter_files: str | None = "starter"
    shared_starter_files: list[str] = field(factory=list, validator=_shared_starters)
    grader: GraderSpec = field(factory=GraderSpec)
    datasets: list[DatasetMount] = field(factory=list)
    baseline: Baseline | None = None
    reference_scores: dict[str, float] = field(factory=dict)
    published: Published = field(factory=Published)
    subtasks: list[SubTask] = field(factory=list)
    resources: Resources = field(factory=Resources)
    budget: Budget = field(factory=Budget)
    tools: list[str] = field(factory=list)
    tool_config: dict[str, dict[str, Any]] = field(factory=dict)
    scripted_actions: list[dict[str, Any]] = field(factory=list)
    tags: list[str] = field(factory=list)
    version: str = "1"
    env: dict[str, str] = field(factory=dict, validator=_env_names)
    default_profile: str | None = None
    profiles: dict[str, TaskProfile] = field(factory=dict)
    profile: str | None = None
    integrity: IntegritySpec = field(factory=IntegritySpec)
    root: Path | None = field(default=None, eq=False)

    @metrics.validator
    def _check_metrics(self, attribute: attrs.Attribute, value: list[Metric]) -> None:
        if not value:
            raise FieldError("metrics", "must list at least one metric")
        primaries = [m.name for m in value if m.primary]
        if len(value) > 1 and len(primaries) != 1:
            raise FieldError("metrics", f"must have exactly one entry with 'primary: true', found "
                                        f"{len(primaries)} ({', '.join(primaries) or 'none'})")
        names = [m.name for m in value]
        if len(set(names)) != len(names):
            raise FieldError("metrics", f"must have unique names, got {names}")

    @profiles.validator
    def _check_profiles(self, attribute: attrs.Attribute, value: dict[str, TaskProfile]) -> None:
        for name, profile in value.items():
            if not name or not all(c.isalnum() or c in "-_." for c in name):
                raise FieldError("profiles", f"names must be letters, digits, '-', '_' or '.', "
                                             f"got {name!r}")
            if profile.env:
                try:
                    _env_names(self, attrs.fields(TaskProfile).env, profile.env)
                except FieldError as exc:
                    raise FieldError(f"profiles['{name}'].env", exc.message) from None
            metric_names = {m.name for m in self.metrics}
            if profile.datasets is not None:
                _one_starter(f"profiles['{name}'].datasets", profile.datasets)
            if profile.subtasks is not None:
                _check_subtasks(f"profiles['{name}'].subtasks", profile.subtasks, metric_names)
            published = profile.published or Published()
            for what, scores in (("baseline.scores", profile.baseline.scores if profile.baseline else {}),
                                 ("reference_scores", profile.reference_scores or {}),
                                 ("published.baseline", published.baseline),
                                 ("published.reference", published.reference)):
                unknown = sorted(set(scores) - metric_names)
                if unknown:
                    raise FieldError(f"profiles['{name}'].{what}",
                                     f"names unknown metric(s) {', '.join(unknown)}; the task's "
                                     f"metrics: {', '.join(sorted(metric_names))}")
        known = ", ".join(value) or "it has none"
        if self.default_profile is not None and self.default_profile not in value:
            raise FieldError("default_profile", f"must name one of the task's profiles ({known}), "
                                                f"got {self.default_profile!r}")
        if self.profile is not None and self.profile not in value:
            raise FieldError("profile", f"must name one of the task's profiles ({known}), "
                                        f"got {self.profile!r}")

    @datasets.validator
    def _check_datasets(self, attribute: attrs.Attribute, value: list[DatasetMount]) -> None:
        _one_starter("datasets", value)

    @subtasks.validator
    def _check_task_subtasks(self, attribute: attrs.Attribute, value: list[SubTask]) -> None:
        _check_subtasks("subtasks", value, {m.name for m in self.metrics})

    @published.validator
    def _check_published(self, attribute: attrs.Attribute, value: Published) -> None:
        names = {m.name for m in self.metrics}
        for what in ("baseline", "reference"):
            unknown = sorted(set(getattr(value, what)) - names)
            if unknown:
                raise FieldError(f"published.{what}", f"names unknown metric(s) {', '.join(unknown)}; "
                                                      f"the task's metrics: {', '.join(sorted(names))}")

    @integrity.validator
    def _check_integrity(self, attribute: attrs.Attribute, value: IntegritySpec) -> None:
        names = {m.name for m in self.metrics}
        for what in ("bounds", "sota_margins"):
            unknown = sorted(set(getattr(value, what)) - names)
            if unknown:
                raise FieldError(f"integrity.{what}", f"names unknown metric(s) {', '.join(unknown)}; "
                                                     f"the task's metrics: {', '.join(sorted(names))}")

    @property
    def namespace(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def profile_names(self) -> list[str]:
        """The task's profiles, the default one first."""
        default = self.default_profile_name
        return ([default] if default else []) + [n for n in self.profiles if n != default]

    @property
    def default_profile_name(self) -> str | None:
        """``default_profile``, else the first profile, else ``None``."""
        return self.default_profile or next(iter(self.profiles), None)

    def with_profile(self, name: str | None = None) -> TaskSpec:
        """This task with profile ``name`` applied (``None``: the default profile).

        The returned spec has ``profile`` set to the chosen name (``None`` when the
        task has no profiles and none was asked for).  An unknown name raises
        :class:`~rgym_core.serialization.SpecError` naming the task and its profiles.
        """
        if name is None:
            name = self.profile or self.default_profile_name
            if name is None:
                return self
        if name not in self.profiles:
            from rgym_core.errors import SpecError

            known = ", ".join(self.profile_names) or "none"
            source = str(self.root / "task.yaml") if self.root is not None else f"task '{self.id}'"
            raise SpecError(source, "profile",
                            f"unknown profile '{name}'; the profiles of '{self.id}' are: {known} "
                            f"(`rgym show {self.id}` describes them)")
        if self.profile == name:
            return self
        if self.profile is not None:
            raise ValueError(f"task '{self.id}' already has profile '{self.profile}' applied; "
                             f"apply '{name}' to the task as registered")
        profile = self.profiles[name]
        changes: dict[str, Any] = {"profile": name}
        for section in PROFILE_SECTIONS:
            value = getattr(profile, section)
            if value is None:
                continue
            changes[section] = {**self.env, **value} if section == "env" else value
        if profile.tool_config is not None:
            merged = {ns: dict(cfg) for ns, cfg in self.tool_config.items()}
            for ns, cfg in profile.tool_config.items():
                merged[ns] = {**merged.get(ns, {}), **cfg}
            changes["tool_config"] = merged
        prompt = profile.prompt
        if profile.prompt_file is not None:
            prompt = self._profile_prompt(name, profile.prompt_file)
        if prompt is not None:
            changes["description"] = prompt
        return attrs.evolve(self, **changes)

    def _profile_prompt(self, name: str, relative: str) -> str:
        """The text of profile ``name``'s ``prompt_file``; a missing file is a SpecError."""
        from rgym_core.errors import SpecError

        source = str(self.root / "task.yaml") if self.root is not None else f"task '{self.id}'"
        path = self.path(relative)
        try:
            if path is None:
                raise FileNotFoundError(relative)
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(source, f"profiles['{name}'].prompt_file",
                            f"cannot read {relative!r} ({type(exc).__name__}); give a UTF-8 text "
                            "file relative to the task folder") from None

    @property
    def primary_metric(self) -> Metric:
        """The primary metric (the only metric when there is just one)."""
        for m in self.metrics:
            if m.primary:
                return m
        return self.metrics[0]

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)

    @property
    def baseline_scores(self) -> dict[str, float]:
        """The measured baseline's scores that runs are scored, and agents prompted,
        against: none when they were measured on a test fixture (see
        :attr:`Baseline.usable_scores`; ``baseline.scores`` keeps the figures
        ``rgym check-pack`` reproduces)."""
        return self.baseline.usable_scores if self.baseline else {}

    def starter_paths(self) -> list[tuple[str, Path | None]]:
        """The task's own starter folders in copy order, each as ``(as written in
        task.yaml, path)``: every ``shared_starter_files`` entry, then ``starter_files``
        (a later folder's file wins), resolved (``None`` for a task without a
        directory).  Whether they exist is not checked here (see
        :func:`rgym_core.datasets.starter_folders`)."""
        entries = [*self.shared_starter_files,
                   *([self.starter_files] if self.starter_files is not None else [])]
        paths = [(entry, self.path(entry)) for entry in entries]
        return [(entry, None if path is None else path.resolve()) for entry, path in paths]

    @property
    def starter_dataset(self) -> DatasetMount | None:
        """The dataset mount that supplies starter files (``starter: true``), if any."""
        return next((m for m in self.datasets if m.starter), None)

    def path(self, relative: str | None) -> Path | None:
        """A path inside the task's directory, or ``None``.

        ``module:NAME`` (in ``grader.include``, say) names an installed Python
        module instead: its file, or a package's folder (``None`` when it is not
        installed), so a pack can ship a helper from another distribution to its
        graders without a machine-specific path.
        """
        if relative is None:
            return None
        if relative.startswith(MODULE_PREFIX):
            return module_path(relative[len(MODULE_PREFIX):])
        if self.root is None:
            return None
        return self.root / relative


@define(frozen=True)
class DatasetSpec:
    """A dataset: where it comes from, how to check it, and what form it has.

    ``path`` (a local folder, relative to the spec file), ``url`` (an archive or
    file, fetched once into the cache) or ``hub_id`` (resolved by ``prepare``)
    say where it comes from; ``checksums`` maps file names to SHA-256 digests.
    ``prepare`` is an optional ``module:function`` that turns the raw files into
    a :class:`PreparedDataset` (for example a reproducible split whose test
    labels go to the grader only).  Datasets are always read-only to the agent.
    """

    id: str = field(validator=_namespaced)
    description: str = ""
    form: str = ""
    path: str | None = None
    url: str | None = None
    hub_id: str | None = None
    checksums: dict[str, str] = field(factory=dict)
    prepare: str | None = None
    options: dict[str, Any] = field(factory=dict)
    root: Path | None = field(default=None, eq=False)

    @property
    def namespace(self) -> str:
        return self.id.split("/", 1)[0]


@define(frozen=True)
class PreparedDataset:
    """A dataset ready on the host: ``public`` is shown to the agent read-only;
    ``private`` (test labels and the like) reaches only the grader; ``starter``
    (optional) is a folder of starter files, copied writable into the workspace
    when the task mounts the dataset with ``starter: true`` (without it, the
    public folder is copied)."""

    id: str
    public: Path
    private: Path | None = None
    starter: Path | None = None


#: ``grader.include: {"module:NAME": target}`` names an installed module (see :meth:`TaskSpec.path`).
MODULE_PREFIX = "module:"


def module_path(name: str) -> Path | None:
    """The file of installed module ``name`` (a package: its folder), without
    importing it (a dotted name imports its parent packages); ``None`` when absent."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin) if spec.origin and spec.origin not in ("built-in", "frozen") else None


def is_better(value: float | None, other: float | None, direction: Direction) -> bool:
    """True when ``value`` beats ``other`` (``None`` and NaN always lose); the same as
    :func:`rgym_core.direction.better`."""
    from rgym_core.direction import better

    return better(value, other, direction)
