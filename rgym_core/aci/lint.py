"""The Python linter behind ``edit``, ``insert`` and ``create``.

It reports what makes a file fail to run: syntax (and indentation) errors, and,
when :mod:`pyflakes` is installed, undefined names, undefined exports and
duplicate arguments (MLGym's flake8 selection F821, F822, F831, E999).  Style is
never linted.  :func:`new_errors` compares the errors of a file before and after
a change, ignoring line numbers, so pre-existing errors never block an edit.
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Any

from attrs import define

try:  # pyflakes is small and well kept; without it only syntax errors are found
    from pyflakes import checker as _pyflakes_checker
    from pyflakes import messages as _pyflakes_messages
except ImportError:  # pragma: no cover - exercised only where pyflakes is absent
    _pyflakes_checker = None
    _pyflakes_messages = None


@define(frozen=True)
class LintError:
    """One error: a 1-based line number and a message without the line."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def _reported_classes() -> tuple[type, ...]:
    if _pyflakes_messages is None:
        return ()
    m = _pyflakes_messages
    return (m.UndefinedName, m.UndefinedExport, m.UndefinedLocal, m.DuplicateArgument)


def lint_python(source: str, filename: str = "<file>") -> list[LintError]:
    """The errors of Python ``source`` that would stop it from running."""
    try:
        tree = ast.parse(source, filename=filename)
        compile(tree, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:  # IndentationError and TabError are SyntaxErrors too
        kind = type(exc).__name__
        return [LintError(exc.lineno or 1, f"{kind}: {exc.msg}")]
    if _pyflakes_checker is None:
        return []
    reported = _reported_classes()
    found = _pyflakes_checker.Checker(tree, filename=filename)
    messages: list[Any] = [m for m in found.messages if isinstance(m, reported)]
    errors = [LintError(msg.lineno, msg.message % msg.message_args) for msg in messages]
    return sorted(errors, key=lambda e: (e.line, e.message))


def new_errors(before: list[LintError], after: list[LintError]) -> list[LintError]:
    """Errors of ``after`` that ``before`` did not have (compared by message, as a
    multiset, so errors that only moved to another line do not count)."""
    remaining = Counter(e.message for e in before)
    fresh: list[LintError] = []
    for error in after:
        if remaining[error.message] > 0:
            remaining[error.message] -= 1
        else:
            fresh.append(error)
    return fresh


def is_python_file(path: str) -> bool:
    """Whether ``path`` is linted (``.py`` files)."""
    return path.endswith(".py")
