"""The shared retry policy: Retry-After parsing, backoff bounds, what is and is not retried."""

from __future__ import annotations

import email.utils

import httpx
import pytest
from rgym_tools_literature.retry import (
    RequestFailed,
    RetryableStatus,
    RetryPolicy,
    call_with_retries,
    parse_retry_after,
)


def test_parse_retry_after_seconds_and_http_dates():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    when = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert parse_retry_after(when, now=1_000_000.0) == pytest.approx(30.0)
    assert parse_retry_after(when, now=2_000_000.0) == 0.0


def test_429_without_retry_after_backs_off_within_the_cap():
    policy = RetryPolicy(max_attempts=4, backoff_base_s=0.5, backoff_max_s=2.0)
    sleeps: list[float] = []
    calls = iter([RetryableStatus(429), RetryableStatus(503), RetryableStatus(429)])

    def fn() -> str:
        exc = next(calls, None)
        if exc is not None:
            raise exc
        return "ok"

    value, attempts = call_with_retries(fn, policy, service="S", sleep=sleeps.append)
    assert (value, attempts) == ("ok", 4)
    assert len(sleeps) == 3 and all(0 <= s <= 2.0 for s in sleeps)


def test_non_retryable_errors_propagate_after_one_attempt():
    calls = []

    def fn() -> None:
        calls.append(1)
        raise RequestFailed("S answered HTTP 403", status=403)

    with pytest.raises(RequestFailed, match="HTTP 403") as info:
        call_with_retries(fn, RetryPolicy(), service="S", sleep=lambda s: None)
    assert len(calls) == 1 and info.value.attempts == 1

    def bug() -> None:
        raise KeyError("not an HTTP problem")

    with pytest.raises(KeyError):
        call_with_retries(bug, RetryPolicy(), service="S", sleep=lambda s: None)


def test_transport_errors_are_retried_then_reported():
    def fn() -> None:
        raise httpx.ConnectError("refused")

    with pytest.raises(RequestFailed, match=r"S connection failed \(ConnectError: refused\) "
                                            r"after 2 attempts"):
        call_with_retries(fn, RetryPolicy(max_attempts=2), service="S", sleep=lambda s: None)
