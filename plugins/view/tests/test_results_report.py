"""``rgym report``: the results page of a sweep, checked against ``rgym score``.

Real runs, made as a user makes them: a sweep of ``rgym/demo`` and
``mlgym/prisoners-dilemma`` with the scripted and the baseline agents over two
seeds, and beside it a runs folder with a forged run (it writes
``eval_score = 3400`` by hand, which the integrity monitor flags), a react run on
the priced mock model (so cost is not zero), a copy whose agent and model names
are hostile (``<script>``, newlines, ``..``, ``$``, ``|``) and two broken copies
(a NaN cost in ``result.json``; garbage in the middle of ``trajectory.jsonl``).
``rgym report`` runs as a subprocess; the page is parsed with ``html.parser``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from conftest import rgym

FORGED = """
- tool: bash
  args: {command: "python baseline.py"}
- tool: bash
  args: {command: 'echo "eval_score = 3400" > results.txt'}
- tool: submit
"""
HOSTILE_AGENT = "evil/bad\n..|agent"
HOSTILE_MODEL = "<script>alert(1)</script>$a$</td><img src=x onerror=alert(2)>/../../up"
HOSTILE_TASK = "evil/<b>task</b>\n../../up"
#: The solver ``rgym score`` makes of them: the agent's short name, ``/``, the model with ``_`` for ``/``.
HOSTILE_SOLVER = "bad\n..|agent/" + HOSTILE_MODEL.replace("/", "_")


class Page(HTMLParser):
    """The tags of a page with their attributes, and the text inside each element
    carrying ``data-*`` attributes (a row, a cell)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.elements: list[dict[str, Any]] = []
        self._open: list[dict[str, Any]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if tag in ("img", "meta", "br", "link"):
            return
        element = {"tag": tag, "attrs": a, "text": [], "children": []}
        if self._open:
            self._open[-1]["children"].append(element)
        self.elements.append(element)
        self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            element = self._open.pop()
            if element["tag"] == tag:
                break

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for element in self._open:
            element["text"].append(data)


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def text(element: dict[str, Any]) -> str:
    return "".join(element["text"])


def cells(row: dict[str, Any]) -> dict[str, dict[str, str]]:
    """A row's number cells by their ``data-field``."""
    return {c["attrs"]["data-field"]: c["attrs"] for c in row["children"] if "data-field" in c["attrs"]}


def number(raw: str) -> float | None:
    return None if raw == "" else float(raw)


def _run(*args: str, cwd: Path) -> Path:
    proc = rgym("run", *args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    path = Path(json.loads(proc.stdout)["run_dir"])
    return path if path.is_absolute() else cwd / path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("report")
    sweep = rgym("sweep", "rgym/demo", "mlgym/prisoners-dilemma", "-a", "scripted,baseline", "--seeds", "1-2",
                 "-o", "sweep", "-j", "2", "-q", cwd=root)
    assert sweep.returncode == 0, sweep.stderr
    script = root / "forged.yaml"
    script.write_text(FORGED)
    out = {"root": root, "sweep": root / "sweep", "runs": root / "runs"}
    out["forged"] = _run("rgym/demo", "--agent-option", f"script={script}", "--runs-dir", "runs", cwd=root)
    out["react"] = _run("rgym/demo", "--agent", "react", "--model", "mock/baseline", "--agent-option",
                        "input_price=2000", "--agent-option", "output_price=8000", "--runs-dir", "runs",
                        cwd=root)
    for name in ("hostile", "broken-result", "broken-trajectory"):
        out[name] = out["runs"] / "copies" / name
        shutil.copytree(out["react"], out[name])
    result = json.loads((out["hostile"] / "result.json").read_text())
    result.update(agent=HOSTILE_AGENT, model=HOSTILE_MODEL, task_id=HOSTILE_TASK, run_id="hostile")
    (out["hostile"] / "result.json").write_text(json.dumps(result))
    result = json.loads((out["broken-result"] / "result.json").read_text())
    result["cost_usd"] = math.nan
    (out["broken-result"] / "result.json").write_text(json.dumps(result))
    lines = (out["broken-trajectory"] / "trajectory.jsonl").read_text().splitlines(keepends=True)
    lines.insert(3, "{not json at all\n")
    (out["broken-trajectory"] / "trajectory.jsonl").write_text("".join(lines))
    report = rgym("report", "sweep", "runs", "-o", "site/report.html", "--figures", "site/figures", cwd=root)
    assert report.returncode == 0, report.stderr
    out["stdout"], out["stderr"] = report.stdout, report.stderr  # type: ignore[assignment]
    score = rgym("score", "sweep", "runs", "--format", "json", cwd=root)
    assert score.returncode == 0, score.stderr
    (root / "score.json").write_text(score.stdout)
    return out


def test_the_numbers_are_rgym_scores(world):
    data = json.loads((world["root"] / "score.json").read_text())
    page = parse(world["root"] / "site" / "report.html")
    board = {e["attrs"]["data-solver"]: e for e in page.elements
             if e["tag"] == "tr" and "data-solver" in e["attrs"] and any(
                 c["attrs"].get("data-field") == "best_aup" for c in e["children"])}
    assert set(board) == {r["solver"] for r in data["aup"]} and len(board) >= 4
    for row in data["aup"]:
        got = cells(board[row["solver"]])
        assert number(got["best_aup"]["data-value"]) == row["best_aup"]
        assert number(got["last_aup"]["data-value"]) == row["last_aup"]
        assert int(got["rank"]["data-value"]) == row["rank"]
    order = [e["attrs"]["data-solver"] for e in page.elements if e["attrs"].get("data-solver") in board][:len(board)]
    assert order == [r["solver"] for r in data["aup"]]  # ranked, best first
    tables = {e["attrs"]["data-task"]: e for e in page.elements if e["tag"] == "table" and "data-task" in e["attrs"]}
    assert set(tables) == {t["task"] for t in data["tasks"]}
    checked = 0
    for summary in data["summaries"]:
        rows = [r for r in tables[summary["task"]]["children"][1]["children"]
                if r["attrs"].get("data-solver") == summary["solver"]]
        assert len(rows) == 1, summary
        got = cells(rows[0])
        assert int(got["runs"]["data-value"]) == summary["runs"]
        assert number(got["best_at_k"]["data-value"]) == summary["best_at_k"]
        assert number(got["last_at_k"]["data-value"]) == summary["last_at_k"]
        assert number(got["best"]["data-mean"]) == summary["best_mean"]
        assert number(got["best"]["data-se"]) == summary["best_se"]
        assert number(got["last"]["data-se"]) == summary["last_se"]
        checked += 1
    assert checked >= 5
    # the seeds give a standard error, shown beside the mean
    se_cells = [c for t in tables.values() for c in t["children"][1]["children"] for c in c["children"]
                if c["attrs"].get("data-field") == "best" and c["attrs"].get("data-se")]
    assert se_cells and all("±" in text(c) for c in se_cells)
    # cost: the react runs on the priced mock model cost something, and the page says so
    react = next(r for r in data["aup"] if r["solver"].startswith("react/"))
    assert number(cells(board[react["solver"]])["cost_mean"]["data-value"]) > 0


def test_the_page_is_self_contained_with_its_figures(world):
    page = parse(world["root"] / "site" / "report.html")
    assert not [t for t, _ in page.tags if t in ("script", "link", "iframe", "object")]
    images = [a for t, a in page.tags if t == "img"]
    assert {a["id"] for a in images} == {"fig-profiles", "fig-aup-cost", "fig-cost-score"}
    assert all(a["src"].startswith("data:image/svg+xml;base64,") for a in images)
    for _, attrs in page.tags:
        for key, value in attrs.items():
            assert "http://" not in value and "https://" not in value, (key, value[:80])
    figures = world["root"] / "site" / "figures"
    assert sorted(p.name for p in figures.iterdir()) == sorted(
        f"{n}.{e}" for n in ("profiles", "aup_cost", "cost_score") for e in ("png", "svg"))
    assert (figures / "profiles.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_each_run_has_its_integrity_and_a_link_to_its_folder(world):
    page = parse(world["root"] / "site" / "report.html")
    rows = _rows(page, world["root"])
    runs = [p.parent.resolve() for base in (world["sweep"], world["runs"]) for p in base.rglob("config.json")]
    assert set(rows) == set(runs) and len(runs) == 8 + 5
    report_dir = world["root"] / "site"
    for path, row in rows.items():
        links = [c for c in page.elements if c["tag"] == "a" and c in _descendants(row)]
        assert len(links) == 1
        href = links[0]["attrs"]["href"]
        assert not urllib.parse.urlsplit(href).scheme, href
        # relative, percent-encoded, and to this run's folder
        assert (report_dir / urllib.parse.unquote(href)).resolve() == path, href
    forged = _integrity(rows[world["forged"].resolve()])
    assert forged["attrs"]["data-integrity"] == "flagged"
    assert "numbers_before_computation" in text(forged)
    assert _integrity(rows[world["react"].resolve()])["attrs"]["data-integrity"] == "clean"
    assert "1 flagged" in world["stdout"]


def test_a_broken_run_is_shown_broken(world):
    page = parse(world["root"] / "site" / "report.html")
    rows = _rows(page, world["root"])
    bad_result = _integrity(rows[world["broken-result"].resolve()])
    assert bad_result["attrs"]["data-integrity"] == "broken"
    assert "result.json" in text(bad_result) and "cost_usd" in text(bad_result)
    bad_traj = _integrity(rows[world["broken-trajectory"].resolve()])
    assert bad_traj["attrs"]["data-integrity"] == "broken"
    assert "trajectory.jsonl: line 4: invalid JSON" in text(bad_traj)
    assert world["stderr"].count("warning: broken run:") == 2
    assert "2 broken" in world["stdout"]


def test_hostile_names_are_escaped(world):
    raw = (world["root"] / "site" / "report.html").read_text()
    assert "<script" not in raw and "<img src=x" not in raw and "</td><img" not in raw
    page = parse(world["root"] / "site" / "report.html")
    assert any(e["attrs"].get("data-solver") == HOSTILE_SOLVER for e in page.elements)  # the literal name
    assert HOSTILE_SOLVER in "".join(page.text) and HOSTILE_TASK in "".join(page.text)
    assert any(e["attrs"].get("data-task") == HOSTILE_TASK for e in page.elements)
    assert not [a for t, a in page.tags if any(k.startswith("on") for k in a)]
    md = rgym("report", "sweep", "runs", "--format", "markdown", "-o", "README-results.md", cwd=world["root"])
    assert md.returncode == 0, md.stderr
    table = (world["root"] / "README-results.md").read_text()
    assert "<script" not in table and "<b>" not in table and "<img" not in table
    assert "bad ..\\|agent/&lt;script&gt;alert(1)&lt;_script&gt;$a$&lt;_td&gt;&lt;img" in table
    assert "evil/&lt;b&gt;task&lt;/b&gt; ../../up" in table
    for line in table.splitlines():
        if line.startswith("|"):  # every row keeps its columns: no raw | or newline from a name
            assert line.replace("\\|", "").count("|") in (9, 8), line


def test_ties_share_a_rank_on_the_page_and_in_markdown(world):
    demo = world["sweep"] / "rgym__demo"
    proc = rgym("report", str(demo), "-o", "demo.html", cwd=world["root"])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(rgym("score", str(demo), "--format", "json", cwd=world["root"]).stdout)
    ranks = {r["solver"]: r["rank"] for r in data["aup"]}
    assert ranks["baseline-agent"] == ranks["baseline"]  # the baseline agent reproduces the baseline
    page = parse(world["root"] / "demo.html")
    board = next(e for e in page.elements if e["attrs"].get("id") == "leaderboard-table")
    shown = {r["attrs"]["data-solver"]: r for r in board["children"][1]["children"]}
    for solver in ("baseline-agent", "baseline"):
        rank_cell = next(c for c in shown[solver]["children"] if c["attrs"].get("data-field") == "rank")
        assert int(rank_cell["attrs"]["data-value"]) == ranks[solver] and "(tie)" in text(rank_cell)
    md = rgym("report", str(demo), "--format", "markdown", "-o", "demo.md", cwd=world["root"])
    assert md.returncode == 0, md.stderr
    lines = (world["root"] / "demo.md").read_text().splitlines()
    tied = [ln for ln in lines if ln.startswith(f"| {ranks['baseline']}= |")]
    assert len(tied) == 2


def test_no_scored_run_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = rgym("report", "empty", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and "empty" in proc.stderr


def _rows(page: Page, root: Path) -> dict[Path, dict[str, Any]]:
    """The runs table's rows by run folder (``data-path`` is as given, from ``root``)."""
    return {(root / e["attrs"]["data-path"]).resolve(): e for e in page.elements if e["tag"] == "tr"
            and "data-path" in e["attrs"]}


def _descendants(element: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for child in element["children"]:
        out.append(child)
        out.extend(_descendants(child))
    return out


def _integrity(row: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in row["children"] if "data-integrity" in c["attrs"])


def test_links_to_the_viewer_with_viewer(world, tmp_path):
    proc = rgym("report", str(world["runs"]), "-o", str(tmp_path / "r.html"), "--viewer",
                str(tmp_path / "v.html"), cwd=world["root"])
    assert proc.returncode == 0, proc.stderr
    page = parse(tmp_path / "r.html")
    hrefs = [a["href"] for t, a in page.tags if t == "a"]
    assert hrefs and all(h.startswith("v.html#run=") for h in hrefs)
    assert (tmp_path / "v.html").is_file() and os.path.getsize(tmp_path / "v.html") > 1000


def test_exclude_flagged_leaves_the_forged_run_out_of_the_figures(world):
    proc = rgym("report", "sweep", "runs", "--exclude-flagged", "-o", "excluded.html", cwd=world["root"])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(rgym("score", "sweep", "runs", "--exclude-flagged", "--format", "json",
                           cwd=world["root"]).stdout)
    assert data["exclude_flagged"] and len(data["flagged"]) == 1
    page = parse(world["root"] / "excluded.html")
    board = next(e for e in page.elements if e["attrs"].get("id") == "leaderboard-table")
    rows = {r["attrs"]["data-solver"]: cells(r) for r in board["children"][1]["children"]}
    for row in data["aup"]:
        assert number(rows[row["solver"]]["best_aup"]["data-value"]) == row["best_aup"]
    scripted = next(s for s in data["summaries"] if s["solver"] == "scripted" and s["task"] == "rgym/demo")
    assert scripted["runs"] == 2  # the forged run is not scored ...
    forged = _integrity(_rows(page, world["root"])[world["forged"].resolve()])
    assert forged["attrs"]["data-integrity"] == "flagged"  # ... and still listed, flagged
    assert "left out of every figure" in "".join(page.text)
