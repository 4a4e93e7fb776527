"""``rgym sweep --price MODEL=IN,OUT``: ``rgym run``'s option, given to every cell.

A loopback model whose name is in no price table, with a cost limit: the sweep is
refused before any episode without ``--price`` and runs (its cost counted at that
price) with it; a malformed value is one error line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rgym_llm.testing import FakeLLMServer, Reply

from rgym_core.runner import RunConfig
from rgym_core.sweep.worker import job_payload
from rgym_core.testing import run_cli

MODEL = "house-model-not-priced"


def sweep(server: FakeLLMServer, sweep_dir: Path, *extra: str):  # type: ignore[no-untyped-def]
    return run_cli("sweep", "rgym/demo", "--agent", "react", "--model", f"openai-compatible/{MODEL}",
                   "--base-url", server.base_url, "--cost-limit", "2", "--seeds", "1", "-j", "1",
                   "-o", str(sweep_dir), "-q", *extra)


def test_an_unpriced_model_is_refused_without_price_and_runs_with_it(tmp_path: Path) -> None:
    reply = Reply(text="DISCUSSION\nDone.\n```\nsubmit\n```", input_tokens=1000, output_tokens=100)
    with FakeLLMServer([reply]) as server:
        refused = sweep(server, tmp_path / "refused")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"no price known for model '{MODEL}'" in refused.stderr and "--price" in refused.stderr
        assert server.requests == []
        ran = sweep(server, tmp_path / "priced", "--price", f"{MODEL}=1,2")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert len(server.requests) == 1
    results = [json.loads(p.read_text()) for p in (tmp_path / "priced").rglob("result.json")]
    assert len(results) == 1
    assert results[0]["end_reason"] == "submit"
    assert results[0]["cost_usd"] == pytest.approx(1000 * 1 / 1e6 + 100 * 2 / 1e6)


def test_a_malformed_price_is_one_error_line(tmp_path: Path) -> None:
    proc = run_cli("sweep", "rgym/demo", "--price", f"{MODEL}=1", "-o", str(tmp_path / "s"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: --price '{MODEL}=1': expected MODEL=IN,OUT in USD per million input and output "
        "tokens, e.g. --price gpt-4o=2.5,10 (0,0 for a free local model)"]
    assert not (tmp_path / "s").exists()


def test_the_price_travels_to_other_executors_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGYM_PRICE", f"{MODEL}=1,2")
    payload = job_payload(RunConfig(task="rgym/demo"), plugins=[], ship=True, cell="c")
    assert payload["env"] == {"RGYM_PRICE": f"{MODEL}=1,2"}
    json.dumps(payload)  # plain data, as Ray and Slurm send it
