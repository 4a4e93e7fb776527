"""Confinement warnings: what a sandbox, a grading or an agent process cannot protect
on this machine, each said once per process.

The local sandbox, the grading supervisor's host side and ``--agent-isolation
process`` probe the same machine for every episode; :func:`warn_once` keeps their
warnings to one line each in a run's log, however many episodes or gradings run.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

#: The messages logged so far (tests clear it).
_said: set[str] = set()


def warn_once(message: str) -> bool:
    """Log ``message`` as a warning unless this process already did; True when logged."""
    if message in _said:
        return False
    _said.add(message)
    log.warning("%s", message)
    return True


__all__ = ["warn_once"]
