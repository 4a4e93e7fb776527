"""The HTTP machinery shared by every provider: options, timeouts, retries,
the pre-call cost check and cost accounting.

Retry policy (rgym_core.http's, filled from :class:`ClientOptions`): 408,
409, 429, 5xx, connection errors and timeouts are retried
with jittered exponential backoff (``backoff_initial_s`` doubling up to
``backoff_max_s``), or after exactly the delay a ``Retry-After`` (or
``retry-after-ms``) header asks for, until ``max_attempts`` attempts or
``max_wait_s`` seconds of waiting in total.  A body that is not the promised
JSON is retried once (proxies truncate bodies now and then; a second bad body
means the endpoint does not speak the format).  400, 401, 403, 404 and other
4xx are never retried.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import httpx
from attrs import define, field

from rgym_core import (
    ModelResponse,
    RequestFailed,
    RetryPolicy,
    call_with_retries,
    is_retryable_status,
    retry_after_seconds,
)
from rgym_llm.errors import (
    ModelAPIError,
    ModelAuthError,
    ModelConfigError,
    ModelConnectionError,
    ModelRateLimitError,
    ModelRequestError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
)
from rgym_llm.keys import Secret, find_key, redact
from rgym_llm.prices import Price, PriceTable, unpriced_message, warn_unpriced

if TYPE_CHECKING:
    from rgym_core import EpisodeStatus


def _to_bool(value: Any) -> bool:
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"expected true or false, got {value!r}")
    return bool(value)


def _opt_float(value: Any) -> float | None:
    return None if value is None or value == "" else float(value)


@define
class ClientOptions:
    """Options every client takes (``--agent-option`` values arrive as strings)."""

    connect_timeout: float = field(default=10.0, converter=float)
    read_timeout: float = field(default=300.0, converter=float)
    max_attempts: int = field(default=6, converter=int)
    max_wait_s: float = field(default=120.0, converter=float)
    backoff_initial_s: float = field(default=1.0, converter=float)
    backoff_max_s: float = field(default=30.0, converter=float)
    stream: bool = field(default=False, converter=_to_bool)
    max_tokens: int = field(default=4096, converter=int)
    temperature: float | None = field(default=None, converter=_opt_float)
    #: Nucleus sampling (``top_p``), sent only when set.
    top_p: float | None = field(default=None, converter=_opt_float)
    prices: str | None = None
    api_key_env: str | None = None

    @classmethod
    def from_options(cls, provider: str, options: dict[str, Any]) -> ClientOptions:
        known = {a.name for a in attrs.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ModelConfigError(f"{provider}: unknown option(s) {', '.join(unknown)}; "
                                   f"known: {', '.join(sorted(known))}")
        try:
            return cls(**options)
        except (TypeError, ValueError) as exc:
            raise ModelConfigError(f"{provider}: bad option value: {exc}") from None


#: The name rgym_llm has always exported; the parser is rgym_core's.
parse_retry_after = retry_after_seconds


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """A deliberately high estimate of prompt tokens: the JSON text / 3 (real
    tokenizers give about 4 characters a token for English and code), so the
    pre-call cost check errs on the side of stopping early."""
    chars = len(json.dumps(messages, ensure_ascii=False))
    if tools:
        chars += len(json.dumps(tools, ensure_ascii=False))
    return math.ceil(chars / 3) + 8 * len(messages)


def _error_message(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:300]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return body.strip()[:300]


class ChatClient:
    """Base class of the provider clients (one ``httpx.Client`` each).

    Subclasses set :attr:`key_envs` and implement :meth:`_endpoint`,
    :meth:`_headers`, :meth:`_payload`, :meth:`_parse_body` and :meth:`_parse_stream`.
    """

    #: Environment variables searched for the key, in order.
    key_envs: tuple[str, ...] = ()
    #: Whether a request without a key is refused up front.
    key_required: bool = False
    default_base_url: str = ""

    def __init__(self, model: str, *, provider: str, base_url: str | None = None,
                 options: ClientOptions | None = None, api_key: Secret | None = None,
                 prices: PriceTable | None = None, transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.model = model
        self.provider = provider
        self.options = options or ClientOptions()
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        if not self.base_url:
            raise ModelConfigError(f"{provider}: no base URL; pass --base-url "
                                   "(e.g. http://127.0.0.1:8000/v1 for a local vLLM server)")
        if api_key is None:
            names = ((self.options.api_key_env,) if self.options.api_key_env else ()) + self.key_envs
            api_key, _ = find_key(names)
        self._key = api_key
        if self.key_required and not self._key:
            wanted = self.options.api_key_env or " or ".join(self.key_envs)
            raise ModelConfigError(f"{provider}: no API key; set {wanted} in the environment or in "
                                   "a .env file in the working directory")
        self.prices = prices or PriceTable.load(self.options.prices)
        self._sleep = sleep
        opts = self.options
        #: The shared rgym_core policy, filled from the options; ``max_wait_s`` caps
        #: both one wait the server asks for and all waits of a call together.
        try:
            self.retry_policy = RetryPolicy(
                max_attempts=max(1, opts.max_attempts), backoff_base_s=opts.backoff_initial_s,
                backoff_max_s=opts.backoff_max_s, max_retry_after_s=opts.max_wait_s,
                max_total_wait_s=opts.max_wait_s,
                timeout=httpx.Timeout(connect=opts.connect_timeout, read=opts.read_timeout,
                                      write=opts.read_timeout, pool=opts.connect_timeout))
        except ValueError as exc:
            raise ModelConfigError(f"{provider}: bad retry option: {exc} (backoff_initial_s, "
                                   "backoff_max_s and max_wait_s must be >= 0)") from None
        self._http = httpx.Client(timeout=self.retry_policy.timeout, transport=transport,
                                  follow_redirects=False)

    # -- provider-specific parts --------------------------------------------------
    def _endpoint(self) -> str:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _payload(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 max_tokens: int, temperature: float | None, stream: bool) -> dict[str, Any]:
        raise NotImplementedError

    def _parse_body(self, data: dict[str, Any]) -> ModelResponse:
        raise NotImplementedError

    def _parse_stream(self, lines: Iterable[str]) -> ModelResponse:
        raise NotImplementedError

    def _models_url(self) -> str:
        """The provider's model list (``GET``): the cheapest request that proves the
        server answers and accepts the key."""
        return f"{self.base_url}/models"

    # -- public -------------------------------------------------------------------
    @property
    def price(self) -> Price | None:
        return self.prices.lookup(self.model, self.provider)

    def check(self, requirements: Any) -> None:
        """Check, before an episode starts, that this client can serve it
        (:class:`rgym_core.models.ModelRequirements`): a cost limit needs a price,
        and with ``probe`` one ``GET`` of the model list must reach the server and
        not be refused for the key.  Raises
        :class:`~rgym_core.models.ModelCheckError` with the fix."""
        from rgym_core import ModelCheckError

        name = f"{self.provider}/{self.model}"
        limit = getattr(requirements, "cost_limit_usd", None)
        if limit is not None and self.price is None:
            raise ModelCheckError(unpriced_message(name, self.model, limit))
        if not getattr(requirements, "probe", True):
            return
        url = self._models_url()
        timeout = float(getattr(requirements, "timeout_s", 5.0))
        try:
            response = self._http.get(url, headers=self._headers(), timeout=timeout)
        except httpx.TimeoutException:
            raise ModelCheckError(f"{name}: the model server at {self.base_url} did not answer within "
                                  f"{timeout:g} s; check that it is up, or fix --base-url") from None
        except httpx.HTTPError as exc:
            reason = type(exc).__name__ if not str(exc) else str(exc)
            raise ModelCheckError(f"{name}: cannot reach the model server at {self.base_url} ({reason}); "
                                  "start the server or fix --base-url") from None
        if response.status_code in (401, 403):
            keys = self.options.api_key_env or " or ".join(self.key_envs) or "the provider's key"
            raise ModelCheckError(f"{name}: the server at {self.base_url} refused the API key "
                                  f"(HTTP {response.status_code}: {_error_message(response.text)}); "
                                  f"check {keys} (environment or .env)")
        problem = unlisted_model(self.model, _listed_models(response))
        if problem is not None:
            raise ModelCheckError(f"{name}: {problem} at {self.base_url}; pass one of them as --model "
                                  f"{self.provider}/NAME")

    def estimate_cost(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                      max_tokens: int) -> tuple[float, int]:
        """Upper estimate of the next call's cost (USD) and tokens."""
        prompt = estimate_tokens(messages, tools)
        price = self.price
        cost = 0.0 if price is None else price.cost(prompt, max_tokens)
        return cost, prompt + max_tokens

    def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None,
                 status: EpisodeStatus | None = None) -> ModelResponse:
        """Send one chat request (after the cost check) and return the answer with
        its usage and cost.  Raises :class:`~rgym_core.agents.BudgetExceeded` before
        a call that could cross the cost or token limit."""
        max_tokens = int(max_tokens or self.options.max_tokens)
        temperature = self.options.temperature if temperature is None else temperature
        price = self.price
        if price is None:
            limit = getattr(getattr(status, "budget", None), "cost_limit_usd", None)
            if limit is not None:
                raise ModelConfigError(unpriced_message(f"{self.provider}/{self.model}", self.model,
                                                        limit))
            warn_unpriced(self.provider, self.model)
        if status is not None:
            estimate_usd, estimate_tok = self.estimate_cost(messages, tools, max_tokens)
            status.check_cost(estimate_usd, estimate_tok)
        stream = self.options.stream
        payload = self._payload(messages, tools, max_tokens, temperature, stream)
        response = self._post_with_retries(payload, stream)
        self._account(response, price, messages)
        return response

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        key = "set" if self._key else "none"
        return (f"{type(self).__name__}(provider={self.provider!r}, model={self.model!r}, "
                f"base_url={self.base_url!r}, api_key=<{key}>)")

    # -- machinery ----------------------------------------------------------------
    def _account(self, response: ModelResponse, price: Price | None,
                 messages: list[dict[str, Any]]) -> None:
        usage = response.usage
        raw_usage = response.raw.setdefault("_usage", {})
        if usage.input_tokens == 0 and usage.output_tokens == 0:
            usage.input_tokens = math.ceil(len(json.dumps(messages)) / 4)
            usage.output_tokens = math.ceil(len(response.text) / 4) + 16 * len(response.tool_calls)
            raw_usage["estimated"] = True
        usage.calls = 1
        if price is not None:
            cached_read = int(raw_usage.get("cache_read", 0))
            cached_write = int(raw_usage.get("cache_write", 0))
            plain = max(0, usage.input_tokens - cached_read - cached_write)
            usage.cost_usd = price.cost(plain, usage.output_tokens, cache_read_tokens=cached_read,
                                        cache_write_tokens=cached_write)

    def _status_error(self, response: httpx.Response) -> ModelAPIError:
        status = response.status_code
        detail = redact(_error_message(response.text), self._key)
        where = f"{self.provider}: HTTP {status} from {self._endpoint()}"
        if status in (401, 403):
            names = self.options.api_key_env or " or ".join(self.key_envs) or "the provider's key"
            fix = (f"check the API key ({names}, from the environment or .env)" if status == 401
                   else f"the key is not allowed to use model '{self.model}'")
            return ModelAuthError(f"{where}: {detail}; {fix}", provider=self.provider, status=status)
        if status == 429:
            return ModelRateLimitError(f"{where} (rate limited): {detail}", provider=self.provider,
                                       status=status, retryable=True,
                                       retry_after=parse_retry_after(response.headers))
        if is_retryable_status(status):
            return ModelServerError(f"{where}: {detail}", provider=self.provider, status=status,
                                    retryable=True, retry_after=parse_retry_after(response.headers))
        if status == 404:
            fix = (f"check the model name '{self.model}' and the base URL (OpenAI-compatible "
                   "servers expect it to end in /v1)")
            return ModelRequestError(f"{where}: {detail}; {fix}", provider=self.provider, status=status)
        return ModelRequestError(f"{where}: the request was rejected: {detail}",
                                 provider=self.provider, status=status)

    def _send_once(self, payload: dict[str, Any], stream: bool) -> ModelResponse:
        url = self._endpoint()
        headers = self._headers()
        try:
            if stream:
                with self._http.stream("POST", url, json=payload, headers=headers) as response:
                    if response.status_code >= 400:
                        response.read()
                        raise self._status_error(response)
                    return self._parse_stream(response.iter_lines())
            response = self._http.post(url, json=payload, headers=headers)
            if response.status_code >= 400:
                raise self._status_error(response)
            try:
                data = response.json()
            except ValueError:
                snippet = redact(response.text[:200], self._key)
                raise ModelResponseError(f"{self.provider}: {url} answered with a body that is not "
                                         f"JSON: {snippet!r}", provider=self.provider,
                                         status=response.status_code, retryable=True) from None
            try:
                return self._parse_body(data)
            except (KeyError, IndexError, TypeError, AttributeError) as exc:
                raise ModelResponseError(f"{self.provider}: {url} answered with JSON of an unexpected "
                                         f"shape ({type(exc).__name__}: {exc})", provider=self.provider,
                                         status=response.status_code, retryable=True) from None
        except httpx.TimeoutException as exc:
            raise ModelTimeoutError(f"{self.provider}: no answer from {url} within the timeout "
                                    f"(connect {self.options.connect_timeout:g} s, read "
                                    f"{self.options.read_timeout:g} s; {type(exc).__name__})",
                                    provider=self.provider, retryable=True) from None
        except httpx.TransportError as exc:
            raise ModelConnectionError(f"{self.provider}: cannot reach {url} ({type(exc).__name__}: "
                                       f"{redact(str(exc), self._key)}); is the server running?",
                                       provider=self.provider, retryable=True) from None

    def _post_with_retries(self, payload: dict[str, Any], stream: bool) -> ModelResponse:
        """Send with the retry policy; a response that needed retries carries them in
        ``raw["_retries"]`` (per failed attempt: ``attempt``, ``status``, ``error``,
        ``message``, ``wait_s``, ``retry_after_s``) and their number in ``usage.retries``."""
        malformed = 0
        failures: list[dict[str, Any]] = []
        attempt = 0

        def send() -> ModelResponse:
            nonlocal attempt
            attempt += 1
            try:
                return self._send_once(payload, stream)
            except ModelAPIError as exc:
                failures.append(_failure_record(attempt, exc))
                raise

        def sleep(seconds: float) -> None:
            if failures:
                failures[-1]["wait_s"] = round(float(seconds), 3)
            self._sleep(seconds)

        def retryable(exc: BaseException) -> bool:
            nonlocal malformed
            if not isinstance(exc, ModelAPIError) or not exc.retryable:
                return False
            if isinstance(exc, ModelResponseError):
                malformed += 1
                return malformed <= 1
            return True

        try:
            response, _ = call_with_retries(
                send, self.retry_policy, service=self.provider, retryable=retryable,
                retry_after=lambda exc: getattr(exc, "retry_after", None), sleep=sleep)
        except RequestFailed as failed:
            exc = failed.last_error
            assert isinstance(exc, ModelAPIError)
            max_wait_s = self.options.max_wait_s
            note = f" (gave up after {failed.attempts} attempts"
            if exc.retry_after is not None and exc.retry_after > max_wait_s:
                note += f"; the server asked to wait {exc.retry_after:g} s, over max_wait_s={max_wait_s:g}"
            final = type(exc)(str(exc) + note + ")", provider=exc.provider, status=exc.status,
                              retryable=exc.retryable, retry_after=exc.retry_after)
            final.attempts = failed.attempts
            final.retries = failures[:-1]  # the last is this error
            raise final from None
        if failures:
            response.raw["_retries"] = failures
            response.usage.retries = len(failures)
        return response


