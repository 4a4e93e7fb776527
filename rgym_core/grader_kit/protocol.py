"""The grader protocol's names, and the message channel to the grading supervisor.

This module is the one source of the protocol's constants: ``rgym_core.grader_protocol``
re-exports them for the core, and graders see them through ``rgym_grader_kit``.
Standard library only: the kit runs in any sandbox's interpreter.

An evaluation folder (``/eval`` in a grader container or under bubblewrap)::

    submission/   the agent's files, filtered by ``grader.submission`` / ``grader.exclude``
    grader/       the task's hidden grader files (with this kit as rgym_grader_kit/)
    data/<mount>/ the public part of each dataset
    private/<mount>/  the private part (labels...)
    private/.rgym-secret  the task's grader secret (hex), for seeds the agent must not know
    home/         the grader's HOME (empty; never the submission)
    scores.json   written by the grader, and only by it
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import socket

#: Where the evaluation folder appears inside a grader container (and under bubblewrap).
EVAL_MOUNT = "/eval"
#: Where a confined worker sees its own folder under bubblewrap.
WORKER_MOUNT = "/rgym/work"
#: The file the grader writes its scores to (name inside the evaluation folder).
SCORES_FILE = "scores.json"
SUBMISSION_DIR = "submission"
GRADER_DIR = "grader"
DATA_DIR = "data"
PRIVATE_DIR = "private"
HOME_DIR = "home"
#: The task's grader secret (64 hex digits), inside ``private/``.
SECRET_FILE = ".rgym-secret"
#: The name the kit has inside every evaluation's ``grader/`` folder.
KIT_PACKAGE = "rgym_grader_kit"

ENV_SUBMISSION_DIR = "RGYM_SUBMISSION_DIR"
ENV_GRADER_DIR = "RGYM_GRADER_DIR"
ENV_DATA_DIR = "RGYM_DATA_DIR"
ENV_PRIVATE_DIR = "RGYM_PRIVATE_DIR"
ENV_SCORES_FILE = "RGYM_SCORES_FILE"
ENV_GRADE_KIND = "RGYM_GRADE_KIND"
ENV_SEED = "RGYM_SEED"
ENV_PROFILE = "RGYM_PROFILE"
#: Set by the supervisor in the grader: the file descriptor of its control socket.
ENV_SUPERVISOR_FD = "RGYM_SUPERVISOR_FD"
#: Set by the supervisor in the grader: "1" when workers are confined, else "0".
ENV_CONFINED = "RGYM_GRADING_CONFINED"
#: The supervisor's configuration (JSON); read by the supervisor only, never passed on.
ENV_SUPERVISOR_CONFIG = "RGYM_SUPERVISOR_CONFIG"
#: Set in every worker: the folder it runs in (as the worker sees it).
ENV_WORKER_DIR = "RGYM_WORKER_DIR"

#: Fixed uids inside a grader container (no pool is needed there: one grading per container).
CONTAINER_GRADER_UID = 64010
CONTAINER_WORKER_UID = 64011

#: The supervisor's last line of output starts with this word and the caller's nonce.
STATUS_WORD = "rgym-grading-supervisor"

#: Largest message on the control channel (requests and replies are small; data goes by fd).
MAX_MESSAGE = 1 << 20
MAX_FDS = 16


class ChannelClosed(ConnectionError):
    """The other end of the control channel is gone."""


def send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """Send one message (a JSON object), with file descriptors attached."""
    import socket  # here: a grader that starts no worker never needs it

    data = json.dumps(message).encode()
    if len(data) > MAX_MESSAGE:
        raise ValueError(f"control message of {len(data)} bytes is too large")
    try:
        if fds:
            socket.send_fds(sock, [data], list(fds))
        else:
            sock.send(data)
    except (BrokenPipeError, ConnectionResetError) as exc:
        raise ChannelClosed(str(exc)) from exc


def receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """Receive one message and the file descriptors that came with it."""
    import socket

    try:
        data, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
    except (ConnectionResetError, OSError) as exc:
        raise ChannelClosed(str(exc)) from exc
    if not data:
        for fd in fds:
            os.close(fd)
        raise ChannelClosed("the control channel was closed")
    if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
        for fd in fds:
            os.close(fd)
        raise ChannelClosed("a control message was truncated")
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ChannelClosed("a control message is not a JSON object")
    return message, list(fds)
