"""What a ResearchGym pack's ``plugin.py`` calls: task specs whose workspace is
the prepared starter repository, and the dataset ``prepare`` behind it.

A pack registers, for each task, a :class:`~rgym_core.specs.TaskSpec` loaded
from its own ``task.yaml`` and a dataset ``researchgym/<task>`` (form
``researchgym-task``) whose ``prepare`` is::

    LAYOUT = TaskLayout("materials-tokenization", private_globs=(...), overlay=...)

    def prepare(spec, cache_dir, data_dir):
        return prepare_dataset(LAYOUT, spec, cache_dir, data_dir)

and the task mounts that dataset (``datasets: [{id: researchgym/<task>, mount:
.researchgym}]``).  :func:`researchgym_task` points the task's
``starter_files`` at :func:`~rgym_researchgym.prepare.workspace_path`: the
runner prepares datasets before it lays out the sandbox, so the verified
starter repository is in place when the workspace is copied.

Every task's grader gets ``grader/rgym_confined.py`` (:data:`CONFINED_MODULE`),
the one function through which ResearchGym graders run agent code.

The leakage policy: ``tool_config.literature``/``pdf`` in ``task.yaml`` hold the
paper's identifiers written by the pack (always active); :func:`researchgym_task`
adds the core's shared ``tool_config.leakage.policy_files`` entry naming the
prepared task's ``private/leakage_policy.json`` (the verified
``blocked_urls.yaml`` converted: ``urls`` as ``*url*`` globs, ``patterns`` as
given, arXiv ids as blocked papers).  The literature and PDF tools read it when
they start, after the runner prepared the dataset; a missing file fails closed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from rgym_researchgym.leakage import POLICY_FILE
from rgym_researchgym.prepare import (
    PreparedTask,
    TaskLayout,
    default_cache_dir,
    entry_path,
    prepare_task,
    workspace_path,
)

PROFILE_KEYS = ("profiles", "default_profile")
LEAKAGE_TOOLS = ("literature", "pdf")
_LEAKAGE_KEYS = ("blocked_url_patterns", "blocked_papers")

#: The stdlib-only helper every ResearchGym grader runs agent code through
#: (``grader/rgym_confined.py``; see its docstring).
def _confined_module() -> str:
    import importlib.util

    found = importlib.util.find_spec("rgym_confined")
    if found is None or found.origin is None:
        raise ImportError("rgym_confined is missing: reinstall rgym-researchgym")
    return found.origin


CONFINED_MODULE = _confined_module()

#: The core's tool_config key shared by every tool that applies a leakage policy.
LEAKAGE_KEY = "leakage"


def core_has_profiles() -> bool:
    """Whether this rgym_core knows task profiles (contract 7)."""
    from rgym_core.specs import TaskSpec

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
    from rgym_core.packs import load_task

    if core_has_profiles():
        return load_task(folder)
    from rgym_core.serialization import read_data_file, structure
    from rgym_core.specs import TaskSpec

    path = folder / "task.yaml"
    data = merge_profile(read_data_file(path))
    return attrs.evolve(structure(data, TaskSpec, str(path)), root=folder.resolve())


def policy_file(task: str, cache_dir: Path | None = None) -> Path:
    """Where the prepared ``task`` keeps its leakage policy (``private/leakage_policy.json``)."""
    return entry_path(task, cache_dir) / "private" / POLICY_FILE


def researchgym_task(folder: Path, task: str) -> Any:
    """The TaskSpec of ``folder/task.yaml`` with ``starter_files`` pointing at the
    prepared workspace of ResearchGym task ``task``, the grader helper
    ``rgym_confined.py`` included, the verified ``blocked_urls.yaml`` in the
    leakage policy (``tool_config.leakage.policy_files``) and, when
    ``folder/subtasks.yaml`` exists, per-profile sub-tasks
    (:mod:`rgym_researchgym.profile_subtasks`)."""
    spec = load_task_spec(folder)
    tool_config = {name: dict(value) for name, value in spec.tool_config.items()}
    for tool in LEAKAGE_TOOLS:
        tool_config.setdefault(tool, {})
    shared = dict(tool_config.get(LEAKAGE_KEY) or {})
    files = [str(f) for f in shared.get("policy_files") or []]
    policy = str(policy_file(task))
    shared["policy_files"] = files + ([policy] if policy not in files else [])
    tool_config[LEAKAGE_KEY] = shared
    include = {CONFINED_MODULE: "rgym_confined.py", **spec.grader.include}
    spec = attrs.evolve(spec, starter_files=str(workspace_path(task)), tool_config=tool_config,
                        grader=attrs.evolve(spec.grader, include=include))
    profiles = getattr(spec, "profiles", None)
    if profiles:  # a profile's grader section is already merged: give it the helper too
        spec = attrs.evolve(spec, profiles={
            name: profile if profile.grader is None else attrs.evolve(
                profile, grader=attrs.evolve(profile.grader, include={
                    CONFINED_MODULE: "rgym_confined.py", **profile.grader.include}))
            for name, profile in profiles.items()})
    from rgym_researchgym.profile_subtasks import with_profile_subtasks

    return with_profile_subtasks(spec, folder)


def merge_leakage(task: str, leakage: dict[str, Any]) -> None:
    """Deprecated, kept for compatibility: the policy now reaches the tools through
    ``tool_config.leakage.policy_files`` (see :func:`researchgym_task`); nothing to do."""


def prepare_dataset(layout: TaskLayout, spec: Any, cache_dir: Path | None,
                    data_dir: Path | None) -> Any:
    """A dataset ``prepare`` for ``layout``: the verified, cached task as a
    ``PreparedDataset`` (public: ``source.json``; private: the hidden files)."""
    from rgym_core.specs import PreparedDataset

    prepared = prepare_task(layout, cache_dir or default_cache_dir(), data_dir)
    return PreparedDataset(id=spec.id, public=prepared.public, private=prepared.private)


def prepared(layout: TaskLayout, data_dir: Path | None = None,
             cache_dir: Path | None = None) -> PreparedTask:
    """Prepare ``layout`` outside an episode (tests, baseline measurements)."""
    return prepare_task(layout, cache_dir or default_cache_dir(), data_dir)
