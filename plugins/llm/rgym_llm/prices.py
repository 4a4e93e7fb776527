"""The price table: USD per million input and output tokens, per model.

The table shipped in ``prices.json`` is extended (and overridden) by a YAML or
JSON file named by ``RGYM_PRICES`` or by a client's ``prices`` option::

    # prices.yaml, USD per million tokens
    my-finetune:
      input: 0.50
      output: 1.50
    qwen2.5-7b-instruct: {input: 0, output: 0}   # a local vLLM is free

A model is looked up by its exact name, then by the part after the last ``/``
(OpenRouter's ``openai/gpt-4o``), then by the longest listed name it starts with
followed by ``-`` (dated versions such as ``gpt-4o-2024-08-06``).
"""

from __future__ import annotations

import json
import os
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from attrs import define

from rgym_core.serialization import parse_yaml
from rgym_llm.errors import ModelConfigError

PRICES_ENV = "RGYM_PRICES"


@define(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, *, cache_read_tokens: int = 0,
             cache_write_tokens: int = 0) -> float:
        """Cost in USD; ``input_tokens`` excludes cached tokens, which are priced apart."""
        total = input_tokens * self.input + output_tokens * self.output
        total += cache_read_tokens * (self.input if self.cache_read is None else self.cache_read)
        total += cache_write_tokens * (self.input if self.cache_write is None else self.cache_write)
        return total / 1_000_000


def _parse_table(data: Any, source: str) -> dict[str, Price]:
    if isinstance(data, dict) and isinstance(data.get("models"), dict):
        data = data["models"]
    if not isinstance(data, dict):
        raise ModelConfigError(f"{source}: expected a mapping of model name to "
                               "{input: USD per Mtok, output: USD per Mtok}")
    table: dict[str, Price] = {}
    for name, entry in data.items():
        if str(name).startswith("_"):
            continue
        if not isinstance(entry, dict) or "input" not in entry or "output" not in entry:
            raise ModelConfigError(f"{source}: {name}: needs 'input' and 'output' "
                                   "(USD per million tokens), e.g. {input: 0.5, output: 1.5}")
        try:
            table[str(name)] = Price(**{k: float(v) for k, v in entry.items()
                                        if k in ("input", "output", "cache_read", "cache_write")})
        except (TypeError, ValueError):
            raise ModelConfigError(f"{source}: {name}: prices must be numbers, got {entry!r}") from None
        unknown = sorted(set(entry) - {"input", "output", "cache_read", "cache_write"})
        if unknown:
            raise ModelConfigError(f"{source}: {name}: unknown field(s) {', '.join(unknown)}; "
                                   "allowed: input, output, cache_read, cache_write")
    return table


def load_price_file(path: str | Path) -> dict[str, Price]:
    """Read a user price file (YAML or JSON)."""
    path = Path(path)
    try:
        data = parse_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelConfigError(f"price file {path} does not exist (set by {PRICES_ENV} or the "
                               "'prices' option)") from None
    except yaml.YAMLError as exc:
        raise ModelConfigError(f"{path}: not valid YAML/JSON: {str(exc).splitlines()[0]}") from None
    return _parse_table(data or {}, str(path))


def builtin_prices() -> dict[str, Price]:
    text = resources.files("rgym_llm").joinpath("prices.json").read_text(encoding="utf-8")
    return _parse_table(json.loads(text), "rgym_llm/prices.json")


class PriceTable:
    """Prices by model name; see the module docstring for the lookup order."""

    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        self.prices: dict[str, Price] = dict(prices or {})

    @classmethod
    def load(cls, extra: str | Path | None = None) -> PriceTable:
        """The shipped table, then ``$RGYM_PRICES``, then ``extra`` (later wins)."""
        table = builtin_prices()
        env_file = os.environ.get(PRICES_ENV)
        if env_file:
            table.update(load_price_file(env_file))
        if extra:
            table.update(load_price_file(extra))
        return cls(table)

    def lookup(self, model: str) -> Price | None:
        if model in self.prices:
            return self.prices[model]
        short = model.rsplit("/", 1)[-1]
        if short in self.prices:
            return self.prices[short]
        best = ""
        for name in self.prices:
            if short.startswith(name + "-") and len(name) > len(best):
                best = name
        return self.prices[best] if best else None


_warned: set[str] = set()


def warn_unpriced(provider: str, model: str) -> None:
    """Warn once per model that its cost is counted as $0."""
    if model in _warned:
        return
    _warned.add(model)
    warnings.warn(f"{provider}: no price for model '{model}'; its cost is counted as $0. Add it "
                  f"to a prices file (YAML: '{model}: {{input: USD/Mtok, output: USD/Mtok}}') and "
                  f"set {PRICES_ENV}=PATH", UserWarning, stacklevel=3)
