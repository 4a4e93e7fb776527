"""Every registered task that reimplements MLGym or ResearchGym has a divergence table in
its pack's README, the overview page links every pack, and `rgym show` prints the link."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rgym_core.commands.catalog import DIVERGENCE_ANCHOR, DIVERGENCE_HEADING, divergence_link
from rgym_core.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["task", "area", "original", "rgym", "why", "effect on the number"]
#: Namespaces of the tasks that reimplement an original benchmark's.
ORIGINALS = ("mlgym", "researchgym")


def _original_tasks() -> dict[str, object]:
    registry = load_registry()
    return {name: reg.item for name, reg in registry.tasks.items()
            if name.split("/", 1)[0] in ORIGINALS}


TASKS = _original_tasks()


def _section(readme: Path) -> str:
    text = readme.read_text(encoding="utf-8")
    head = f"## {DIVERGENCE_HEADING}"
    assert head in text, f"{readme}: no '{head}' section"
    section = text.split(head, 1)[1]
    return re.split(r"\n## ", section, maxsplit=1)[0]


def _rows(section: str) -> list[list[str]]:
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert len(lines) >= 3, "the section holds no table"
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == COLUMNS, header
    assert set(lines[1].replace("|", "").strip()) <= {"-", " "}
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    for row in rows:
        assert len(row) == len(COLUMNS) and all(row), f"a row with an empty or missing cell: {row}"
    return rows


def test_the_packs_of_both_benchmarks_are_registered():
    assert len(TASKS) >= 18, sorted(TASKS)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_has_rows_in_its_packs_divergence_table(name):
    task = TASKS[name]
    link = divergence_link(task)
    assert link is not None, f"{name}: its pack README has no divergence table"
    readme, anchor = link.split("#")
    assert anchor == DIVERGENCE_ANCHOR
    rows = _rows(_section(Path(readme)))
    short = name.split("/", 1)[1]
    mine = [r for r in rows if short in r[0] or r[0] in ("all three", "both")]
    assert mine, f"{readme}: no row names {short}"
    # the baseline row: the original's figure beside rgym's, never one for the other
    assert any(r[1] == "baseline" and short in r[0] for r in rows), f"{readme}: no baseline row for {short}"


def test_the_overview_links_every_pack_and_is_linked_from_the_docs_index():
    page = (ROOT / "docs" / "divergences.md").read_text(encoding="utf-8")
    assert "(divergences.md)" in (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    readmes = {Path(divergence_link(t).split("#")[0]).resolve() for t in TASKS.values()}
    for readme in readmes:
        relative = readme.relative_to(ROOT).as_posix()
        assert f"(../{relative}#{DIVERGENCE_ANCHOR})" in page, relative
    for name in TASKS:
        assert f"| {name} |" in page, f"docs/divergences.md: {name} is missing from the baseline table"


def test_show_prints_the_link():
    name = "mlgym/cifar10" if "mlgym/cifar10" in TASKS else sorted(TASKS)[0]
    proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "show", name], capture_output=True,
                          text=True, timeout=120, env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    link = divergence_link(TASKS[name])
    assert f"divergences from the original: {link}" in proc.stdout, proc.stdout
    shown = subprocess.run([sys.executable, "-m", "rgym_core.cli", "show", name, "--json"],
                           capture_output=True, text=True, timeout=120)
    assert f'"divergences": "{link}"' in shown.stdout


def test_show_says_which_baseline_is_which():
    if "mlgym/cifar10" not in TASKS:
        pytest.fail("rgym-task-vision is not installed: pip install -e task-packs/vision")
    proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "show", "mlgym/cifar10", "--profile", "mlgym"],
                          capture_output=True, text=True, timeout=120, env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "baseline (recorded): accuracy=0.9 [measured on a test fixture: never used" in out, out
    assert "published (the original's figures): baseline accuracy=0.4971 (source: facebookresearch/MLGym@9d40c1b" in out
