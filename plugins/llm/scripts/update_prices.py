"""Regenerate ``rgym_llm/prices.json`` from the ``genai-prices`` package's price map.

A maintainer's tool, never run by rgym itself (rgym reads the JSON file and makes
no request for prices).  Install the package into a scratch environment, then::

    pip install genai-prices==0.2.3
    python plugins/llm/scripts/update_prices.py > plugins/llm/rgym_llm/prices.json

Every entry keeps its provider (``source``), the day it was read (``date``) and,
where the package lists exact spellings other than the id, those (``aliases``).
A long-context tier is kept as a ``note``: the file's price is the base rate.
Time-of-day discounts are ignored (the standard rate is kept), and of prices that
change on a date the one in force on the day of reading is kept.  Entries written
by hand (with a ``source`` other than ``genai-prices ...``) are carried over from
the current file unless the package now lists the same name.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from decimal import Decimal
from importlib import metadata
from pathlib import Path
from typing import Any

#: Providers taken whole: the first-party APIs, then hosts of open models.
PROVIDERS = ("openai", "anthropic", "google", "deepseek", "mistral", "x-ai", "moonshotai", "zai",
             "groq", "together", "openrouter")
#: Of OpenRouter's many listings, the vendors rgym users run.
OPENROUTER_VENDORS = ("anthropic/", "openai/", "google/", "meta-llama/", "deepseek/", "mistralai/",
                      "x-ai/", "qwen/", "moonshotai/", "z-ai/", "nousresearch/", "microsoft/")
FIRST_PARTY = {"openai", "anthropic", "google", "deepseek", "mistral", "x-ai", "moonshotai", "zai"}
CURRENT = Path(__file__).resolve().parents[1] / "rgym_llm" / "prices.json"


def _num(value: Any) -> tuple[float | None, str | None]:
    """A rate as a float, and a note when it is tiered (the base rate is kept)."""
    if value is None:
        return None, None
    if isinstance(value, Decimal | int | float):
        return float(value), None
    base = getattr(value, "base", None)
    tiers = getattr(value, "tiers", None) or []
    note = ", ".join(f"{float(t.price):g} above {t.start} prompt tokens" for t in tiers)
    return float(base if base is not None else 0.0), note or None


def _in_force(prices: Any, today: dt.date) -> Any:
    """The ModelPrice in force today: the plain one, or of a list the latest started."""
    if not isinstance(prices, list):
        return prices
    chosen, started = None, dt.date.min
    for conditional in prices:
        constraint = conditional.constraint
        start = getattr(constraint, "start_date", None)
        if constraint is None and chosen is None:
            chosen = conditional.prices
        elif start is not None and started <= start <= today:
            chosen, started = conditional.prices, start
    return chosen


def _aliases(model: Any) -> list[str]:
    match = model.match
    clauses = getattr(match, "or_", None) or [match]
    names = [getattr(c, "equals", None) for c in clauses]
    return sorted({n for n in names if n and n != model.id})


def build(today: dt.date) -> dict[str, Any]:
    from genai_prices.data import providers

    version = metadata.version("genai-prices")
    source = f"genai-prices {version}"
    models: dict[str, Any] = {}
    pages: dict[str, str] = {}
    for provider in providers:
        if provider.id not in PROVIDERS:
            continue
        pages[provider.id] = ", ".join(provider.pricing_urls or [])
        for model in provider.models:
            if provider.id == "openrouter" and (not model.id.startswith(OPENROUTER_VENDORS)
                                                or model.id.endswith(":batch")):
                continue
            if provider.id == "google" and not model.id.startswith(("gemini", "gemma")):
                continue  # Google's hosting of other vendors' models
            price = _in_force(model.prices, today)
            if price is None:
                continue
            rates: dict[str, Any] = {}
            notes = []
            for ours, theirs in (("input", "input_mtok"), ("output", "output_mtok"),
                                 ("cache_read", "cache_read_mtok"), ("cache_write", "cache_write_mtok")):
                value, note = _num(getattr(price, theirs, None))
                if value is not None:
                    rates[ours] = value
                if note:
                    notes.append(f"{ours} {note}")
            if "input" not in rates or "output" not in rates:
                continue  # embeddings, images, audio: not chat
            entry: dict[str, Any] = {**rates, "source": f"{source} ({provider.id})",
                                     "date": today.isoformat()}
            aliases = _aliases(model)
            if aliases:
                entry["aliases"] = aliases
            if notes:
                entry["note"] = "tiered: " + "; ".join(notes)
            models[f"{provider.id}/{model.id}"] = entry
    return {"source": source, "pages": pages, "models": models}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--date", type=dt.date.fromisoformat, default=dt.date.today(),
                        help="the day of reading (default: today)")
    args = parser.parse_args(argv)
    built = build(args.date)
    current = json.loads(CURRENT.read_text(encoding="utf-8")) if CURRENT.exists() else {}
    kept = {name: entry for name, entry in (current.get("models") or {}).items()
            if isinstance(entry, dict) and entry.get("source")
            and not str(entry["source"]).startswith("genai-prices") and name not in built["models"]}
    out = {
        "_about": ("USD per million tokens (input, output; optional cache_read, cache_write) per "
                   "model, named provider/model as the provider spells it.  Lookup normalises "
                   "case, dots and underscores (claude-sonnet-4.5 = claude-sonnet-4-5), dated "
                   "snapshots (-20241022, -2024-08-06, @20241022) and -latest, and tries the "
                   "name without its vendor prefix; see rgym_llm/prices.py.  Extend or override "
                   "with a YAML/JSON file named by RGYM_PRICES, or rgym run --price MODEL=IN,OUT."),
        "_source": (f"Generated by plugins/llm/scripts/update_prices.py from the price map of the "
                    f"Python package {built['source']} (pydantic/genai-prices, MIT licence), read "
                    f"on {args.date.isoformat()}; that package takes each rate from the provider's "
                    "pricing page listed in _pages.  Entries whose source is not genai-prices were "
                    "added by hand and say where they come from.  No price is fetched at run time."),
        "_pages": built["pages"],
        "models": {**built["models"], **kept},
    }
    sys.stdout.write(dumps(out))
    return 0


def dumps(data: dict[str, Any]) -> str:
    """The file's JSON: one line per model, so that a price change is a one-line diff."""
    lines = ["{"]
    for key, value in data.items():
        if key != "models":
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},")
    lines.append('  "models": {')
    rows = [f"    {json.dumps(name)}: {json.dumps(entry, ensure_ascii=False)}"
            for name, entry in data["models"].items()]
    lines.append(",\n".join(rows))
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
