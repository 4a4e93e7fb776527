"""LLM backends for rgym: OpenAI-compatible chat completions and the Anthropic
Messages API over httpx, with retries (tenacity), token usage, a price table and
a cost limit checked before every call.  Names are imported on first use."""

from typing import TYPE_CHECKING

from rgym_core import lazy_exports

_EXPORTS = {
    "AnthropicClient": "rgym_llm.anthropic_messages",
    "ChatClient": "rgym_llm.client",
    "ClientOptions": "rgym_llm.client",
    "ModelAPIError": "rgym_llm.errors",
    "ModelAuthError": "rgym_llm.errors",
    "ModelConfigError": "rgym_llm.errors",
    "ModelConnectionError": "rgym_llm.errors",
    "ModelError": "rgym_llm.errors",
    "ModelRateLimitError": "rgym_llm.errors",
    "ModelRequestError": "rgym_llm.errors",
    "ModelResponseError": "rgym_llm.errors",
    "ModelServerError": "rgym_llm.errors",
    "ModelTimeoutError": "rgym_llm.errors",
    "OpenAIChatClient": "rgym_llm.openai_chat",
    "OpenAIClient": "rgym_llm.openai_chat",
    "Price": "rgym_llm.prices",
    "PriceTable": "rgym_llm.prices",
    "Secret": "rgym_llm.keys",
    "estimate_tokens": "rgym_llm.client",
    "parse_retry_after": "rgym_llm.client",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "AnthropicClient", "ChatClient", "ClientOptions", "ModelAPIError", "ModelAuthError",
    "ModelConfigError", "ModelConnectionError", "ModelError", "ModelRateLimitError",
    "ModelRequestError", "ModelResponseError", "ModelServerError", "ModelTimeoutError",
    "OpenAIChatClient", "OpenAIClient", "Price", "PriceTable", "Secret", "estimate_tokens",
    "parse_retry_after",
]

if TYPE_CHECKING:
    from rgym_llm.anthropic_messages import AnthropicClient
    from rgym_llm.client import ChatClient, ClientOptions, estimate_tokens, parse_retry_after
    from rgym_llm.errors import (
        ModelAPIError,
        ModelAuthError,
        ModelConfigError,
        ModelConnectionError,
        ModelError,
        ModelRateLimitError,
        ModelRequestError,
        ModelResponseError,
        ModelServerError,
        ModelTimeoutError,
    )
    from rgym_llm.keys import Secret
    from rgym_llm.openai_chat import OpenAIChatClient, OpenAIClient
    from rgym_llm.prices import Price, PriceTable
