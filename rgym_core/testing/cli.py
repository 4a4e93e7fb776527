"""Running the ``rgym`` command line from tests, as a user would: a subprocess.

::

    from rgym_core.testing import run_cli, run_json

    proc = run_cli("check-pack", str(PACK), "--fast")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tasks = {row["name"] for row in run_json("list", "tasks")}

    # A task folder the test wrote, registered for this one command (no pack installed):
    proc = run_cli("run", "my/task", "--agent", "scripted", tasks=[tmp_path / "task"])
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# ``rgym`` with extra task folders registered by a plugin made on the spot (argv[1] holds
# their paths, one per line): what a pack would do, without installing one.
_WITH_TASKS = """
import sys
from rgym_core import hookimpl, load_task
import rgym_core.cli as cli
TASKS = [load_task(path) for path in sys.argv.pop(1).splitlines()]
class TestTasks:
    @hookimpl
    def rgym_register_tasks(self):
        return list(TASKS)
load = cli.load_registry
cli.load_registry = lambda **kw: load(**{**kw, "extra_plugins": [
    *kw.get("extra_plugins", ()), ("test-tasks", TestTasks())]})
cli.main()
"""


def run_cli(*args: str, env: Mapping[str, str] | None = None, cwd: Path | str | None = None,
            timeout: float = 300, python: str | Path | None = None,
            input: str | None = None,
            tasks: Sequence[Path | str] = ()) -> subprocess.CompletedProcess[str]:
    """Run ``rgym ARGS`` in a fresh interpreter (``python``, default this one) and
    return the completed process (text output; never raises for a non-zero exit).

    ``tasks``: task folders (each with its ``task.yaml``) registered for this command as
    if an installed pack provided them."""
    full_env = {**os.environ, "PYTHONWARNINGS": "default", "COLUMNS": "200", **(env or {})}
    command = ["-m", "rgym_core.cli"]
    if tasks:
        command = ["-c", _WITH_TASKS, "\n".join(str(Path(t).resolve()) for t in tasks)]
    return subprocess.run([str(python or sys.executable), *command, *args],
                          capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout,
                          input=input)


def run_json(*args: str, **kwargs: Any) -> Any:
    """``rgym ARGS --json`` parsed (raises ``AssertionError`` with stderr when there is no output)."""
    proc = run_cli(*args, "--json", **kwargs)
    if not proc.stdout.strip():
        raise AssertionError(f"rgym {' '.join(args)} --json printed nothing (exit {proc.returncode}); "
                             f"stderr:\n{proc.stderr}")
    return json.loads(proc.stdout)


__all__ = ["run_cli", "run_json"]
