"""Diffs and plots in ``rgym view``: each edit's diff in its step, the final workspace
against the task's starter files, plots across runs on the list page, and a run
table that fits 1400 px.

Real episodes (``rgym run`` in a subprocess): ``rgym/demo`` with a scripted agent
that opens, edits and creates files through the ACI and leaves hostile names and a
binary file from a bash step, and ``mlgym/prisoners-dilemma`` whose scripted action
rewrites ``strategy.py`` from bash; ``rgym view`` in a subprocess; the page checked
in headless Chromium (the conftest's 1400 px window)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from rgym_view import diffs
from selenium.webdriver.common.by import By
from test_viewer_browser import open_page, open_run, wait

from conftest import rgym

EDIT_SCRIPT = [
    {"tool": "open", "args": {"path": "baseline.py"}},
    {"tool": "edit", "args": {"start_line": 5, "end_line": 5,
                              "replacement": "# edited <script>window.pwned=1</script>"}},
    {"tool": "create", "args": {"path": "notes.txt", "content": "hello\nworld\n"}},
    {"tool": "bash", "args": {"command": "python baseline.py && printf y > '..<img src=x onerror=window.pwned=2>'"
                                         " && head -c 3000 /dev/urandom > blob.bin && ln -s /etc/passwd link"}},
    {"tool": "validate"},
    {"tool": "submit"},
]


def _run(tmp: Path, runs: Path, *args: str) -> Path:
    proc = rgym("run", *args, "--runs-dir", str(runs), "--json", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    path = Path(json.loads(proc.stdout)["run_dir"])
    return path if path.is_absolute() else tmp / path


@pytest.fixture(scope="module")
def diff_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("diff-runs")
    runs = tmp / "runs"
    script = tmp / "edit.json"
    script.write_text(json.dumps(EDIT_SCRIPT))
    return {"edit": _run(tmp, runs, "rgym/demo", "--agent", "scripted", "--agent-option", f"script={script}"),
            "pd": _run(tmp, runs, "mlgym/prisoners-dilemma", "--agent", "scripted"),
            "plain": _run(tmp, runs, "rgym/demo", "--agent", "scripted", "--seed", "2"),
            "root": runs}


def _view(runs: Path, tmp_path: Path) -> Path:
    page = tmp_path / "view.html"
    proc = rgym("view", str(runs), "-o", str(page), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return page


def test_the_edit_records_its_diff_and_the_step_shows_it_escaped(
        browser: Any, diff_runs: dict[str, Path], tmp_path: Path) -> None:
    steps = [r["step"] for r in map(json.loads, (diff_runs["edit"] / "trajectory.jsonl").read_text().splitlines())
             if r["type"] == "step"]
    info = steps[1]["observation"]["info"]
    assert info["applied"] is True and info["path"] == "/workspace/baseline.py"
    assert "+# edited <script>window.pwned=1</script>" in info["diff"].splitlines()
    open_page(browser, _view(diff_runs["root"], tmp_path).as_uri())
    open_run(browser, lambda row: row.get_attribute("title").endswith(diff_runs["edit"].name))
    edit = browser.find_element(By.CSS_SELECTOR, "#step-2 .step-diff")
    assert "+# edited <script>window.pwned=1</script>" in edit.text.splitlines()
    assert edit.find_elements(By.CSS_SELECTOR, ".da") and edit.find_elements(By.CSS_SELECTOR, ".dd")
    created = browser.find_element(By.CSS_SELECTOR, "#step-3 .step-diff").text
    assert "+hello" in created and "+world" in created
    assert not browser.find_elements(By.CSS_SELECTOR, "#step-4 .step-diff")  # bash: no recorded edit
    # the validate step shows what changed in the graded files since the start
    snap = browser.find_element(By.CSS_SELECTOR, "#step-5 .snapshot-diff").text
    assert "baseline.py" in snap and "submission.csv" in snap
    # the final workspace against the starter: hostile name escaped, binary named only
    card = browser.find_element(By.ID, "workspace-diff")
    text = card.text
    assert "..<img src=x onerror=window.pwned=2>" in text
    assert "blob.bin" in text and "binary" in text
    assert "README.md" not in text  # unchanged starter file
    assert "changed" in text and "+# edited <script>window.pwned=1</script>" in text
    assert not browser.find_elements(By.CSS_SELECTOR, "#workspace-diff img, #steps img, script[src]")
    assert browser.execute_script("return window.pwned === undefined")
    browser.save_screenshot(str(tmp_path / "edit-run.png"))


def test_a_bash_rewrite_shows_in_the_final_workspace_diff(
        browser: Any, diff_runs: dict[str, Path], tmp_path: Path) -> None:
    open_page(browser, _view(diff_runs["root"], tmp_path).as_uri())
    open_run(browser, lambda row: "prisoners-dilemma" in row.text)
    card = wait(browser, lambda d: d.find_element(By.ID, "workspace-diff"))
    assert "starter files of mlgym/prisoners-dilemma" in card.text
    assert "strategy.py" in card.text and "evaluate.py" not in card.text
    assert "+    return 1" in card.text.splitlines()
    page = tmp_path / "lean.html"
    proc = rgym("view", str(diff_runs["root"]), "--no-diffs", "-o", str(page), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    open_page(browser, page.as_uri())
    open_run(browser, lambda row: "prisoners-dilemma" in row.text)
    assert not browser.find_elements(By.ID, "workspace-diff")
    assert not browser.find_elements(By.CSS_SELECTOR, ".snapshot-diff")


def test_the_list_page_plots_and_the_table_fits_1400px(
        browser: Any, diff_runs: dict[str, Path], tmp_path: Path) -> None:
    open_page(browser, _view(diff_runs["root"], tmp_path).as_uri())
    assert browser.execute_script("return window.innerWidth") == 1400
    strips = browser.find_elements(By.CSS_SELECTOR, "#plot-box .plot-score svg")
    assert len(strips) == 2  # one per task
    assert len(browser.find_elements(By.CSS_SELECTOR, "#plot-box .plot-score circle.run-pt")) == 3
    assert browser.find_elements(By.CSS_SELECTOR, "#plot-box .plot-steps polyline.run-curve")
    widths = browser.execute_script(
        "return [document.documentElement.scrollWidth, document.getElementById('runs').scrollWidth]")
    assert max(widths) <= 1400, widths
    # filtering redraws the plots for the listed runs only
    browser.find_element(By.ID, "filter-text").send_keys("prisoners")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#plot-box .plot-score svg")) == 1)
    browser.save_screenshot(str(tmp_path / "list.png"))


def test_long_names_are_cut_with_the_full_text_in_a_title(browser: Any, tmp_path: Path) -> None:
    import importlib.util

    # this folder's conftest.py (a bare `import conftest` may find another package's first)
    spec = importlib.util.spec_from_file_location("rgym_view_tests_conftest",
                                                  Path(__file__).with_name("conftest.py"))
    assert spec is not None and spec.loader is not None
    local = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(local)
    make_run = local.make_run

    name = "pack/" + "very-long-task-name-" * 12
    make_run(tmp_path / "runs" / "a", [{"tool": "bash", "args": {"command": "ls"}, "output": ""}],
             task=name, agent="agent/" + "x" * 200, model="model/" + "m" * 200, final={"accuracy": 0.7})
    open_page(browser, _view(tmp_path / "runs", tmp_path).as_uri())
    cell = browser.find_element(By.CSS_SELECTOR, "tr.run-row td.task")
    assert cell.get_attribute("title") == name
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 1400


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def test_a_hostile_archive_is_read_without_following_or_extracting(tmp_path: Path) -> None:
    def file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        return info, data

    link = tarfile.TarInfo("workspace/escape")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    hard = tarfile.TarInfo("workspace/hard")
    hard.type, hard.linkname = tarfile.LNKTYPE, "/etc/shadow"
    fifo = tarfile.TarInfo("workspace/pipe")
    fifo.type = tarfile.FIFOTYPE
    archive = tmp_path / "workspace.tar.gz"
    archive.write_bytes(_tar([file("workspace/new\nline<script>", b"a\n"), file("workspace/../../up", b"b\n"),
                              file("workspace/big.txt", b"x\n" * (diffs.MAX_TEXT_BYTES // 2 + 1)),
                              file("workspace/nul.dat", b"\0\1"), (link, None), (hard, None), (fifo, None)]))
    entries = diffs.read_archive(archive)
    out = diffs.compare({}, entries, "nothing")
    by = {f["path"]: f for f in out["files"]}
    assert set(by) == {"new\nline<script>", "../../up", "big.txt", "nul.dat", "escape", "hard", "pipe"}
    assert by["escape"]["link"] and by["hard"]["link"] and by["pipe"]["special"]
    assert by["big.txt"]["binary"] and by["nul.dat"]["binary"]  # too large / not text: named only
    assert by["new\nline<script>"]["diff"].endswith("+a\n")
    assert not (tmp_path / "up").exists() and list(tmp_path.iterdir()) == [archive]  # nothing extracted


def test_a_long_diff_is_cut(tmp_path: Path) -> None:
    after = "".join(f"line {i}\n" for i in range(50_000))
    text = diffs.unified("", after, "f.txt")
    assert len(text) < diffs.MAX_DIFF_CHARS + 200 and "rgym view cut this diff" in text
