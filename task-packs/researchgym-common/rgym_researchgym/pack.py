"""What a ResearchGym pack's ``plugin.py`` calls: task specs whose workspace is
the prepared starter repository, and the dataset ``prepare`` behind it.

A pack registers, for each task, a :class:`~rgym_core.specs.TaskSpec` loaded
from its own ``task.yaml`` and a dataset ``researchgym/<task>`` (form
``researchgym-task``) whose ``prepare`` is::

    LAYOUT = TaskLayout("materials-tokenization", private_globs=(...), overlay=...)

    def prepare(spec, cache_dir, data_dir):
        return prepare_dataset(LAYOUT, spec, cache_dir, data_dir)

The task's ``task.yaml`` is complete on its own (``rgym check-pack`` and
``rgym_core.testing.grade`` read it directly)::

    starter_files: null
    datasets:
      - {id: researchgym/<task>, mount: .researchgym, starter: true}
    grader:
      include: {"module:rgym_confined": rgym_confined.py}   # graders that run agent code

The dataset is the starter (``starter: true``): the runner prepares it (verified
against the pinned tree, test files moved out) and copies its ``starter`` folder,
the prepared workspace, into the agent's workspace; nothing machine-specific is
written into the spec.  ``grader/rgym_confined.py`` (:data:`CONFINED_INCLUDE`) is
the one function through which ResearchGym graders run agent code, included by
module name from this distribution.  :func:`researchgym_task` checks that
``task.yaml`` (and each profile) says so.

The leakage policy: ``tool_config.literature``/``pdf`` in ``task.yaml`` hold the
paper's identifiers written by the pack (always active); :func:`researchgym_task`
adds the core's shared ``tool_config.leakage.policy_files`` entry naming the
prepared task's ``private/leakage_policy.json`` (the verified
``blocked_urls.yaml`` converted: ``urls`` as ``*url*`` globs, ``patterns`` as
given, arXiv ids as blocked papers).  The literature and PDF tools read it when
they start, after the runner prepared the dataset; a missing file fails closed.
Per-profile sub-tasks are the core's ``profiles.<name>.subtasks``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from rgym_researchgym.cache import POLICY_FILE, default_cache_dir, entry_path

if TYPE_CHECKING:
    from rgym_researchgym.prepare import PreparedTask, TaskLayout

PROFILE_KEYS = ("profiles", "default_profile")
LEAKAGE_TOOLS = ("literature", "pdf")
_LEAKAGE_KEYS = ("blocked_url_patterns", "blocked_papers")

#: The grader include of the stdlib-only helper through which ResearchGym graders run
#: agent code (``grader/rgym_confined.py``, resolved from the installed module).
CONFINED_INCLUDE = {"module:rgym_confined": "rgym_confined.py"}

#: The core's tool_config key shared by every tool that applies a leakage policy.
LEAKAGE_KEY = "leakage"


def core_has_profiles() -> bool:
    """Whether this rgym_core knows task profiles (contract 7)."""
    from rgym_core import TaskSpec

    return "profiles" in attrs.fields_dict(TaskSpec)


def merge_profile(data: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """``data`` (a parsed task.yaml) with profile ``name`` (default: the task's default)
    applied and the profile keys removed: the fallback for a core without profiles.

    Mappings merge key by key (``budget``, ``resources``, ``grader``, ``env``...);
    anything else is replaced.
    """
    profiles = data.get("profiles") or {}
    chosen = name or data.get("default_profile") or next(iter(profiles), None)
    out = {k: v for k, v in data.items() if k not in PROFILE_KEYS}
    if chosen is None:
        return out
    if chosen not in profiles:
        raise ValueError(f"task '{data.get('id')}': no profile '{chosen}' (profiles: "
                         f"{', '.join(profiles) or 'none'})")
    for key, value in (profiles[chosen] or {}).items():
        if key in ("description", "env"):
            continue
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def load_task_spec(folder: Path) -> Any:
    """Load ``folder/task.yaml`` as a TaskSpec, with profiles when the core has them
    and with the default profile applied when it does not."""
    from rgym_core import load_task

    if core_has_profiles():
        return load_task(folder)
    from rgym_core import TaskSpec, read_data_file, structure

    path = folder / "task.yaml"
    data = merge_profile(read_data_file(path))
    return attrs.evolve(structure(data, TaskSpec, str(path)), root=folder.resolve())


def policy_file(task: str, cache_dir: Path | None = None) -> Path:
    """Where the prepared ``task`` keeps its leakage policy (``private/leakage_policy.json``)."""
    return entry_path(task, cache_dir) / "private" / POLICY_FILE


def researchgym_task(folder: Path, task: str) -> Any:
    """The TaskSpec of ``folder/task.yaml`` with the verified ``blocked_urls.yaml`` in
    the leakage policy (``tool_config.leakage.policy_files``).

    Raises ``ValueError`` naming the file when ``task.yaml`` (or one of its
    profiles) does not mount dataset ``researchgym/<task>`` with ``starter: true``,
    or when a grader that imports ``rgym_confined`` lacks :data:`CONFINED_INCLUDE`."""
    spec = load_task_spec(folder)
    check_layout(spec, task, folder / "task.yaml")
    tool_config = {name: dict(value) for name, value in spec.tool_config.items()}
    for tool in LEAKAGE_TOOLS:
        tool_config.setdefault(tool, {})
    shared = dict(tool_config.get(LEAKAGE_KEY) or {})
    files = [str(f) for f in shared.get("policy_files") or []]
    policy = str(policy_file(task))
    shared["policy_files"] = files + ([policy] if policy not in files else [])
    tool_config[LEAKAGE_KEY] = shared
    return attrs.evolve(spec, tool_config=tool_config)


def check_layout(spec: Any, task: str, source: Path) -> None:
    """What every ResearchGym ``task.yaml`` declares (see the module docstring); cheap:
    it runs when a plugin registers its task."""
    dataset = f"researchgym/{task}"
    views = [("", spec.datasets, spec.grader)] + [
        (f"profiles['{name}'].", profile.datasets, profile.grader)
        for name, profile in (getattr(spec, "profiles", None) or {}).items()]
    for where, datasets, grader in views:
        if datasets is not None:
            mount = next((m for m in datasets if m.id == dataset), None)
            if mount is None or not getattr(mount, "starter", False):
                raise ValueError(f"{source}: {where}datasets: mount '{dataset}' with 'starter: true' "
                                 f"(the prepared ResearchGym workspace is the agent's starter files)")
        if grader is not None and any(grader.include.get(k) != v for k, v in CONFINED_INCLUDE.items()):
            folder = spec.path(grader.files)
            entry = folder / grader.entry if folder is not None else None
            if entry is not None and entry.is_file() and "rgym_confined" in entry.read_text(encoding="utf-8"):
                raise ValueError(f"{source}: {where}grader.include: add "
                                 f"{{\"module:rgym_confined\": rgym_confined.py}} (the grader imports it)")


def merge_leakage(task: str, leakage: dict[str, Any]) -> None:
    """Deprecated, kept for compatibility: the policy now reaches the tools through
    ``tool_config.leakage.policy_files`` (see :func:`researchgym_task`); nothing to do."""


def prepare_dataset(layout: TaskLayout, spec: Any, cache_dir: Path | None,
                    data_dir: Path | None) -> Any:
    """A dataset ``prepare`` for ``layout``: the verified, cached task as a
    ``PreparedDataset`` (public: ``source.json``; private: the hidden files;
    starter: the workspace, copied writable for the agent when mounted with
    ``starter: true``)."""
    from rgym_core import PreparedDataset
    from rgym_researchgym.prepare import prepare_task

    prepared = prepare_task(layout, cache_dir or default_cache_dir(), data_dir)
    return PreparedDataset(id=spec.id, public=prepared.public, private=prepared.private,
                           starter=prepared.workspace)


def prepared(layout: TaskLayout, data_dir: Path | None = None,
             cache_dir: Path | None = None) -> PreparedTask:
    """Prepare ``layout`` outside an episode (tests, baseline measurements)."""
    from rgym_researchgym.prepare import prepare_task

    return prepare_task(layout, cache_dir or default_cache_dir(), data_dir)
