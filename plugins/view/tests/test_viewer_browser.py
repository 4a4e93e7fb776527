"""`rgym view` opened in headless Chromium: what a person sees and does.

Every test drives the real page (no grepping of the HTML): the run list with
each run's score, filtering and sorting, a run's steps with their command,
output and validation score, folding of long outputs, lazy rendering of a long
trajectory, and `--serve` refreshing while a run is live.  Screenshots go to
each test's tmp dir."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from conftest import make_run, rgym
from rgym_core.records import Action, Observation, Step
from rgym_core.rundir import TrajectoryWriter
from rgym_core.runs import summarize


def wait(driver: Any, condition: Any, timeout: float = 20) -> Any:
    """Wait until ``condition(driver)`` is truthy (a page that reloads meanwhile is asked again)."""
    return WebDriverWait(driver, timeout, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
                         ).until(condition)


def visible_rows(driver: Any) -> list[Any]:
    return [r for r in driver.find_elements(By.CSS_SELECTOR, "tr.run-row") if r.is_displayed()]


def open_page(driver: Any, url: str) -> None:
    driver.get(url)
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#run-count"))


def open_run(driver: Any, predicate: Any) -> None:
    for row in visible_rows(driver):
        if predicate(row):
            row.click()
            wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#steps .step"))
            return
    raise AssertionError("no such run in the list")


def test_the_run_list_shows_every_run_with_its_score_and_a_run_shows_its_steps(
        browser: Any, runs_folder: Path, demo_runs: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "view.html"
    proc = rgym("view", str(runs_folder), "-o", str(page), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    open_page(browser, page.as_uri())
    browser.save_screenshot(str(tmp_path / "run-list.png"))
    rows = visible_rows(browser)
    assert len(rows) == len(demo_runs) == 4
    assert browser.find_element(By.ID, "run-count").text == "4 of 4 runs"
    # every run's final score, as rgym computed it, is on screen
    shown = {r.get_attribute("title"): r.find_element(By.CSS_SELECTOR, ".score-cell").text for r in rows}
    for name, run_dir in demo_runs.items():
        summary = summarize(run_dir)
        cell = next(v for k, v in shown.items() if k.endswith(run_dir.name))
        assert summary.score is not None
        assert f"{summary.score:.4g}" in cell, (name, cell)
        assert "base" in cell

    # filtering: the text box and the solver menu narrow the list
    box = browser.find_element(By.ID, "filter-text")
    box.send_keys("react")
    wait(browser, lambda d: len(visible_rows(d)) == 1)
    assert "react" in visible_rows(browser)[0].text
    box.clear()
    box.send_keys(" ")  # an input event after clear()
    wait(browser, lambda d: len(visible_rows(d)) == 4)
    # sorting: by steps, most first, then fewest first
    header = browser.find_element(By.CSS_SELECTOR, 'th[data-key="steps"]')
    header.click()
    steps = [int(r.find_element(By.CSS_SELECTOR, ".steps").text) for r in visible_rows(browser)]
    assert steps == sorted(steps, reverse=True)
    header.click()
    steps = [int(r.find_element(By.CSS_SELECTOR, ".steps").text) for r in visible_rows(browser)]
    assert steps == sorted(steps)

    # clicking the honest run shows its steps: the command, its output, the validation score
    open_run(browser, lambda r: r.get_attribute("title").endswith(demo_runs["honest"].name))
    browser.save_screenshot(str(tmp_path / "run.png"))
    step_cards = browser.find_elements(By.CSS_SELECTOR, "#steps .step")
    assert len(step_cards) == 3
    first = step_cards[0]
    assert first.find_element(By.CSS_SELECTOR, "pre.action").text == "python baseline.py"
    assert "Run the baseline first." in first.find_element(By.CSS_SELECTOR, ".thought").text
    assert "submission.csv" in first.find_element(By.CSS_SELECTOR, "pre.output").text
    validation = step_cards[1].find_element(By.CSS_SELECTOR, ".validation")
    assert validation.text.startswith("validation: r2 = 0.872")
    # the gradings card and the final result
    assert "0.872" in browser.find_element(By.ID, "validations").text
    assert "submitted" in browser.find_element(By.ID, "final-result").text
    # a grading's step link scrolls to the step
    browser.find_element(By.CSS_SELECTOR, "#validations .step-link").click()
    wait(browser, lambda d: "target" in d.find_element(By.ID, "step-2").get_attribute("class"))
    # the command is highlighted (a coloured program name, not plain text)
    assert first.find_elements(By.CSS_SELECTOR, "pre.action .hl-b")
    # back to the list
    browser.find_element(By.ID, "back").click()
    wait(browser, lambda d: len(visible_rows(d)) == 4)


def test_long_outputs_fold_and_unfold_and_model_calls_show_tokens(
        browser: Any, runs_folder: Path, demo_runs: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "view.html"
    assert rgym("view", str(demo_runs["react"]), "-o", str(page), cwd=tmp_path).returncode == 0
    open_page(browser, page.as_uri())
    open_run(browser, lambda r: True)
    first = browser.find_element(By.ID, "step-1")
    assert first.find_element(By.CSS_SELECTOR, "pre.action").text == "seq 1 400"
    out = first.find_element(By.CSS_SELECTOR, "pre.output")
    assert "folded" in out.get_attribute("class")
    assert "400" in out.text and "200\n" not in out.text  # head and tail shown, the middle folded
    note = out.find_element(By.CSS_SELECTOR, ".fold-note")
    assert "400 lines" in note.text
    browser.save_screenshot(str(tmp_path / "folded.png"))
    note.find_element(By.CSS_SELECTOR, "button.unfold").click()
    out = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#step-1 pre.output.unfolded"))
    lines = out.text.split("\n")
    assert lines[0] == "1" and lines[199] == "200" and lines[-1] == "400"
    # the model call of a step: tokens and latency
    calls = browser.find_element(By.CSS_SELECTOR, "#step-1 details.calls summary")
    assert "model call" in calls.text and "in /" in calls.text and " s" in calls.text
    # the budget card counts the model calls and tokens
    budget = browser.find_element(By.ID, "budget").text
    assert "model calls" in budget and "tokens" in budget
    # the trajectory's own filter: only gradings, then a text search
    browser.find_element(By.ID, "step-vals").click()
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#steps .step")) == 2)
    browser.find_element(By.ID, "step-vals").click()
    browser.find_element(By.ID, "step-filter").send_keys("baseline.py")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#steps .step")) == 1)


def test_a_20000_step_trajectory_opens_scrolls_lazily_and_jumps_to_a_step(browser: Any, tmp_path: Path) -> None:
    n = 20_000
    steps = [{"tool": "bash", "args": {"command": f"python train.py --lr {i}"},
              "output": f"epoch {i}: loss {1 / (i + 1):.5f}\n" * 3, "exit_code": 0, "tokens": (100, 10)}
             for i in range(n)]
    run = make_run(tmp_path / "runs" / "long", steps, final={"accuracy": 0.9},
                   budget={"max_steps": n, "time_limit_s": 86_400.0, "action_timeout_s": 60.0,
                           "cost_limit_usd": None, "token_limit": None},
                   gradings=[{"step": n, "kind": "submit", "scores": {"accuracy": 0.9}}])
    page = tmp_path / "view.html"
    assert rgym("view", str(run), "-o", str(page), cwd=tmp_path).returncode == 0
    open_page(browser, page.as_uri())
    started = time.monotonic()
    open_run(browser, lambda r: True)
    opened = time.monotonic() - started
    assert browser.find_element(By.ID, "step-count").text == f"{n} steps"

    def rendered(d: Any) -> int:
        return len(d.find_elements(By.CSS_SELECTOR, "#steps .step"))

    assert 0 < rendered(browser) <= 300, rendered(browser)  # only the blocks near the screen
    # scrolling down through the page renders the steps that come into view, and only those
    height = browser.execute_script("return document.body.scrollHeight")
    for fraction in (0.25, 0.5, 0.75):
        browser.execute_script("window.scrollTo(0, arguments[0])", int(height * fraction))
        wait(browser, lambda d: d.execute_script(
            "var r = document.elementFromPoint(700, 500); var s = r && r.closest('.step');"
            "return s ? s.id : null;"))
        shown = browser.execute_script(
            "var s = document.elementFromPoint(700, 500).closest('.step'); return +s.id.slice(5);")
        assert n * fraction * 0.5 < shown < n * min(1.0, fraction * 1.5), (fraction, shown)
    browser.save_screenshot(str(tmp_path / "long-scrolled.png"))
    assert rendered(browser) < n / 10
    # jumping to a step renders its block and marks it
    browser.find_element(By.ID, "step-goto").send_keys("12500\n")
    target = wait(browser, lambda d: d.find_element(By.ID, "step-12500"))
    assert "target" in target.get_attribute("class")
    assert "--lr 12499" in target.find_element(By.CSS_SELECTOR, "pre.action").text
    assert rendered(browser) < n / 10
    # scrolling back renders what comes into view
    browser.execute_script("window.scrollTo(0, 0)")
    wait(browser, lambda d: d.find_element(By.ID, "step-1").is_displayed())
    browser.save_screenshot(str(tmp_path / "long.png"))
    assert opened < 30, opened


def test_filters_by_status_and_flagged_runs(browser: Any, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ok = [{"tool": "bash", "args": {"command": "ls"}, "output": "a\n", "exit_code": 0}]
    make_run(runs / "good", ok, final={"accuracy": 0.8}, gradings=[{"step": 1, "kind": "submit",
                                                                     "scores": {"accuracy": 0.8}}])
    make_run(runs / "broken", ok, status="evaluation_error", final=None,
             gradings=[{"step": 1, "kind": "submit", "valid": False, "error": "bad file"}])
    flag = {"integrity": {"flagged": True, "counts": {"error": 1}, "kinds": ["provenance"],
                          "findings": [{"kind": "provenance", "severity": "error", "steps": [1],
                                        "message": "results.txt was written by echo"}]}}
    make_run(runs / "forged", ok, final={"accuracy": 0.99}, extras=flag,
             gradings=[{"step": 1, "kind": "submit", "scores": {"accuracy": 0.99}}])
    make_run(runs / "killed", ok, status=None)
    page = tmp_path / "view.html"
    assert rgym("view", str(runs), "-o", str(page), cwd=tmp_path).returncode == 0
    open_page(browser, page.as_uri())
    assert len(visible_rows(browser)) == 4
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, "filter-status")).select_by_value("evaluation_error")
    wait(browser, lambda d: len(visible_rows(d)) == 1)
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("")
    browser.find_element(By.ID, "filter-flagged").click()
    wait(browser, lambda d: len(visible_rows(d)) == 1)
    row = visible_rows(browser)[0]
    assert "flagged" in row.find_element(By.CSS_SELECTOR, ".integrity").text
    row.click()
    card = wait(browser, lambda d: d.find_element(By.ID, "integrity"))
    assert "results.txt was written by echo" in card.text
    browser.find_element(By.ID, "back").click()
    wait(browser, lambda d: d.find_elements(By.ID, "filter-flagged"))
    browser.find_element(By.ID, "filter-flagged").click()
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("incomplete")
    wait(browser, lambda d: len(visible_rows(d)) == 1)
    browser.save_screenshot(str(tmp_path / "filtered.png"))


def test_serve_refreshes_the_page_while_a_run_is_live(browser: Any, tmp_path: Path) -> None:
    from rgym_view.serve import ViewerServer

    runs = tmp_path / "runs"
    run = make_run(runs / "live", [{"tool": "bash", "args": {"command": "echo 1"}, "output": "1\n",
                                    "exit_code": 0}], status=None, live=True)
    from rgym_view.html import write_viewer

    server = ViewerServer([runs], tmp_path / "live.html", poll_s=0.2,
                          build=lambda: write_viewer([runs], tmp_path / "live.html", live=True))
    with pytest.raises(ValueError):
        ViewerServer([runs], tmp_path / "x.html", host="0.0.0.0")
    server.start()
    try:
        assert server.url.startswith("http://127.0.0.1:")
        open_page(browser, server.url)
        assert browser.find_element(By.ID, "live").text == "● live"
        row = visible_rows(browser)[0]
        assert row.find_element(By.CSS_SELECTOR, ".steps").text == "1"
        assert "running" in row.find_element(By.CSS_SELECTOR, ".status").text
        with TrajectoryWriter(run) as writer:
            writer.step(Step(index=2, action=Action.bash("echo 2"), observation=Observation(output="2\n"),
                             started_at=time.time(), duration_s=0.1, elapsed_s=2.0))
        wait(browser, lambda d: [r.find_element(By.CSS_SELECTOR, ".steps").text
                                 for r in visible_rows(d)] == ["2"], timeout=30)
    finally:
        server.stop()


def test_rgym_view_serve_follows_a_live_run_in_its_trajectory(browser: Any, tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    runs = tmp_path / "runs"
    run = make_run(runs / "live", [{"tool": "bash", "args": {"command": "echo 1"}, "output": "1\n",
                                    "exit_code": 0}], status=None, live=True)
    exe = Path(sys.executable).with_name("rgym")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "rgym_core.cli"]
    proc = subprocess.Popen([*command, "view", str(runs), "--serve", "-o", str(tmp_path / "page.html")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert "serving it on http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() else "")
        url = line.split("serving it on ", 1)[1].split()[0]
        browser.get(url + "#run=0")  # a run's address opens the run
        wait(browser, lambda d: d.find_element(By.ID, "step-1"))
        assert browser.find_element(By.ID, "live").text == "● live"
        with TrajectoryWriter(run) as writer:
            writer.step(Step(index=2, action=Action.bash("python train.py"),
                             observation=Observation(output="epoch 1: loss 0.5\n", exit_code=0),
                             started_at=time.time(), duration_s=0.1, elapsed_s=2.0))
        # the page reloads itself, staying on the run, and shows the new step
        card = wait(browser, lambda d: d.find_element(By.ID, "step-2"), timeout=30)
        assert card.find_element(By.CSS_SELECTOR, "pre.action").text == "python train.py"
        assert browser.find_element(By.ID, "step-count").text == "2 steps"
        browser.save_screenshot(str(tmp_path / "live-run.png"))
        assert json.loads(json.dumps(proc.poll())) is None  # still serving
    finally:
        proc.terminate()
        proc.wait(timeout=30)


HOSTILE = ('</script><script>window.__pwned = "script"</script>'
           '<img src=x onerror="window.__pwned = \'img\'"><b id="injected">bold</b>')


def test_agent_written_html_is_shown_as_text_never_run(browser: Any, tmp_path: Path) -> None:
    """Outputs, thoughts, commands, tool arguments, names and findings are the agent's
    (or a task's) text: the page shows them literally and runs none of it."""
    runs = tmp_path / "runs"
    steps = [{"tool": "bash", "args": {"command": f"echo '{HOSTILE}'"}, "output": HOSTILE + "\n",
              "thought": HOSTILE, "exit_code": 0},
             {"tool": "edit", "args": {"path": "x.py", "text": HOSTILE + "\n" + HOSTILE, "note": HOSTILE},
              "output": HOSTILE, "error": True, "info": {"applied": False}}]
    flag = {"integrity": {"flagged": True, "counts": {"error": 1}, "kinds": [HOSTILE],
                          "findings": [{"kind": HOSTILE, "severity": "error", "steps": [1], "message": HOSTILE}]}}
    for compress in (True, False):
        make_run(runs / f"hostile-{compress}", steps, task=f"evil/{HOSTILE}", agent=HOSTILE, model=HOSTILE,
                 final={"accuracy": 0.6}, extras=flag,
                 gradings=[{"step": 2, "kind": "submit", "valid": False, "error": HOSTILE}])
        page = tmp_path / f"view-{compress}.html"
        args = ["view", str(runs / f"hostile-{compress}"), "-o", str(page), "--title", HOSTILE]
        assert rgym(*args, *([] if compress else ["--no-compress"]), cwd=tmp_path).returncode == 0
        open_page(browser, page.as_uri())
        row = visible_rows(browser)[0]
        assert HOSTILE in row.find_element(By.CSS_SELECTOR, ".agent").text
        row.click()
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#steps .step"))
        first = browser.find_element(By.ID, "step-1")
        assert first.find_element(By.CSS_SELECTOR, "pre.output").text.strip() == HOSTILE
        assert HOSTILE in first.find_element(By.CSS_SELECTOR, ".thought").text
        assert HOSTILE in first.find_element(By.CSS_SELECTOR, "pre.action").text
        assert HOSTILE in browser.find_element(By.ID, "step-2").text
        assert HOSTILE in browser.find_element(By.ID, "integrity").text
        assert HOSTILE in browser.title
        assert browser.execute_script("return window.__pwned") is None
        assert not browser.find_elements(By.ID, "injected")
    browser.save_screenshot(str(tmp_path / "hostile.png"))


def test_after_a_sweep_the_viewer_shows_every_cell_with_its_score(browser: Any, tmp_path: Path) -> None:
    """`rgym sweep` (2 agents x 2 seeds on rgym/demo, the mock model), then `rgym view SWEEP_DIR`."""
    sweep = tmp_path / "sweep"
    proc = rgym("sweep", "rgym/demo", "-a", "scripted", "-a", "react", "-m", "mock/baseline", "--seeds", "1-2",
                "-o", str(sweep), "-j", "2", cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = tmp_path / "sweep.html"
    assert rgym("view", str(sweep), "-o", str(page), cwd=tmp_path).returncode == 0
    open_page(browser, page.as_uri())
    rows = visible_rows(browser)
    assert len(rows) == 4
    cells = sorted((r.get_attribute("title"), r.find_element(By.CSS_SELECTOR, ".score-cell").text) for r in rows)
    assert [c[0] for c in cells] == ["rgym__demo/react__mock_baseline/seed-1", "rgym__demo/react__mock_baseline/seed-2",
                                     "rgym__demo/scripted/seed-1", "rgym__demo/scripted/seed-2"]
    for title, score in cells:
        summary = summarize(sweep / title)
        assert summary.score is not None and f"{summary.score:.4g}" in score, (title, score)
    assert sorted(r.find_elements(By.CSS_SELECTOR, "td")[3].text for r in rows) == ["1", "1", "2", "2"]
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, "filter-solver")).select_by_visible_text("rgym/scripted")
    wait(browser, lambda d: len(visible_rows(d)) == 2)
    browser.save_screenshot(str(tmp_path / "sweep.png"))
    open_run(browser, lambda r: r.get_attribute("title").endswith("scripted/seed-1"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#steps .step")) == summarize(
        sweep / "rgym__demo/scripted/seed-1").steps


def test_the_viewer_shows_and_filters_the_failure_modes_rgym_analyze_finds(
        browser: Any, runs_folder: Path, demo_runs: dict[str, Path], tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import Select

    page = tmp_path / "view.html"
    assert rgym("view", str(runs_folder), "-o", str(page), cwd=tmp_path).returncode == 0
    open_page(browser, page.as_uri())
    modes = {r.get_attribute("title").rsplit("/", 1)[-1]: r.find_element(By.CSS_SELECTOR, ".modes").text
             for r in visible_rows(browser)}
    assert modes[demo_runs["loop"].name] == "debug loop"
    assert modes[demo_runs["premature"].name] == "premature submit"
    assert modes[demo_runs["honest"].name] == "" and modes[demo_runs["react"].name] == ""
    Select(browser.find_element(By.ID, "filter-mode")).select_by_value("debug_loop")
    wait(browser, lambda d: len(visible_rows(d)) == 1)
    open_run(browser, lambda r: True)
    card = browser.find_element(By.ID, "failure-modes")
    assert "debug loop" in card.text and "python train.py --epochs 3" in card.text
    browser.save_screenshot(str(tmp_path / "failure-modes.png"))
    card.find_elements(By.CSS_SELECTOR, ".step-link")[4].click()  # the fifth failing attempt
    wait(browser, lambda d: "target" in d.find_element(By.ID, "step-5").get_attribute("class"))
    assert "err" in browser.find_element(By.ID, "step-5").get_attribute("class")  # a failed step
    # an honest run: the card says none were found
    browser.find_element(By.ID, "back").click()
    wait(browser, lambda d: d.find_elements(By.ID, "filter-mode"))
    Select(browser.find_element(By.ID, "filter-mode")).select_by_value("")
    wait(browser, lambda d: len(visible_rows(d)) == 4)
    open_run(browser, lambda r: r.get_attribute("title").endswith(demo_runs["honest"].name))
    card = browser.find_element(By.ID, "failure-modes")
    assert "warning" not in card.text
