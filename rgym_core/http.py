"""The HTTP retry policy shared by rgym's network clients (tools and model providers).

What is retried: HTTP 408, 409, 429 and 5xx answers, httpx timeouts and
connection errors.  What is not: every other status (400, 401, 403, 404, ...)
and every other exception, which propagate after one attempt.  Waits follow
the server's ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)
when it sends one, else jittered exponential backoff; retries stop after
``max_attempts`` attempts or ``max_total_wait_s`` seconds of waiting, and at
once when the server asks for a wait longer than ``max_retry_after_s``.

Tenacity is the engine; :func:`call_with_retries` runs one request function
under a :class:`RetryPolicy` and turns an exhausted retry into one
:class:`RequestFailed` whose message is fit to show an agent::

    def once() -> dict:
        response = client.get(url)
        check_status(response, "Example API")   # RequestFailed or RetryableStatus
        return response.json()

    body, attempts = call_with_retries(once, RetryPolicy(), service="Example API")
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TypeVar

import httpx
import tenacity
from attrs import define, field, validators

__all__ = ["RequestFailed", "RetryPolicy", "RetryableStatus", "call_with_retries",
           "check_status", "is_retryable", "is_retryable_status", "requested_wait",
           "retry_after_seconds"]

T = TypeVar("T")


def _default_timeout() -> httpx.Timeout:
    return httpx.Timeout(connect=5.0, read=20.0, write=10.0, pool=5.0)


@define(frozen=True)
class RetryPolicy:
    """How often and how long to retry one request.

    ``timeout`` is the httpx timeout of each attempt.  Backoff waits are drawn
    uniformly from ``[0, min(backoff_max_s, backoff_base_s * 2**n)]`` (full
    jitter).  A server asking to wait more than ``max_retry_after_s`` is not
    waited for; ``max_total_wait_s`` (``None``: no limit) caps the waits of one
    call together.
    """

    max_attempts: int = field(default=4, validator=validators.ge(1))
    backoff_base_s: float = field(default=0.5, validator=validators.ge(0))
    backoff_max_s: float = field(default=8.0, validator=validators.ge(0))
    max_retry_after_s: float = field(default=60.0, validator=validators.ge(0))
    max_total_wait_s: float | None = field(
        default=None, validator=validators.optional(validators.ge(0)))
    timeout: httpx.Timeout = field(factory=_default_timeout)


class RetryableStatus(Exception):
    """An HTTP answer worth retrying (see :func:`is_retryable_status`), raised by
    :func:`check_status`; ``retry_after_s`` is the wait the server asked for."""

    def __init__(self, status: int, retry_after_s: float | None = None, detail: str = "") -> None:
        super().__init__(f"HTTP {status}" + (f": {detail}" if detail else ""))
        self.status = status
        self.retry_after_s = retry_after_s
        self.detail = detail


class RequestFailed(Exception):
    """The request failed for good; ``str()`` is a message for the agent.

    ``attempts`` is the number of attempts made, ``status`` the last HTTP status
    (if any), ``retry_after_s`` the last wait the server asked for and
    ``last_error`` the failure that ended the retries (``None`` when raised by
    :func:`check_status`).
    """

    def __init__(self, message: str, *, attempts: int = 1, status: int | None = None,
                 retry_after_s: float | None = None,
                 last_error: BaseException | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status
        self.retry_after_s = retry_after_s
        self.last_error = last_error


def _parse_retry_after_value(value: str, now: float | None) -> float | None:
    value = value.strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = datetime.now(UTC).timestamp() if now is None else now
    return max(0.0, when.timestamp() - current)


def retry_after_seconds(source: httpx.Response | Mapping[str, str] | str | None, *,
                        now: float | None = None) -> float | None:
    """Seconds the server asks to wait, or ``None`` when it does not say.

    ``source`` is a response, its headers (``retry-after-ms`` is read first, then
    ``Retry-After``) or one ``Retry-After`` value: delta-seconds or an HTTP date,
    counted from ``now`` (a Unix time; default: the current time).  A date in
    the past gives 0; an unreadable value gives ``None``.
    """
    if source is None:
        return None
    if isinstance(source, str):
        return _parse_retry_after_value(source, now)
    headers = source.headers if isinstance(source, httpx.Response) else source
    lowered = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    return None if value is None else _parse_retry_after_value(value, now)


def is_retryable_status(status: int) -> bool:
    """Whether another attempt may get a different answer: 408, 409, 429 and 5xx."""
    return status in (408, 409, 429) or 500 <= status <= 599


def is_retryable(error: BaseException | int) -> bool:
    """Whether a failure (or an HTTP status) is worth another attempt:
    :class:`RetryableStatus`, ``httpx.HTTPStatusError`` with a retryable
    status, httpx timeouts and transport (connection) errors."""
    if isinstance(error, int):
        return is_retryable_status(error)
    if isinstance(error, RetryableStatus):
        return True
    if isinstance(error, httpx.HTTPStatusError):
        return is_retryable_status(error.response.status_code)
    return isinstance(error, httpx.TimeoutException | httpx.TransportError)


def requested_wait(error: BaseException) -> float | None:
    """The wait the server asked for with a failure, in seconds, if it did."""
    if isinstance(error, RetryableStatus):
        return error.retry_after_s
    if isinstance(error, httpx.HTTPStatusError):
        return retry_after_seconds(error.response)
    return None


def _response_detail(response: httpx.Response, limit: int = 300) -> str:
    """The server's error message: ``message``/``error``/``detail`` of a JSON body, else its text."""
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError, httpx.ResponseNotRead):
        body = None
    if isinstance(body, dict):
        for key in ("message", "error", "detail"):
            if isinstance(body.get(key), str):
                return body[key][:limit]
    try:
        text = response.text
    except (httpx.ResponseNotRead, UnicodeDecodeError):
        return ""
    return " ".join(text.split())[:limit]


