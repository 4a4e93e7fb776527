"""The interface between agent scaffolds and LLM providers.

Models are named ``provider/model`` (``openai-compatible/qwen2.5-7b``,
``anthropic/claude-sonnet-4``).  A provider is registered with a
:class:`ModelProviderSpec` through ``rgym_register_model_providers``; its
factory returns a :class:`ModelClient`.  Clients check the episode's cost limit
*before* each request (:meth:`rgym_core.agents.EpisodeStatus.check_cost`).
"""

from __future__ import annotations

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


@define(frozen=True)
class ModelProviderSpec:
    """A registered LLM provider; ``factory(model, base_url, options)`` builds a client."""

    name: str
    factory: Callable[..., ModelClient]
    description: str = ""


def create_model_client(name: str, *, base_url: str | None = None, registry: Any = None,
                        **options: Any) -> ModelClient:
    """Build a client for ``provider/model`` through the registered providers.

    Raises :class:`rgym_core.registry.RegistryError` for an unknown provider.
    """
    if "/" not in name:
        raise ValueError(f"model '{name}' must be named 'provider/model' "
                         f"(e.g. openai-compatible/{name})")
    provider, model = name.split("/", 1)
    if registry is None:
        from rgym_core.registry import load_registry

        registry = load_registry()
    spec: ModelProviderSpec = registry.model_provider(provider)
    return spec.factory(model, base_url=base_url, **options)
