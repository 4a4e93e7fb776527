"""Shell commands the scaffold refuses before they run: interactive programs
that would hang the episode's shell waiting for a terminal."""

from __future__ import annotations

import os
import re
import shlex

#: Refused anywhere in a command line (first word of any segment).
INTERACTIVE = frozenset({"vim", "vi", "nvim", "emacs", "nano", "pico", "less", "more", "top",
                         "htop", "watch", "man", "tmux", "screen", "ssh", "ftp"})
#: Refused only as a whole command (they start a REPL or a new shell without arguments).
STANDALONE = frozenset({"python", "python3", "ipython", "ipython3", "bash", "sh", "zsh", "node",
                        "R", "julia", "irb", "exit", "su", "sqlite3", "psql", "mysql"})

_SEGMENTS = re.compile(r"&&|\|\||[;|\n]")


def blocked_reason(command: str) -> str | None:
    """Why ``command`` may not run, or ``None`` when it may."""
    whole = command.strip()
    if whole in STANDALONE or os.path.basename(whole) in STANDALONE:
        return (f"'{whole}' starts an interactive session, which this environment does not "
                "support. Write a script and run it (e.g. `python train.py`), or pass code with "
                "`python -c '...'`.")
    for segment in _SEGMENTS.split(command):
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:
            words = segment.split()
        while words and "=" in words[0] and not words[0].startswith("="):
            words = words[1:]  # VAR=value prefixes
        if words and words[0] in ("sudo", "nohup", "time", "env"):
            words = words[1:]
        if words and os.path.basename(words[0]) in INTERACTIVE:
            name = os.path.basename(words[0])
            return (f"'{name}' is interactive and cannot run here. Use `open`, `goto`, `scroll_up` "
                    "and `scroll_down` to read files, `edit`/`insert`/`create` to change them, and "
                    "`cat`, `head` or `grep` for quick looks.")
    return None
