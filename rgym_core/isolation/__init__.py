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

The local sandbox, the grader kit's workers and ``--agent-isolation process``
build on these.
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
