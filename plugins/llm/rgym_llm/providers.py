"""The registered providers: which client, which default base URL, which key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import define

from rgym_llm.anthropic_messages import AnthropicClient
from rgym_llm.client import ChatClient, ClientOptions
from rgym_llm.openai_chat import OpenAIChatClient, OpenAIClient


@define(frozen=True)
class Provider:
    """A provider: its name, client class, default endpoint and key variables."""

    name: str
    client: type[ChatClient]
    description: str
    base_url: str | None = None
    key_envs: tuple[str, ...] = ()
    key_required: bool | None = None

    def factory(self) -> Callable[..., ChatClient]:
        """``factory(model, base_url=None, **options)`` as ``ModelProviderSpec`` wants."""

        def build(model: str, base_url: str | None = None, **options: Any) -> ChatClient:
            cls = self.client
            overrides: dict[str, Any] = {}
            if self.key_envs:
                overrides["key_envs"] = self.key_envs
            if self.base_url:
                overrides["default_base_url"] = self.base_url
            if self.key_required is not None:
                overrides["key_required"] = self.key_required
            if overrides:
                cls = type(f"{cls.__name__}[{self.name}]", (cls,), overrides)
            return cls(model, provider=self.name, base_url=base_url,
                       options=ClientOptions.from_options(self.name, options))

        build.__doc__ = self.description
        return build


PROVIDERS = [
    Provider("openai-compatible", OpenAIChatClient,
             "any OpenAI-compatible chat-completions server; --base-url http://HOST:PORT/v1 "
             "(key, if any: OPENAI_COMPATIBLE_API_KEY or OPENAI_API_KEY)",
             key_envs=("OPENAI_COMPATIBLE_API_KEY", "OPENAI_API_KEY")),
    Provider("openai", OpenAIClient, "the OpenAI API (OPENAI_API_KEY)"),
    Provider("anthropic", AnthropicClient, "the Anthropic Messages API (ANTHROPIC_API_KEY)"),
    Provider("vllm", OpenAIChatClient, "a vLLM server (default http://127.0.0.1:8000/v1; "
             "key, if started with --api-key: VLLM_API_KEY)",
             base_url="http://127.0.0.1:8000/v1", key_envs=("VLLM_API_KEY",)),
    Provider("ollama", OpenAIChatClient, "an Ollama server (default http://127.0.0.1:11434/v1)",
             base_url="http://127.0.0.1:11434/v1", key_envs=("OLLAMA_API_KEY",)),
    Provider("openrouter", OpenAIChatClient, "OpenRouter (OPENROUTER_API_KEY); models such as "
             "openrouter/anthropic/claude-sonnet-4.5", base_url="https://openrouter.ai/api/v1",
             key_envs=("OPENROUTER_API_KEY",), key_required=True),
    Provider("litellm", OpenAIChatClient, "a LiteLLM proxy (default http://127.0.0.1:4000/v1; "
             "key: LITELLM_API_KEY)", base_url="http://127.0.0.1:4000/v1",
             key_envs=("LITELLM_API_KEY",)),
]
