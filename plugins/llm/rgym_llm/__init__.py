"""LLM backends for rgym: OpenAI-compatible chat completions and the Anthropic
Messages API over httpx, with retries (tenacity), token usage, a price table and
a cost limit checked before every call."""

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

__all__ = [
    "AnthropicClient", "ChatClient", "ClientOptions", "ModelAPIError", "ModelAuthError",
    "ModelConfigError", "ModelConnectionError", "ModelError", "ModelRateLimitError",
    "ModelRequestError", "ModelResponseError", "ModelServerError", "ModelTimeoutError",
    "OpenAIChatClient", "OpenAIClient", "Price", "PriceTable", "Secret", "estimate_tokens",
    "parse_retry_after",
]
