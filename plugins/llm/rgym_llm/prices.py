"""The price table: USD per million input and output tokens, per model.

``prices.json`` (shipped, generated from a maintained price map by
``plugins/llm/scripts/update_prices.py``; its ``_source`` says from which, and
each entry its provider and date) is overridden by, from weakest to strongest:
a YAML or JSON file named by ``RGYM_PRICES``, a client's ``prices`` option, and
``RGYM_PRICE`` (``MODEL=IN,OUT`` entries separated by ``;``, what
``rgym run --price MODEL=IN,OUT`` sets)::

    # prices.yaml, USD per million tokens
    my-finetune:
      input: 0.50
      output: 1.50
    qwen2.5-7b-instruct: {input: 0, output: 0}   # a local vLLM is free

A model is looked up in each table, strongest first, as ``provider/model``
(``openrouter/anthropic/claude-sonnet-4.5``: the router's own price), then as
``model``, then as its last part after ``/`` (``claude-sonnet-4.5``).  Names are
compared normalised (:func:`normalise`: case, ``.`` and ``_`` as ``-``); a name
not found is tried again without a bedrock ``-v1:0`` or an OpenRouter ``:beta``,
a dated snapshot (``-20241022``, ``-2024-08-06``, ``@20241022``) or ``-latest``,
then without a trailing ``-MMDD`` (``deepseek-r1-0528``).  A bare name gets the
vendor's own price before a host's (OpenRouter, Groq, Together), and so does a
model on a local server (``vllm/meta-llama/Llama-3.3-70B-Instruct``): pass
``--price MODEL=0,0`` for a free one.  An OpenRouter ``:free`` model costs 0.
Nothing is fetched at run time.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from attrs import define, field

from rgym_core import parse_yaml
from rgym_llm.errors import ModelConfigError

PRICES_ENV = "RGYM_PRICES"
#: ``MODEL=IN,OUT`` entries separated by ``;`` (USD per million tokens), over every table.
PRICE_ENV = "RGYM_PRICE"
_RATES = ("input", "output", "cache_read", "cache_write")
#: Fields an entry may carry besides its rates (ignored by the lookup, kept for people).
_META = ("source", "date", "aliases", "note")
#: Built-in providers whose prices are the model vendor's own (preferred for a bare name).
_FIRST_PARTY = ("openai/", "anthropic/", "google/", "deepseek/", "mistral/", "x-ai/",
                "moonshotai/", "zai/")


@define(frozen=True)
class Price:
    """USD per million tokens; ``source`` says where the figure comes from."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    source: str | None = field(default=None, eq=False)

    def cost(self, input_tokens: int, output_tokens: int, *, cache_read_tokens: int = 0,
             cache_write_tokens: int = 0) -> float:
        """Cost in USD; ``input_tokens`` excludes cached tokens, which are priced apart."""
        total = input_tokens * self.input + output_tokens * self.output
        total += cache_read_tokens * (self.input if self.cache_read is None else self.cache_read)
        total += cache_write_tokens * (self.input if self.cache_write is None else self.cache_write)
        return total / 1_000_000


def normalise(name: str) -> str:
    """A model name as the table compares it: lower case, ``.`` and ``_`` as ``-``,
    without rgym's ``llm/`` namespace (``Claude-Sonnet-4.5`` -> ``claude-sonnet-4-5``)."""
    out = name.strip().lower().replace("_", "-").replace(".", "-")
    return out[4:] if out.startswith("llm/") else out


_BEDROCK = re.compile(r"-v\d+:\d+$")
_SNAPSHOT = re.compile(r"(?:[-@](?:\d{8}|\d{4}-\d{2}-\d{2})|-latest)$")
_MMDD = re.compile(r"-\d{4}$")


def _candidates(name: str) -> Iterator[str]:
    """``name`` (normalised), then without a bedrock ``-v1:0`` or a ``:tag``, dated
    snapshots and ``-latest``, then without a trailing ``-MMDD``."""
    yield name
    stem = _BEDROCK.sub("", name)
    if stem == name and ":" in stem.rsplit("/", 1)[-1] and not stem.endswith(":free"):
        stem = stem.rsplit(":", 1)[0]
    if stem != name:
        yield stem
    while True:
        shorter = _SNAPSHOT.sub("", stem)
        if shorter == stem or not shorter:
            break
        stem = shorter
        yield stem
    shorter = _MMDD.sub("", stem)
    if shorter != stem and shorter:
        yield shorter


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
        unknown = sorted(set(entry) - set(_RATES) - set(_META))
        if unknown:
            raise ModelConfigError(f"{source}: {name}: unknown field(s) {', '.join(unknown)}; "
                                   f"allowed: {', '.join(_RATES + _META)}")
        try:
            rates = {k: float(v) for k, v in entry.items() if k in _RATES and v is not None}
            if any(v < 0 for v in rates.values()):
                raise ValueError
        except (TypeError, ValueError):
            raise ModelConfigError(f"{source}: {name}: prices must be numbers >= 0, got "
                                   f"{ {k: entry[k] for k in _RATES if k in entry} !r}") from None
        price = Price(**rates, source=str(entry.get("source") or source))
        table[str(name)] = price
        aliases = entry.get("aliases") or []
        if not isinstance(aliases, list):
            raise ModelConfigError(f"{source}: {name}: aliases must be a list of names")
        prefix = str(name).split("/", 1)[0] + "/" if "/" in str(name) else ""
        for alias in aliases:  # spellings of the same provider's model
            alias = str(alias)
            table.setdefault(alias if alias.startswith(prefix) else prefix + alias, price)
    return table