_FAILURE_KINDS = ((ModelRateLimitError, "rate_limited"), (ModelServerError, "server_error"),
                  (ModelTimeoutError, "timeout"), (ModelConnectionError, "connection"),
                  (ModelResponseError, "bad_response"))


def _failure_record(attempt: int, exc: ModelAPIError) -> dict[str, Any]:
    """One failed attempt as the trajectory keeps it (``wait_s`` is added once the
    wait before the next attempt is known)."""
    kind = next((name for cls, name in _FAILURE_KINDS if isinstance(exc, cls)), "error")
    record: dict[str, Any] = {"attempt": attempt, "status": exc.status, "error": kind,
                              "message": str(exc)[:300]}
    if exc.retry_after is not None:
        record["retry_after_s"] = exc.retry_after
    return record


def _listed_models(response: httpx.Response) -> list[str]:
    """The model ids a ``GET /models`` answer lists (OpenAI's and Anthropic's shape:
    ``{"data": [{"id": ...}, ...]}``); [] when it is not such a list."""
    if response.status_code != 200:
        return []
    try:
        data = response.json()
    except ValueError:
        return []
    items = data.get("data") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return []
    return [str(item.get("id")) for item in items if isinstance(item, dict) and item.get("id")]


def unlisted_model(model: str, listed: list[str]) -> str | None:
    """Why ``model`` is not among the ``listed`` models of a server (None when it is,
    or when the server lists none): names match case-insensitively, and a listed
    ``vendor/name`` or ``name:tag`` matches the bare name the user wrote."""
    if not listed:
        return None
    want = model.lower()
    for name in listed:
        low = name.lower()
        if low == want or low.rsplit("/", 1)[-1] == want or want.rsplit("/", 1)[-1] == low:
            return None
    import difflib

    close = difflib.get_close_matches(model, listed, n=3, cutoff=0.6)
    shown = close or sorted(listed)[:12]
    more = "" if close or len(listed) <= 12 else f" (and {len(listed) - 12} more)"
    lead = "did you mean " if close else "it lists "
    return (f"the server does not serve model '{model}' ({lead}"
            f"{', '.join(shown)}{more})")
