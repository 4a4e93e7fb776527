"""Errors raised by model clients, each a single line naming the provider,
what happened and what to do."""

from __future__ import annotations

from typing import Any


class ModelError(RuntimeError):
    """Base class of every model-client error."""


class ModelConfigError(ModelError):
    """The client cannot be used as configured (no key, no price with a cost
    limit, an unknown option)."""


class ModelAPIError(ModelError):
    """A request failed.  ``retryable`` says whether another attempt may succeed;
    ``retry_after`` is the delay the server asked for, in seconds."""

    def __init__(self, message: str, *, provider: str, status: int | None = None,
                 retryable: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.attempts = 1
        #: The failed attempts before this one that were retried (as ``raw["_retries"]``).
        self.retries: list[dict[str, Any]] = []

    def __repr__(self) -> str:  # the message is already redacted
        return f"{type(self).__name__}({str(self)!r}, status={self.status})"


class ModelAuthError(ModelAPIError):
    """401 or 403: the key is missing, wrong or lacks permission.  Never retried."""


class ModelRequestError(ModelAPIError):
    """400, 404, 422...: the request itself is wrong.  Never retried."""


class ModelRateLimitError(ModelAPIError):
    """429: retried, honouring ``Retry-After``."""


class ModelServerError(ModelAPIError):
    """5xx (or an error event in a stream): retried."""


class ModelConnectionError(ModelAPIError):
    """The server could not be reached or dropped the connection: retried."""


class ModelTimeoutError(ModelAPIError):
    """No response (or no next stream chunk) within the read timeout: retried."""


class ModelResponseError(ModelAPIError):
    """The response body was not the JSON the wire format promises.  Retried once."""
