"""End to end: `rgym run` (a subprocess) with the scripted agent, `--tool literature --tool
pdf` and the sandbox network off; the tools reach a loopback Semantic Scholar and PDF server
from the host, the blocked source paper is withheld, and the trajectory records each call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rgym_tools_pdf.testing import make_pdf

import rgym_core
from rgym_core.testing import LoopbackServer, Reply

literature = pytest.importorskip("rgym_tools_literature.testing",
                                 reason="this end-to-end test also needs rgym-tools-literature")
make_paper, scholar_search_handler = literature.make_paper, literature.scholar_search_handler

PACK = Path(__file__).parent / "e2e_pack"
SEARCH = "/graph/v1/paper/search"
pytest.importorskip("rgym_core.runner", reason="the episode runner is not installed")


def install_test_pack(site: Path) -> None:
    """Register the test task through a real `rgym` entry point in a folder on PYTHONPATH."""
    (site / "littest_plugin.py").write_text(
        "from pathlib import Path\n"
        "from rgym_core import hookimpl, load_task\n\n"
        "@hookimpl\n"
        "def rgym_register_tasks():\n"
        f"    return [load_task(Path({str(PACK / 'lit-e2e')!r}))]\n")
    dist = site / "rgym_littest-0.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rgym-littest\nVersion: 0.0.0\n")
    (dist / "entry_points.txt").write_text("[rgym]\nlittest = littest_plugin\n")


def test_scripted_agent_uses_literature_and_pdf_tools(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install_test_pack(site)
    with LoopbackServer() as server:
        source = make_paper("src", "SD-LoRA: Scalable Decoupled Low-Rank Adaptation",
                            year=2024, arxiv="2501.13198", publication_date="2024-12-20",
                            abstract="Low-rank adaptation for class incremental learning.")
        related = make_paper("inf", "InfLoRA: Interference-Free Low-Rank Adaptation", year=2024,
                             publication_date="2024-03-01", pdf_url=server.url + "/inflora.pdf",
                             abstract="Low-rank adaptation for continual learning.")
        server.handle(SEARCH, scholar_search_handler([source, related]))
        server.handle("/inflora.pdf", Reply(200, make_pdf(["InfLoRA page one: interference",
                                                           "InfLoRA page two: results"]),
                                            content_type="application/pdf"))
        script = [
            {"tool": "literature_search", "args": {"query": "low-rank adaptation", "limit": 5}},
            {"tool": "read_pdf", "args": {"source": server.url + "/inflora.pdf", "pages": "2"}},
            {"tool": "read_pdf", "args": {"source": "https://arxiv.org/pdf/2501.13198"}},
            {"tool": "bash", "args": {"command": "echo 'InfLoRA is related' > notes.txt"}},
            {"tool": "submit"},
        ]
        script_file = tmp_path / "script.yaml"
        script_file.write_text(yaml.safe_dump(script))
        root = Path(rgym_core.__file__).resolve().parent.parent
        env = {**os.environ,
               "PYTHONPATH": os.pathsep.join([str(site), str(root), os.environ.get("PYTHONPATH", "")]),
               "RGYM_S2_BASE_URL": server.url, "RGYM_CACHE_DIR": str(tmp_path / "cache"),
               "RGYM_PDF_ALLOW_PRIVATE_HOSTS": "1", "S2_API_KEY": "e2e-secret-key"}
        proc = subprocess.run(
            [sys.executable, "-m", "rgym_core.cli", "run", "littest/lit-e2e", "--agent", "scripted",
             "--agent-option", f"script={script_file}", "--tool", "literature", "--tool", "pdf",
             "--no-network", "--runs-dir", str(tmp_path / "runs"), "--json"],
            env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    result = json.loads(proc.stdout)
    assert result["final_scores"] == {"score": 1.0}
    run_dir = Path(result["run_dir"])
    config = json.loads((run_dir / "config.json").read_text())
    assert config["run"]["network"] is False
    lines = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    assert {"literature/literature_search", "pdf/read_pdf"} <= set(lines[0]["tools"])
    steps = [line["step"] for line in lines if line["type"] == "step"]
    search, read, blocked = steps[0], steps[1], steps[2]

    assert search["action"]["tool"] == "literature_search"
    facts = search["observation"]["info"]["literature"]
    assert facts["outcome"] == "ok" and facts["withheld"] == 1 and facts["results"] == 1
    assert facts["withheld_reasons"] == {"blocked_paper": 1} and facts["latency_s"] >= 0
    out = search["observation"]["output"]
    assert "InfLoRA" in out and "SD-LoRA" not in out and "2501.13198" not in out
    assert "1 result withheld by the task's leakage policy" in out
    assert search["duration_s"] >= 0

    assert read["observation"]["info"]["pdf"]["outcome"] == "ok"
    assert "InfLoRA page two: results" in read["observation"]["output"]
    assert blocked["observation"]["error"] is True
    assert "blocked by the task's leakage policy" in blocked["observation"]["output"]
    assert blocked["observation"]["info"]["pdf"]["withheld"] == 1

    trajectory_text = (run_dir / "trajectory.jsonl").read_text()
    assert "e2e-secret-key" not in trajectory_text
    assert "e2e-secret-key" not in (run_dir / "config.json").read_text()
