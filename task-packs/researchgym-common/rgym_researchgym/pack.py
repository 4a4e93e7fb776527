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

The leakage policy: ``tool_config.literature`` in ``task.yaml`` holds the
paper's identifiers written by the pack (always active); when the dataset is
prepared, the entries of the verified ``blocked_urls.yaml`` (``urls`` as
``*url*`` globs, ``patterns`` as given, arXiv ids as blocked papers) are merged
into the registered task's ``tool_config.literature`` and ``tool_config.pdf``
before any tool reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from rgym_researchgym.prepare import (
    PreparedTask,
    TaskLayout,
    default_cache_dir,
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

#: task name -> tool_config mappings of the registered specs, merged into at prepare time.
_LIVE_TOOL_CONFIGS: dict[str, list[dict[str, Any]]] = {}


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


def researchgym_task(folder: Path, task: str) -> Any:
    """The TaskSpec of ``folder/task.yaml`` with ``starter_files`` pointing at the
    prepared workspace of ResearchGym task ``task``, and its leakage settings
    registered for the merge at prepare time."""
    spec = load_task_spec(folder)
    tool_config = {name: dict(value) for name, value in spec.tool_config.items()}
    for tool in LEAKAGE_TOOLS:
        tool_config.setdefault(tool, {})
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
    _LIVE_TOOL_CONFIGS.setdefault(task, []).append(spec.tool_config)
    for profile in getattr(spec, "profiles", {}).values():
        extra = getattr(profile, "tool_config", None)
        if isinstance(extra, dict):
            _LIVE_TOOL_CONFIGS[task].append(extra)
    return spec


def merge_leakage(task: str, leakage: dict[str, Any]) -> None:
    """Add ``leakage`` (from :meth:`PreparedTask.leakage`) to every registered spec of
    ``task``, in ``tool_config.literature`` and ``tool_config.pdf``."""
    for tool_config in _LIVE_TOOL_CONFIGS.get(task, []):
        for tool in LEAKAGE_TOOLS:
            settings = tool_config.setdefault(tool, {})
            for key in _LEAKAGE_KEYS:
                current = list(settings.get(key) or [])
                settings[key] = current + [v for v in leakage.get(key, []) if v not in current]


def prepare_dataset(layout: TaskLayout, spec: Any, cache_dir: Path | None,
                    data_dir: Path | None) -> Any:
    """A dataset ``prepare`` for ``layout``: the verified, cached task as a
    ``PreparedDataset`` (public: ``source.json``; private: the hidden files)."""
    from rgym_core.specs import PreparedDataset

    prepared = prepare_task(layout, cache_dir or default_cache_dir(), data_dir)
    merge_leakage(layout.task, prepared.leakage())
    return PreparedDataset(id=spec.id, public=prepared.public, private=prepared.private)


def prepared(layout: TaskLayout, data_dir: Path | None = None,
             cache_dir: Path | None = None) -> PreparedTask:
    """Prepare ``layout`` outside an episode (tests, baseline measurements)."""
    return prepare_task(layout, cache_dir or default_cache_dir(), data_dir)
