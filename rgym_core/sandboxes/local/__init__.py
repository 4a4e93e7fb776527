"""The ``rgym/local`` sandbox: an episode on this machine.

Modules, split the way the Docker backend is:

* :mod:`.confinement`: the isolation mode (bubblewrap, a pooled uid, or none),
  the sandbox's keeper and how agent processes are started;
* :mod:`.shell`: the persistent shell and its unspoofable protocol;
* :mod:`.layout`: host folders, owners and permissions, datasets;
* :mod:`.files`: reading, writing and copying files as the agent;
* :mod:`.procs`: finding and killing processes through /proc;
* :mod:`.settings`: limits this backend cannot enforce;
* :mod:`.sandbox`: :class:`LocalSandbox`, which ties them together.

What each mode guarantees is in the README's security section.
"""

from rgym_core.sandboxes.local.confinement import (
    DEFAULT_PIDS,
    MODE_BUBBLEWRAP,
    MODE_NONE,
    MODE_UID,
    SANDBOX_ID_VAR,
    SANDBOX_WORKSPACE,
)
from rgym_core.sandboxes.local.sandbox import LocalSandbox
from rgym_core.sandboxes.local.settings import (
    describe_limits,
    unenforced_settings,
    visible_devices,
)
from rgym_core.sandboxes.local.shell import COMMAND_ID_VAR

__all__ = ["COMMAND_ID_VAR", "DEFAULT_PIDS", "MODE_BUBBLEWRAP", "MODE_NONE", "MODE_UID",
           "SANDBOX_ID_VAR", "SANDBOX_WORKSPACE", "LocalSandbox", "describe_limits",
           "unenforced_settings",
           "visible_devices"]
