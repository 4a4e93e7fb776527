"""The interface between agent scaffolds and LLM providers.

Models are named ``provider/model`` (``openai-compatible/qwen2.5-7b``,
``anthropic/claude-sonnet-4``).  A provider is registered with a
:class:`ModelProviderSpec` through ``rgym_register_model_providers``; its
factory returns a :class:`ModelClient`.  Clients check the episode's cost limit
*before* each request (:meth:`rgym_core.agents.EpisodeStatus.check_cost`).

Before an episode starts, the runner checks every model client its agent holds
(:func:`check_model_client`), so a configuration that cannot work stops the run
with a usage error and the fix, before any run directory exists: a cost limit on
a model with no price, a server that does not answer, a missing key.  A client
does this in its optional ``check(requirements)`` method; without one, rgym
checks what it can see (a ``price`` attribute that is ``None``, a ``base_url``
whose host does not accept connections).
"""

from __future__ import annotations

import socket
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from attrs import define, field

from rgym_core.records import Usage

if TYPE_CHECKING:
    from rgym_core.agents import EpisodeStatus


@define
class ToolCall:
    """A native function call requested by the model."""

    id: str
    name: str
    arguments: dict[str, Any]


@define
class ModelResponse:
    """One completion: text, any native tool calls, and its usage and cost."""

    text: str
    tool_calls: list[ToolCall] = field(factory=list)
    usage: Usage = field(factory=Usage)
    stop_reason: str | None = None
    raw: dict[str, Any] = field(factory=dict)


class ModelClient(Protocol):
    """A chat model.  ``messages`` use the OpenAI role/content shape
    (``system``, ``user``, ``assistant``, ``tool``); providers translate."""

    model: str

    def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None,
                 status: EpisodeStatus | None = None) -> ModelResponse: ...

    # Optional:
    #   def check(self, requirements: ModelRequirements) -> None
    # raises (ModelCheckError, or any exception whose message says what to fix) when the
    # client cannot serve an episode with these requirements; sends at most one cheap
    # request when requirements.probe is true.


class ModelFactory(Protocol):
    """Builds a client for ``provider/model`` through the run's registry: what the
    runner hands an agent as :attr:`rgym_core.agents.AgentConfig.create_model_client`."""

    def __call__(self, name: str, *, base_url: str | None = None, **options: Any) -> ModelClient: ...


class ModelCheckError(ValueError):
    """A model cannot be used as configured; the message names the fix."""


@define(frozen=True)
class ModelRequirements:
    """What an episode needs from a model client, checked before it starts.

    ``cost_limit_usd``: the model must be priced so the limit can be enforced.
    ``token_limit``: informative.  ``probe``: send one cheap request (or open one
    connection) to see that the server answers and accepts the key.
    """

    cost_limit_usd: float | None = None
    token_limit: int | None = None
    probe: bool = True
    timeout_s: float = 5.0


def _describe(client: Any) -> str:
    provider = getattr(client, "provider", None)
    model = getattr(client, "model", "?")
    return f"{provider}/{model}" if provider else str(model)


def _probe_connection(url: str, timeout: float) -> str | None:
    """Open (and close) one TCP connection to ``url``'s host; the problem, or ``None``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return None
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__


def check_model_client(client: Any, requirements: ModelRequirements) -> None:
    """Check that ``client`` can serve an episode with ``requirements``; raises
    :class:`ModelCheckError` (or the client's own error) with the fix."""
    check = getattr(client, "check", None)
    if callable(check):
        check(requirements)
        return
    name = _describe(client)
    if requirements.cost_limit_usd is not None and hasattr(client, "price") and client.price is None:
        raise ModelCheckError(
            f"{name}: no price for this model, so the ${requirements.cost_limit_usd:g} cost limit "
            f"cannot be enforced; pass --price {getattr(client, 'model', name)}=IN,OUT (USD per "
            "million input and output tokens, 0,0 for a free local model), name a prices file in "
            "RGYM_PRICES, or drop --cost-limit")
    base_url = getattr(client, "base_url", None)
    if requirements.probe and isinstance(base_url, str) and base_url:
        problem = _probe_connection(base_url, requirements.timeout_s)
        if problem is not None:
            raise ModelCheckError(f"{name}: cannot reach the model server at {base_url} "
                                  f"({problem}); start the server or fix --base-url")


def model_clients_of(agent: Any) -> list[Any]:
    """The model clients an agent holds: its ``model_clients()`` if it has one,
    else its ``client`` attribute when that looks like a :class:`ModelClient`."""
    method = getattr(agent, "model_clients", None)
    if callable(method):
        return [c for c in (method() or []) if c is not None]
    client = getattr(agent, "client", None)
    return [client] if client is not None and callable(getattr(client, "complete", None)) else []


@define(frozen=True)
class ModelProviderSpec:
    """A registered LLM provider; ``factory(model, base_url, options)`` builds a client."""

    name: str
    factory: Callable[..., ModelClient]
    description: str = ""