def check_status(response: httpx.Response, service: str) -> None:
    """Raise :class:`RetryableStatus` for retryable answers and :class:`RequestFailed`
    for other non-2xx ones, naming ``service`` and the likely fix.  Streaming
    responses must be read before calling this."""
    status = response.status_code
    if 200 <= status < 300:
        return
    detail = _response_detail(response)
    if is_retryable_status(status):
        raise RetryableStatus(status, retry_after_seconds(response), detail)
    hint = {
        401: " (the API key was rejected; check it)",
        403: " (forbidden; the API key may be missing or invalid)",
        404: " (not found; check the URL)",
    }.get(status, "")
    raise RequestFailed(f"{service} answered HTTP {status}{hint}" + (f": {detail}" if detail else ""),
                        status=status)


class _WaitAsked(tenacity.wait.wait_base):
    """Wait what the server asked for, else jittered exponential backoff."""

    def __init__(self, policy: RetryPolicy, asked: Callable[[BaseException], float | None]) -> None:
        self.asked = asked
        self.backoff = tenacity.wait_random_exponential(multiplier=policy.backoff_base_s,
                                                        max=policy.backoff_max_s)

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        wait = self.asked(exc) if exc is not None else None
        return self.backoff(retry_state) if wait is None else wait


class _StopAfterTotalWait(tenacity.stop.stop_base):
    """Stop when the next wait would bring the waits of this call over ``limit_s``."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return retry_state.idle_for + retry_state.upcoming_sleep > self.limit_s


def _plural(n: int) -> str:
    return f"{n} attempt{'s' if n != 1 else ''}"


def _describe(exc: BaseException, policy: RetryPolicy) -> str:
    if isinstance(exc, httpx.TimeoutException):
        kinds = ((httpx.ConnectTimeout, "connecting", policy.timeout.connect),
                 (httpx.ReadTimeout, "waiting for data", policy.timeout.read),
                 (httpx.WriteTimeout, "sending", policy.timeout.write),
                 (httpx.PoolTimeout, "waiting for a connection", None))
        what, limit = next(((w, lim) for k, w, lim in kinds if isinstance(exc, k)), ("", None))
        return "timed out" + (f" {what}" if what else "") + (f" (limit {limit:g} s)" if limit else "")
    if isinstance(exc, httpx.TransportError):
        return f"connection failed ({type(exc).__name__}: {exc})"
    if isinstance(exc, RetryableStatus):
        label = "rate limited" if exc.status == 429 else "failed"
        return f"{label} (HTTP {exc.status}" + (f": {exc.detail}" if exc.detail else "") + ")"
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        detail = _response_detail(exc.response)
        label = "rate limited" if status == 429 else "failed"
        return f"{label} (HTTP {status}" + (f": {detail}" if detail else "") + ")"
    return f"failed ({exc})"


def _status_of(exc: BaseException) -> int | None:
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


def call_with_retries(fn: Callable[[], T], policy: RetryPolicy, *, service: str = "the server",
                      retryable: Callable[[BaseException], bool] = is_retryable,
                      retry_after: Callable[[BaseException], float | None] = requested_wait,
                      sleep: Callable[[float], None] = time.sleep) -> tuple[T, int]:
    """Call ``fn`` (one request) under ``policy``; return its value and the number
    of attempts made.

    ``retryable`` says which exceptions of ``fn`` deserve another attempt (it is
    asked once per failure, so it may count) and ``retry_after`` the wait a
    failure asks for.  Other exceptions propagate unchanged after the attempt
    that raised them; one with an ``attempts`` attribute gets the number of
    attempts made.  When retries end on a retryable failure (attempts or total
    wait spent, or the server asking to wait longer than
    ``policy.max_retry_after_s``), :class:`RequestFailed` is raised naming
    ``service``, the failure and the attempts, with the failure as
    ``last_error``.
    """
    attempts = 0
    judged: tuple[BaseException | None, bool] = (None, False)  # the latest failure, its verdict

    def should_retry(exc: BaseException) -> bool:
        nonlocal judged
        judged = (exc, retryable(exc))
        if not judged[1]:
            return False
        asked = retry_after(exc)
        return asked is None or asked <= policy.max_retry_after_s

    stop: tenacity.stop.stop_base = tenacity.stop_after_attempt(policy.max_attempts)
    if policy.max_total_wait_s is not None:
        stop = stop | _StopAfterTotalWait(policy.max_total_wait_s)
    retrying = tenacity.Retrying(retry=tenacity.retry_if_exception(should_retry),
                                 wait=_WaitAsked(policy, retry_after), stop=stop,
                                 sleep=sleep, reraise=True)

    def attempt() -> T:
        nonlocal attempts
        attempts += 1
        return fn()

    try:
        return retrying(attempt), attempts
    except Exception as exc:
        if judged[0] is not exc or not judged[1]:
            if hasattr(exc, "attempts"):
                exc.attempts = attempts
            raise
        asked = retry_after(exc)
        status = _status_of(exc)
        if asked is not None and asked > policy.max_retry_after_s:
            message = (f"{service} is rate limiting" + (f" (HTTP {status})" if status else "")
                       + f" and asks to wait {asked:g} s, more than the "
                       f"{policy.max_retry_after_s:g} s this tool waits; try again later")
        else:
            message = f"{service} {_describe(exc, policy)} after {_plural(attempts)}"
        raise RequestFailed(message, attempts=attempts, status=status, retry_after_s=asked,
                            last_error=exc) from exc
