"""Starting Python fast: ``python -S`` with the interpreter's site folders added by hand.

Python's ``site`` module processes every ``.pth`` file of the environment at start-up;
with many editable installs (a development checkout) that costs as much as the rest of
the start.  The grader and its workers need the environment's packages, not its
``.pth`` hooks, so the supervisor starts them as ``python -S -s -c <LAUNCHER> PREFIX
EXEC_PREFIX SITE_DIRS <the original arguments>``: the launcher sets the prefixes a
virtual environment would, appends the site folders after the standard library, adds
``exit``/``quit``, and runs the script, module or ``-c`` code as Python would.
Standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

#: An environment variable naming a JSON file of more environment variables, which the
#: launcher adds before running the program (so values such as the grading seed never
#: appear on a command line, which every user of the machine can read).
ENV_FILE_VAR = "RGYM_LAUNCH_ENV_FILE"

LAUNCHER = r'''
import sys
def _rgym_launch():
    import os
    prefix, exec_prefix, dirs = sys.argv[1:4]
    args = sys.argv[4:]
    env_file = os.environ.pop("RGYM_LAUNCH_ENV_FILE", None)
    if env_file:
        import json
        with open(env_file) as fh:
            os.environ.update(json.load(fh))
    sys.prefix, sys.exec_prefix = prefix, exec_prefix
    for folder in dirs.split(":"):
        if folder and folder not in sys.path:
            sys.path.append(folder)
    import builtins
    if not hasattr(builtins, "exit"):
        builtins.exit = builtins.quit = sys.exit
    main = sys.modules["__main__"].__dict__
    del main["_rgym_launch"]
    if args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        code = compile(args[1], "<string>", "exec")
        del main["sys"]
        exec(code, main)
    elif args[0] == "-m":
        import runpy
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        import runpy
        sys.argv = list(args)
        sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
        runpy.run_path(args[0], run_name="__main__")
_rgym_launch()
'''


def python_argv(python: str, args: Sequence[str], *, prefix: str | None = None,
                exec_prefix: str | None = None, site_dirs: Sequence[str] = ()) -> list[str]:
    """The command line that runs ``python ARGS`` (user site off).  With ``site_dirs``
    (and ARGS a script, ``-c CODE`` or ``-m MODULE``) it goes through the launcher;
    otherwise it is plain ``python -s ARGS``."""
    args = list(args)
    plain = [python, "-s", *args]
    if not site_dirs or prefix is None or not args:
        return plain
    first = args[0]
    if first in ("-c", "-m"):
        if len(args) < 2:
            return plain
    elif first.startswith("-"):
        return plain  # interpreter options: keep Python's own handling
    if any(":" in d for d in site_dirs):
        return plain
    return [python, "-S", "-s", "-c", LAUNCHER, prefix, exec_prefix or prefix,
            os.pathsep.join(site_dirs), *args]
