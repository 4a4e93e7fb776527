"""The Python linter behind ``edit``, ``insert`` and ``create``.

It reports what makes a file fail to run: syntax (and indentation) errors, and,
when :mod:`pyflakes` is installed, undefined names, undefined exports and
duplicate arguments (flake8's codes E999, F821, F822, F823, F831).  Style is
never linted by default.  ``select`` chooses other codes: :data:`MLGYM_SELECT` is
MLGym's flake8 selection (``tools/edit_linting.sh``), which adds E111 (indentation
not a multiple of four, pycodestyle's rule) and E902 (a file the tokenizer cannot
read) and leaves out F823; ``tool_config: {rgym: {lint: [codes]}}`` (or ``lint:
mlgym``) sets it for the editor.  Each error carries its code.  :func:`new_errors`
compares the errors of a file before and after a change, ignoring line numbers, so
pre-existing errors never block an edit.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections import Counter
from collections.abc import Collection
from typing import Any

from attrs import define, field

try:  # pyflakes is small and well kept; without it only syntax errors are found
    from pyflakes import checker as _pyflakes_checker
    from pyflakes import messages as _pyflakes_messages
except ImportError:  # pragma: no cover - exercised only where pyflakes is absent
    _pyflakes_checker = None
    _pyflakes_messages = None


#: The codes reported when no selection is given.
DEFAULT_SELECT = ("E999", "F821", "F822", "F823", "F831")
#: MLGym's ``flake8 --isolated --select=...`` (``tools/edit_linting.sh``).
MLGYM_SELECT = ("F821", "F822", "F831", "E111", "E112", "E113", "E999", "E902")
#: Every code this linter knows.
KNOWN_CODES = frozenset(DEFAULT_SELECT + MLGYM_SELECT)


@define(frozen=True)
class LintError:
    """One error: a 1-based line number, a message without the line, and its
    flake8 code (not compared: errors are the same whatever code names them)."""

    line: int
    message: str
    code: str = field(default="", eq=False)

    def __str__(self) -> str:
        suffix = f" [{self.code}]" if self.code else ""
        return f"line {self.line}: {self.message}{suffix}"


def select_codes(value: Any, *, where: str = "tool_config.rgym.lint") -> tuple[str, ...]:
    """A code selection from a tool config value: ``None`` (the default), ``"mlgym"``,
    ``"default"``, or a list (or comma-separated text) of codes.  Raises ValueError
    naming ``where`` for an unknown code."""
    if value is None or value == "default":
        return DEFAULT_SELECT
    if value == "mlgym":
        return MLGYM_SELECT
    codes = [c.strip().upper() for c in (value.split(",") if isinstance(value, str) else value)]
    unknown = sorted(c for c in codes if c not in KNOWN_CODES)
    if unknown:
        raise ValueError(f"{where}: unknown lint code(s) {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(KNOWN_CODES))}, or 'mlgym' / 'default'")
    return tuple(c for c in codes if c)


def _pyflakes_codes() -> dict[type, str]:
    if _pyflakes_messages is None:
        return {}
    m = _pyflakes_messages
    return {m.UndefinedName: "F821", m.UndefinedExport: "F822", m.UndefinedLocal: "F823",
            m.DuplicateArgument: "F831"}


def _indent_width(prefix: str) -> int:
    """The width of leading whitespace, tabs to the next multiple of 8 (pycodestyle's
    ``expand_indent``)."""
    width = 0
    for char in prefix:
        width = (width // 8 + 1) * 8 if char == "\t" else width + 1
    return width


def indentation_errors(source: str) -> list[LintError]:
    """E111 for each logical line of code whose indentation is not a multiple of four
    (comments are E114, never selected); E902 when the tokenizer fails."""
    errors: list[LintError] = []
    at_start = True
    skip = {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
            tokenize.ENDMARKER}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.NEWLINE:
                at_start = True
            elif token.type not in skip and at_start:
                at_start = False
                if _indent_width(token.line[:token.start[1]]) % 4:
                    errors.append(LintError(token.start[0], "indentation is not a multiple of 4",
                                            "E111"))
    except (tokenize.TokenError, SyntaxError) as exc:
        line = exc.args[1][0] if len(exc.args) > 1 and isinstance(exc.args[1], tuple) else 1
        errors.append(LintError(line, f"{type(exc).__name__}: {exc.args[0]}", "E902"))
    return errors


def lint_python(source: str, filename: str = "<file>",
                select: Collection[str] | None = None) -> list[LintError]:
    """The errors of Python ``source`` that would stop it from running, or those of
    the codes in ``select`` (see the module's docstring)."""
    chosen = set(DEFAULT_SELECT if select is None else select)
    try:
        tree = ast.parse(source, filename=filename)
        compile(tree, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:  # IndentationError and TabError are SyntaxErrors too
        # as flake8: a file that does not parse gets only this error
        if "E999" not in chosen:
            return []
        kind = type(exc).__name__
        return [LintError(exc.lineno or 1, f"{kind}: {exc.msg}", "E999")]
    errors: list[LintError] = []
    if chosen & {"E111", "E112", "E113", "E902"}:
        errors += [e for e in indentation_errors(source) if e.code in chosen]
    if _pyflakes_checker is not None:
        codes = _pyflakes_codes()
        found = _pyflakes_checker.Checker(tree, filename=filename)
        for msg in found.messages:
            code = codes.get(type(msg))
            if code in chosen:
                errors.append(LintError(msg.lineno, msg.message % msg.message_args, code))
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
