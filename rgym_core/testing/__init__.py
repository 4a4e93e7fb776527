"""The pack author's test kit.

* :func:`grade` and :class:`EvalFolder`: a task's grader on files you choose, the
  way episodes run it, or by hand under the grader protocol
  (:mod:`rgym_core.testing.grading`);
* :func:`run_cli` and :func:`run_json`: the ``rgym`` command line as a
  subprocess (:mod:`rgym_core.testing.cli`);
* :class:`LoopbackServer`: one real HTTP server on 127.0.0.1 with scripted
  :class:`Reply` objects, for every API client's tests (:mod:`rgym_core.testing.http`);
* :class:`ScriptAgent` and :class:`SpecsPlugin`: an agent playing a fixed script and a
  plugin registering a test's specs, for in-process episodes (:mod:`rgym_core.testing.inprocess`);
* :func:`install_dataset_plugin`: generated fixture datasets registered for the
  ``rgym`` processes a test starts (:mod:`rgym_core.testing.plugins`);
* :func:`skip_or_fail` and :func:`in_ci`: a test whose machine lacks what it needs
  is skipped, except under ``CI=true`` where it fails (:mod:`rgym_core.testing.prerequisites`);
* :mod:`rgym_core.testing.conformance`: the suite every sandbox backend passes.

``rgym new-pack NAME`` writes a pack whose tests use this kit.
"""

from rgym_core.testing.cli import run_cli, run_json
from rgym_core.testing.grading import (
           TEST_SECRET,
           EvalFolder,
           GraderRun,
           as_task,
           grade,
           write_files,
)
from rgym_core.testing.http import LoopbackServer, RecordedRequest, Reply, json_reply, sse
from rgym_core.testing.inprocess import ScriptAgent, SpecsPlugin
from rgym_core.testing.plugins import install_dataset_plugin
from rgym_core.testing.prerequisites import in_ci, skip_or_fail

__all__ = ["TEST_SECRET", "EvalFolder", "GraderRun", "LoopbackServer", "RecordedRequest", "Reply", "ScriptAgent",
           "SpecsPlugin", "as_task", "grade",
           "in_ci", "install_dataset_plugin", "json_reply", "run_cli", "run_json", "skip_or_fail", "sse",
           "write_files"]
