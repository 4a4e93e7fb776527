"""A model call that succeeded after retries leaves a trace the user can see.

The fake LLM server answers 429, then 503, then the reply, over real loopback
HTTP; ``rgym run`` (the CLI, in a subprocess) records the failed attempts in the
trajectory and counts them in ``result.json``; ``rgym view`` shows them in the
step view of headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rgym_llm.testing import FakeLLMServer, Reply
from selenium.webdriver.common.by import By
from test_viewer_browser import open_page, open_run, wait

from conftest import rgym


def fence(command: str) -> str:
    return f"DISCUSSION\nNext.\n```\n{command}\n```"


def run_with_retries(tmp_path: Path) -> dict[str, Any]:
    script = [Reply(status=429, error="slow down", headers={"Retry-After": "0"}),
              Reply(status=503, error="overloaded", headers={"retry-after-ms": "20"}),
              Reply(text=fence("python baseline.py")), Reply(text=fence("submit"))]
    with FakeLLMServer(script) as server:
        proc = rgym("run", "rgym/demo", "--agent", "react", "--model", "openai-compatible/gpt-4o",
                    "--base-url", server.base_url, "--runs-dir", str(tmp_path / "runs"), "--json",
                    cwd=tmp_path)
        assert len(server.requests) == 4  # two failed attempts, then two answered calls
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_retries_are_recorded_counted_and_shown(browser: Any, tmp_path: Path) -> None:
    result = run_with_retries(tmp_path)
    assert result["model_retries"] == 2
    run_dir = Path(result["run_dir"])
    steps = [r["step"] for r in map(json.loads, (run_dir / "trajectory.jsonl").read_text().splitlines())
             if r["type"] == "step"]
    first, second = (s["action"] for s in steps)
    assert first["usage"]["retries"] == 2 and second["usage"]["retries"] == 0
    call = first["llm_calls"][0]
    assert call["attempts"] == 3
    assert [(r["attempt"], r["status"], r["error"]) for r in call["retries"]] == [
        (1, 429, "rate_limited"), (2, 503, "server_error")]
    assert [r["wait_s"] for r in call["retries"]] == [0.0, 0.02]  # as the server asked
    assert "attempts" not in second["llm_calls"][0]

    page = tmp_path / "view.html"
    assert rgym("view", str(run_dir), "-o", str(page), cwd=tmp_path).returncode == 0
    open_page(browser, page.as_uri())
    open_run(browser, lambda row: True)
    badge = browser.find_element(By.CSS_SELECTOR, "#step-1 .badge.retries")
    assert badge.text == "2 retries"
    assert not browser.find_elements(By.CSS_SELECTOR, "#step-2 .badge.retries")
    summary = browser.find_element(By.CSS_SELECTOR, "#step-1 details.calls summary")
    assert "2 failed attempts retried" in summary.text
    summary.click()
    line = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#step-1 .retries.small"))
    assert line.text == ("3 attempts: #1 HTTP 429 rate_limited, waited 0.00 s; "
                         "#2 HTTP 503 server_error, waited 0.02 s; #3 answered")
    assert "2 retried attempts" in browser.find_element(By.ID, "budget").text
    browser.save_screenshot(str(tmp_path / "retries.png"))
