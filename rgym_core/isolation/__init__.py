"""Isolation primitives for running untrusted code on this machine.

* :mod:`~rgym_core.isolation.bubblewrap`: find ``bwrap`` and build its command
  lines (:class:`BwrapCommand`): own mount, pid, network, IPC and UTS namespaces,
  only chosen host folders visible.
* :mod:`~rgym_core.isolation.seccomp`: the filter that refuses new user
  namespaces inside sandboxes, through bwrap or an exec wrapper.
* :mod:`~rgym_core.isolation.users`: a machine-wide pool of unprivileged uids
  (:func:`lease`), one per confined episode or worker.
* :mod:`~rgym_core.isolation.limits`: rlimits (:class:`Limits`) for processes,
  open files, file size, memory and CPU time.
* :mod:`~rgym_core.isolation.agent_confinement`: how ``--agent-isolation process``
  confines the scaffold's process and what it sees.
* :mod:`~rgym_core.isolation.hiding`: closing a task's hidden files to other users
  while agent code reads the host's file system, and giving them their modes back.
* :mod:`~rgym_core.isolation.warn`: :func:`warn_once`, the one place confinement
  warnings (local sandbox, grading, agent process) are logged, once per process.

The local sandbox, the grader kit's workers and ``--agent-isolation process``
build on these.  The package re-exports the primitives of the first four modules
only; import the last three by their module's name.
"""

from rgym_core.isolation.bubblewrap import (
    BwrapCommand,
    BwrapInfo,
    PreparedCommand,
    bundled_bwrap,
    bwrap_info,
    bwrap_problem,
    drop_privileges_argv,
    find_bwrap,
    interpreter_paths,
)
from rgym_core.isolation.limits import Limits
from rgym_core.isolation.users import PoolExhausted, UidLease, lease, pool_from_env

__all__ = ["BwrapCommand", "BwrapInfo", "Limits", "PoolExhausted", "PreparedCommand", "UidLease",
           "bundled_bwrap", "bwrap_info", "bwrap_problem", "drop_privileges_argv", "find_bwrap",
           "interpreter_paths", "lease", "pool_from_env"]
