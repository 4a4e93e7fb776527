"""Shared loader of ResearchGym's task-directory format for rgym task packs.

This distribution registers no task: the ResearchGym packs
(``rgym-task-materials``, ``rgym-task-timeseries``, ``rgym-task-retrieval``,
``rgym-task-continual``, ``rgym-task-replay``) depend on it.

* :mod:`~rgym_researchgym.treehash`: git blob/tree ids computed from files.
* :mod:`~rgym_researchgym.pins`: the pinned commit and each task's tree.
* :mod:`~rgym_researchgym.source`: find a checkout or archive in the data
  folder, verify it, copy it out.
* :mod:`~rgym_researchgym.taskdir`: the format (statement, hint, blocked URLs,
  requirements) and the workspace/private split.
* :mod:`~rgym_researchgym.leakage`: ``blocked_urls.yaml`` to rgym's leakage policy.
* :mod:`~rgym_researchgym.prepare`: verified, split, cached task folders.
* :mod:`~rgym_researchgym.pack`: what a pack's ``plugin.py`` calls.

Importing this package imports nothing heavy (fast start-up rule).
"""

from typing import TYPE_CHECKING

from rgym_core import lazy_exports

_EXPORTS = {
    "PINNED_COMMIT": "rgym_researchgym.pins", "TREE_HASHES": "rgym_researchgym.pins",
    "PreparedTask": "rgym_researchgym.prepare", "TaskLayout": "rgym_researchgym.prepare",
    "prepare_task": "rgym_researchgym.prepare", "workspace_path": "rgym_researchgym.prepare",
    "TaskSourceError": "rgym_researchgym.source"}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["PINNED_COMMIT", "TREE_HASHES", "PreparedTask", "TaskLayout", "TaskSourceError",
           "prepare_task", "workspace_path"]

if TYPE_CHECKING:
    from rgym_researchgym.pins import PINNED_COMMIT, TREE_HASHES
    from rgym_researchgym.prepare import PreparedTask, TaskLayout, prepare_task, workspace_path
    from rgym_researchgym.source import TaskSourceError
