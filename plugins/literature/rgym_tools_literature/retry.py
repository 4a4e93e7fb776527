"""The HTTP retry policy shared by rgym's network tools.

Retries only what can succeed on a second try: HTTP 429 (waiting as long as
``Retry-After`` asks, up to a cap), 5xx answers, timeouts and connection
errors, with jittered exponential backoff and a cap on attempts.  Other 4xx
answers fail at once.  Every failure ends as one :class:`RequestFailed` whose
message is fit to show an agent.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

import httpx
import tenacity
from attrs import define, field

T = TypeVar("T")


def _default_timeout() -> httpx.Timeout:
    return httpx.Timeout(connect=5.0, read=20.0, write=10.0, pool=5.0)


@define(frozen=True)
class RetryPolicy:
    """How often and how long to retry one request.

    ``timeout`` is the httpx timeout of each attempt; backoff waits are drawn
    uniformly from ``[0, min(backoff_max_s, backoff_base_s * 2**n)]`` (full
    jitter); a ``Retry-After`` above ``max_retry_after_s`` is not waited for.
    """

    max_attempts: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    max_retry_after_s: float = 60.0
    timeout: httpx.Timeout = field(factory=_default_timeout)


class RetryableStatus(Exception):
    """An HTTP answer worth retrying (429 or 5xx)."""

    def __init__(self, status: int, retry_after_s: float | None = None, detail: str = "") -> None:
        super().__init__(f"HTTP {status}" + (f": {detail}" if detail else ""))
        self.status = status
        self.retry_after_s = retry_after_s
        self.detail = detail


class RequestFailed(Exception):
    """The request failed for good; ``str()`` is a message for the agent."""

    def __init__(self, message: str, *, attempts: int = 1, status: int | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
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


def response_detail(response: httpx.Response, limit: int = 300) -> str:
    """The server's error message: ``message``/``error`` of a JSON body, else its text."""
    try:
        body = response.json()
    except ValueError:
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
    """Raise :class:`RetryableStatus` for 429/5xx and :class:`RequestFailed` for other
    non-2xx answers.  Streaming responses must be read before calling this."""
    status = response.status_code
    if 200 <= status < 300:
        return
    detail = response_detail(response)
    if status == 429 or status >= 500:
        raise RetryableStatus(status, parse_retry_after(response.headers.get("retry-after")), detail)
    hint = {
        401: " (the API key was rejected; check it)",
        403: " (forbidden; the API key may be missing or invalid)",
        404: " (not found; check the URL)",
    }.get(status, "")
    raise RequestFailed(f"{service} answered HTTP {status}{hint}" + (f": {detail}" if detail else ""),
                        status=status)


class _Wait(tenacity.wait.wait_base):
    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.backoff = tenacity.wait_random_exponential(multiplier=policy.backoff_base_s,
                                                        max=policy.backoff_max_s)

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, RetryableStatus) and exc.retry_after_s is not None:
            return exc.retry_after_s
        return self.backoff(retry_state)


def _describe(exc: BaseException, policy: RetryPolicy) -> str:
    if isinstance(exc, httpx.TimeoutException):
        kind = {httpx.ConnectTimeout: "connecting", httpx.ReadTimeout: "waiting for data",
                httpx.WriteTimeout: "sending", httpx.PoolTimeout: "waiting for a connection"}
        what = next((v for k, v in kind.items() if isinstance(exc, k)), "")
        limit = {"connecting": policy.timeout.connect, "waiting for data": policy.timeout.read,
                 "sending": policy.timeout.write}.get(what)
        return "timed out" + (f" {what}" if what else "") + (f" (limit {limit:g} s)" if limit else "")
    if isinstance(exc, httpx.TransportError):
        return f"connection failed ({type(exc).__name__}: {exc})"
    return str(exc)


def call_with_retries(fn: Callable[[], T], policy: RetryPolicy, *, service: str,
                      sleep: Callable[[float], None] = time.sleep,
                      on_attempt: Callable[[int], None] | None = None) -> tuple[T, int]:
    """Call ``fn`` (which performs one request) under ``policy``; return its value and
    the number of attempts made.

    ``fn`` raises :class:`RetryableStatus` for answers worth retrying (see
    :func:`check_status`); httpx timeouts and transport errors are retried too.
    Anything else propagates unchanged.  Exhausted retries raise
    :class:`RequestFailed` naming the service, the last failure and the attempts.
    """

    def retryable(exc: BaseException) -> bool:
        if isinstance(exc, RetryableStatus):
            return exc.retry_after_s is None or exc.retry_after_s <= policy.max_retry_after_s
        return isinstance(exc, httpx.TimeoutException | httpx.TransportError)

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(retryable),
        stop=tenacity.stop_after_attempt(max(1, policy.max_attempts)),
        wait=_Wait(policy),
        sleep=sleep,
        reraise=True,
    )
    attempts = 0

    def attempt() -> T:
        nonlocal attempts
        attempts += 1
        if on_attempt is not None:
            on_attempt(attempts)
        return fn()

    try:
        return retrying(attempt), attempts
    except RetryableStatus as exc:
        if exc.retry_after_s is not None and exc.retry_after_s > policy.max_retry_after_s:
            raise RequestFailed(
                f"{service} is rate limiting (HTTP {exc.status}) and asks to wait "
                f"{exc.retry_after_s:g} s, more than the {policy.max_retry_after_s:g} s this tool "
                "waits; try again later", attempts=attempts, status=exc.status) from None
        label = "rate limited" if exc.status == 429 else "failed"
        raise RequestFailed(
            f"{service} {label} (HTTP {exc.status}" + (f": {exc.detail}" if exc.detail else "")
            + f") after {attempts} attempt{'s' if attempts != 1 else ''}",
            attempts=attempts, status=exc.status) from None
    except (httpx.TimeoutException, httpx.TransportError) as exc:
        raise RequestFailed(f"{service} {_describe(exc, policy)} after {attempts} "
                            f"attempt{'s' if attempts != 1 else ''}", attempts=attempts) from None
    except RequestFailed as exc:
        exc.attempts = attempts
        raise