def parse_price_option(text: str, source: str = "--price") -> tuple[str, Price]:
    """``MODEL=IN,OUT`` (USD per million input and output tokens) -> (model, price);
    raises ModelConfigError with the expected form."""
    model, sep, rates = text.partition("=")
    parts = [p.strip() for p in rates.split(",")]
    try:
        if not sep or not model.strip() or len(parts) != 2:
            raise ValueError
        value_in, value_out = float(parts[0]), float(parts[1])
        if value_in < 0 or value_out < 0:
            raise ValueError
    except ValueError:
        raise ModelConfigError(f"{source} {text!r}: expected MODEL=IN,OUT in USD per million "
                               "input and output tokens, e.g. gpt-4o=2.5,10 (0,0 for a free "
                               "local model)") from None
    return model.strip(), Price(value_in, value_out, source=source)


def parse_price_env(text: str) -> dict[str, Price]:
    """The entries of ``RGYM_PRICE`` (``MODEL=IN,OUT;MODEL=IN,OUT``)."""
    table: dict[str, Price] = {}
    for item in text.split(";"):
        if item.strip():
            model, price = parse_price_option(item.strip(), PRICE_ENV)
            table[model] = price
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


class _Layer:
    """One table, indexed by normalised full name and by last name part; in the
    shipped table a bare name is first looked for among the vendors' own prices."""

    def __init__(self, prices: dict[str, Price], *, shipped: bool = False) -> None:
        self.full: dict[str, Price] = {}
        self.bare: dict[str, Price] = {}
        self.bare_hosted: dict[str, Price] = {}
        for name, price in prices.items():
            key = normalise(name)
            hosted = shipped and not key.startswith(_FIRST_PARTY)
            stem = _SNAPSHOT.sub("", key)  # claude-3-opus-latest is claude-3-opus too
            for spelling in dict.fromkeys((key, stem)):
                self.full.setdefault(spelling, price)
                (self.bare_hosted if hosted else self.bare).setdefault(spelling.rsplit("/", 1)[-1],
                                                                        price)

    def find(self, names: list[str], bare: str) -> Price | None:
        for name in names:
            for key in _candidates(name):
                if key in self.full:
                    return self.full[key]
        for index in (self.bare, self.bare_hosted):
            for key in _candidates(bare):
                if key in index:
                    return index[key]
        return None


class PriceTable:
    """Prices by model name; see the module docstring for the lookup order."""

    def __init__(self, prices: dict[str, Price] | None = None, *,
                 overrides: list[dict[str, Price]] | None = None) -> None:
        #: Every entry, the strongest table's winning (for listing).
        self.prices: dict[str, Price] = dict(prices or {})
        for table in reversed(overrides or []):
            self.prices.update(table)
        self._layers = [_Layer(t) for t in (overrides or [])] + [_Layer(dict(prices or {}), shipped=True)]

    @classmethod
    def load(cls, extra: str | Path | None = None) -> PriceTable:
        """The shipped table under ``$RGYM_PRICES``, ``extra`` and ``$RGYM_PRICE`` (later wins)."""
        overrides: list[dict[str, Price]] = []
        env_prices = os.environ.get(PRICE_ENV, "")
        if env_prices.strip():
            overrides.append(parse_price_env(env_prices))
        if extra:
            overrides.append(load_price_file(extra))
        env_file = os.environ.get(PRICES_ENV)
        if env_file:
            overrides.append(load_price_file(env_file))
        return cls(builtin_prices(), overrides=overrides)

    def lookup(self, model: str, provider: str | None = None) -> Price | None:
        """The price of ``model`` served by ``provider`` (``None`` when unknown)."""
        wanted = normalise(model)
        names = ([normalise(f"{provider}/{model}")] if provider else []) + [wanted]
        bare = wanted.rsplit("/", 1)[-1]
        for layer in self._layers:
            found = layer.find(names, bare)
            if found is not None:
                return found
        if wanted.endswith(":free") and (provider == "openrouter" or wanted.startswith("openrouter/")):
            return Price(0.0, 0.0, source="an OpenRouter ':free' model")
        return None


def unpriced_message(name: str, model: str, limit: float) -> str:
    """The one-line refusal of a cost limit on a model without a price."""
    return (f"{name}: no price known for model '{model}', so the ${limit:g} cost limit cannot be "
            f"enforced; pass --price {model}=IN,OUT (USD per million input and output tokens, "
            f"0,0 for a free local model), name a prices file in {PRICES_ENV}, or drop --cost-limit")


_warned: set[str] = set()


def warn_unpriced(provider: str, model: str) -> None:
    """Warn once per model that its cost is counted as $0."""
    if model in _warned:
        return
    _warned.add(model)
    warnings.warn(f"{provider}: no price for model '{model}'; its cost is counted as $0. Pass "
                  f"--price {model}=IN,OUT (USD per million tokens) or add it to a prices file "
                  f"named by {PRICES_ENV}", UserWarning, stacklevel=3)
