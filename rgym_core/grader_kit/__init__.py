"""rgym's grader kit: what a task's grader needs, in any sandbox (standard library only).

The runner copies this package into every evaluation folder as
``grader/rgym_grader_kit/``, so a grader (``python grader/evaluate.py``) does::

    from rgym_grader_kit import context, write_scores, write_error, FunctionWorker

* :func:`context`: the grading's folders, kind, seed and profile;
* :func:`write_scores` / :func:`write_error`: the only way scores should be written
  (every worker is stopped first; the file is replaced atomically, never through a link);
* :func:`read_submission_file`: a submission file's bytes, links refused;
* :func:`run_worker`, :func:`start_worker`, :class:`FunctionWorker`: run the
  submission's code confined (another unprivileged user, no network, no view of
  ``grader/``, ``private/``, the seed or the grader's process, limits, whole process
  tree killed before scores are written).
"""

from __future__ import annotations

from typing import Any

from .context import GradingContext, context, read_submission_file, write_error, write_scores
from .limits import Limits
from .protocol import EVAL_MOUNT, SCORES_FILE

#: Imported on first use (a grader that starts no worker does not pay for them).
_WORKER_NAMES = ("AgentCodeError", "ConfinementError", "FunctionWorker", "Worker", "WorkerError",
                 "WorkerExited", "WorkerProtocolError", "WorkerResult", "WorkerTimeout",
                 "end_workers", "run_worker", "start_worker")


def __getattr__(name: str) -> Any:
    if name in _WORKER_NAMES:
        from . import workers

        return getattr(workers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EVAL_MOUNT", "SCORES_FILE", "AgentCodeError", "ConfinementError", "FunctionWorker",
    "GradingContext", "Limits", "Worker", "WorkerError", "WorkerExited", "WorkerProtocolError",
    "WorkerResult", "WorkerTimeout", "context", "end_workers", "read_submission_file",
    "run_worker", "start_worker", "write_error", "write_scores",
]
