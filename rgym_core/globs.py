"""The globs rgym matches relative paths with: a submission's files, the files an
export keeps, a grader's exclusions, the integrity monitor's policies.

Case-sensitive (:func:`fnmatch.fnmatchcase`) on every platform; ``*`` also crosses
``/`` as in :mod:`fnmatch`, and a leading ``**/`` also matches no folder at all.
(The Docker supervisor, which runs inside the container on the standard library
alone, carries its own copy.)
"""

from __future__ import annotations

import fnmatch


def glob_match(rel: str, pattern: str) -> bool:
    """Match a relative POSIX path against a glob where a leading ``**/`` also
    matches no folder (``**/*.py`` matches ``a.py`` and ``x/a.py``)."""
    if fnmatch.fnmatchcase(rel, pattern):
        return True
    return pattern.startswith("**/") and glob_match(rel, pattern[3:])


__all__ = ["glob_match"]
