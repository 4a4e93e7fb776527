"""rgym_core.http: the shared retry policy against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import email.utils
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from attrs import define, field

from rgym_core.http import (
    RequestFailed,
    RetryableStatus,
    RetryPolicy,
    call_with_retries,
    check_status,
    is_retryable,
    is_retryable_status,
    retry_after_seconds,
)


@define
class Answer:
    status: int = 200
    headers: dict[str, str] = field(factory=dict)
    body: object = field(factory=lambda: {"ok": True})
    delay_s: float = 0.0


class Server:
    """A threaded stdlib HTTP server answering queued :class:`Answer` s in order
    (then 200 ``{"ok": true}``) and counting requests."""

    def __init__(self) -> None:
        self.answers: deque[Answer] = deque()
        self.hits = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (stdlib name)
                with lock:
                    outer.hits += 1
                    answer = outer.answers.popleft() if outer.answers else Answer()
                if answer.delay_s:
                    time.sleep(answer.delay_s)
                body = json.dumps(answer.body).encode()
                try:
                    self.send_response(answer.status)
                    for name, value in {"content-type": "application/json", **answer.headers}.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/thing"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    def queue(self, *answers: Answer) -> None:
        self.answers.extend(answers)


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    srv.thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()


FAST = RetryPolicy(max_attempts=4, backoff_base_s=0.01, backoff_max_s=0.05,
                   timeout=httpx.Timeout(2.0))


def fetch(url: str, policy: RetryPolicy = FAST, sleeps: list[float] | None = None
          ) -> tuple[dict, int]:
    """One GET under ``policy`` the way plugins do it: check_status, then the JSON."""
    recorded = [] if sleeps is None else sleeps

    with httpx.Client(timeout=policy.timeout) as client:
        def once() -> dict:
            response = client.get(url)
            check_status(response, "Test API")
            return response.json()

        return call_with_retries(once, policy, service="Test API", sleep=recorded.append)


def test_retry_after_seconds_is_waited_exactly(server):
    server.queue(Answer(429, {"Retry-After": "2"}))
    sleeps: list[float] = []
    assert fetch(server.url, sleeps=sleeps) == ({"ok": True}, 2)
    assert server.hits == 2 and sleeps == [2.0]


def test_retry_after_http_date_is_waited_until(server):
    when = email.utils.formatdate(time.time() + 3600, usegmt=True)
    past = "Thu, 01 Jan 2015 00:00:00 GMT"
    server.queue(Answer(503, {"Retry-After": when}), Answer(429, {"Retry-After": past}))
    sleeps: list[float] = []
    policy = RetryPolicy(max_retry_after_s=7200, timeout=httpx.Timeout(2.0))
    assert fetch(server.url, policy, sleeps) == ({"ok": True}, 3)
    # An hour ahead in whole seconds (the slack is for a slow machine); a past date waits 0.
    assert 3590.0 < sleeps[0] <= 3600.0 and sleeps[1] == 0.0


def test_retry_after_ms_wins_over_retry_after(server):
    server.queue(Answer(429, {"retry-after-ms": "250", "Retry-After": "9"}))
    sleeps: list[float] = []
    fetch(server.url, sleeps=sleeps)
    assert sleeps == [0.25]


def test_500_then_200_backs_off_within_the_jitter_bounds(server):
    server.queue(Answer(500, body={"message": "boom"}), Answer(502))
    sleeps: list[float] = []
    assert fetch(server.url, sleeps=sleeps) == ({"ok": True}, 3)
    assert server.hits == 3 and len(sleeps) == 2
    assert 0.0 <= sleeps[0] <= 0.01 and 0.0 <= sleeps[1] <= 0.02


@pytest.mark.parametrize("status,hint", [(400, ""), (401, "the API key was rejected"),
                                         (403, "forbidden"), (404, "not found")])
def test_client_errors_are_never_retried(server, status, hint):
    server.queue(Answer(status, body={"message": "nope"}))
    sleeps: list[float] = []
    with pytest.raises(RequestFailed) as info:
        fetch(server.url, sleeps=sleeps)
    assert server.hits == 1 and sleeps == [] and info.value.attempts == 1
    assert info.value.status == status
    assert str(info.value).startswith(f"Test API answered HTTP {status}")
    assert hint in str(info.value) and str(info.value).endswith(": nope")


def test_a_client_error_after_a_retry_reports_both_attempts(server):
    server.queue(Answer(503), Answer(401))
    with pytest.raises(RequestFailed, match="HTTP 401") as info:
        fetch(server.url)
    assert server.hits == 2 and info.value.attempts == 2


def test_retry_after_over_the_cap_gives_up_at_once(server):
    server.queue(Answer(429, {"Retry-After": "600"}))
    sleeps: list[float] = []
    with pytest.raises(RequestFailed) as info:
        fetch(server.url, RetryPolicy(max_retry_after_s=60, timeout=httpx.Timeout(2.0)), sleeps)
    assert server.hits == 1 and sleeps == []
    assert str(info.value) == ("Test API is rate limiting (HTTP 429) and asks to wait 600 s, "
                               "more than the 60 s this tool waits; try again later")
    assert (info.value.attempts, info.value.status, info.value.retry_after_s) == (1, 429, 600.0)
    assert isinstance(info.value.last_error, RetryableStatus)


def test_attempts_cap(server):
    server.queue(*[Answer(503, body={"error": "upstream down"})] * 5)
    with pytest.raises(RequestFailed) as info:
        fetch(server.url, RetryPolicy(max_attempts=3, backoff_base_s=0.01, backoff_max_s=0.02))
    assert server.hits == 3 and info.value.attempts == 3
    assert str(info.value) == "Test API failed (HTTP 503: upstream down) after 3 attempts"


def test_total_wait_cap_stops_before_the_wait_that_would_cross_it(server):
    server.queue(*[Answer(429, {"Retry-After": "10"}, {"error": "slow down"})] * 5)
    sleeps: list[float] = []
    policy = RetryPolicy(max_attempts=10, max_total_wait_s=25)
    with pytest.raises(RequestFailed, match=r"rate limited \(HTTP 429: slow down\) after 3 attempts"):
        fetch(server.url, policy, sleeps)
    assert sleeps == [10.0, 10.0] and server.hits == 3


def test_read_timeout_is_retried_then_named(server):
    server.queue(Answer(delay_s=1.0), Answer(delay_s=1.0))
    policy = RetryPolicy(max_attempts=2, backoff_base_s=0.01, timeout=httpx.Timeout(0.2))
    with pytest.raises(RequestFailed) as info:
        fetch(server.url, policy)
    assert str(info.value) == "Test API timed out waiting for data (limit 0.2 s) after 2 attempts"
    assert isinstance(info.value.last_error, httpx.ReadTimeout)


def test_connection_refused_is_retried_then_named():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RequestFailed, match=r"^Test API connection failed \(ConnectError: .*\) "
                                            r"after 3 attempts$"):
        fetch(f"http://127.0.0.1:{port}/", RetryPolicy(max_attempts=3, backoff_base_s=0.01))


def test_raise_for_status_works_without_check_status(server):
    server.queue(Answer(503, {"Retry-After": "1"}))
    sleeps: list[float] = []
    with httpx.Client() as client:
        body, attempts = call_with_retries(
            lambda: client.get(server.url).raise_for_status().json(), FAST, sleep=sleeps.append)
    assert (body, attempts, sleeps) == ({"ok": True}, 2, [1.0])


def test_other_exceptions_propagate_unchanged_after_one_attempt():
    calls: list[int] = []

    def bug() -> None:
        calls.append(1)
        raise KeyError("not an HTTP problem")

    with pytest.raises(KeyError):
        call_with_retries(bug, FAST, sleep=lambda s: None)
    assert calls == [1]


def test_a_custom_retryable_predicate_is_asked_once_per_failure():
    class Flaky(Exception):
        retry_after = 0.5

    asked: list[BaseException] = []

    def fn() -> None:
        raise Flaky()

    def retryable(exc: BaseException) -> bool:
        asked.append(exc)
        return len(asked) <= 1  # retry the first failure only

    sleeps: list[float] = []
    with pytest.raises(Flaky):
        call_with_retries(fn, FAST, retryable=retryable,
                          retry_after=lambda e: getattr(e, "retry_after", None), sleep=sleeps.append)
    assert len(asked) == 2 and sleeps == [0.5]


def test_retry_after_parsing():
    assert retry_after_seconds(" 1.5 ") == 1.5
    assert retry_after_seconds("-3") == 0.0
    assert retry_after_seconds("soon") is None and retry_after_seconds("") is None
    assert retry_after_seconds(None) is None and retry_after_seconds({}) is None
    when = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert retry_after_seconds(when, now=1_000_000.0) == pytest.approx(30.0)
    assert retry_after_seconds({"Retry-After": when}, now=2_000_000.0) == 0.0
    assert retry_after_seconds({"retry-after-ms": "x", "retry-after": "4"}) == 4.0
    response = httpx.Response(429, headers={"Retry-After-Ms": "1500"})
    assert retry_after_seconds(response) == 1.5


def test_which_statuses_are_retried():
    assert [s for s in (400, 401, 403, 404, 408, 409, 422, 429, 500, 503, 599)
            if is_retryable_status(s)] == [408, 409, 429, 500, 503, 599]
    assert is_retryable(503) and not is_retryable(404)
    assert is_retryable(httpx.ConnectError("x")) and is_retryable(httpx.ReadTimeout("x"))
    assert not is_retryable(ValueError("x"))


def test_policy_rejects_impossible_values():
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="max_total_wait_s"):
        RetryPolicy(max_total_wait_s=-1)
