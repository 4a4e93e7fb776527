"""rgym plugin ``llm``: registers the model providers ``llm/openai-compatible``,
``llm/openai``, ``llm/anthropic``, ``llm/vllm``, ``llm/ollama``, ``llm/openrouter``
and ``llm/litellm``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rgym_core import hookimpl

if TYPE_CHECKING:
    from rgym_core import ModelProviderSpec


@hookimpl
def rgym_register_model_providers() -> list[ModelProviderSpec]:
    from rgym_core import ModelProviderSpec
    from rgym_llm.providers import PROVIDERS

    return [ModelProviderSpec(name=f"llm/{p.name}", factory=p.factory(), description=p.description)
            for p in PROVIDERS]
