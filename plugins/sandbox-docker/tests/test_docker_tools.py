"""The literature, PDF and memory tools in a Docker episode with the network off.

A small test task (written under the test's tmp folder and registered through a real
`rgym` entry point on PYTHONPATH) blocks its source paper in ``tool_config.literature``.
The built-in scripted agent searches the literature, reads a PDF, writes and reads a
memory, and probes the network from inside the container.  The tools run on the host
and reach a loopback Semantic Scholar / PDF server there; the container has only
``lo`` and cannot reach that server.  The trajectory must record every call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from docker_testlib import TEST_LABELS, base_image, client_or_skip
from rgym_sandbox_docker import lifecycle

client_or_skip()
pytestmark = pytest.mark.docker

literature = pytest.importorskip("rgym_tools_literature.testing",
                                 reason="rgym-tools-literature is not installed")
pdf_testing = pytest.importorskip("rgym_tools_pdf.testing", reason="rgym-tools-pdf is not installed")
for _module in ("rgym_tools_pdf", "rgym_tools_memory"):
    pytest.importorskip(_module, reason=f"{_module} is not installed")

SEARCH = "/graph/v1/paper/search"
BLOCKED_TITLE = "Decoupled Sparse Adapters for Continual Learning"
BLOCKED_ARXIV = "2502.00001"
RELATED_TITLE = "Interference-Free Adapters for Continual Learning"

TASK_YAML = f"""\
id: dockertools/net-off
name: Tools with the network off (Docker test task)
description: |
  Test task of the Docker tool tests: use the literature, PDF and memory tools,
  then write notes.txt. The source paper (arXiv {BLOCKED_ARXIV}) is blocked.
metrics:
  - {{name: score, direction: maximize}}
resources: {{network: false}}
budget: {{max_steps: 12, time_limit_s: 300, action_timeout_s: 60}}
grader: {{entry: evaluate.py, timeout_s: 60, submission: ["notes.txt"]}}
tool_config:
  literature:
    cutoff_date: 2025-06-01
    blocked_papers: ["arXiv:{BLOCKED_ARXIV}"]
"""

GRADER = """\
import json, os
from pathlib import Path
out = Path(os.environ["RGYM_SCORES_FILE"])
notes = Path(os.environ["RGYM_SUBMISSION_DIR"]) / "notes.txt"
if not notes.is_file():
    out.write_text(json.dumps({"error": "notes.txt not found", "missing_submission": True}))
else:
    out.write_text(json.dumps({"scores": {"score": 1.0 if notes.read_text().strip() else 0.0}}))
"""

#: Run inside the container: list the interfaces and try the host's loopback server.
PROBE = textwrap.dedent("""\
    echo "ifaces: $(ls /sys/class/net | tr '\\n' ' ')"
    python3 - <<'PY'
    import socket, urllib.request
    for url in ("{url}/paper.pdf", "http://172.17.0.1:{port}/paper.pdf"):
        try:
            urllib.request.urlopen(url, timeout=3).read()
            print("REACHED", url)
        except Exception as exc:
            print("UNREACHABLE", url, type(exc).__name__)
    PY""")


@pytest.fixture(scope="module")
def engine() -> Any:
    """The engine's client (not conftest's session fixture, whose end-of-session check
    prunes the test-labelled containers of concurrent sessions too)."""
    return client_or_skip()


@pytest.fixture(scope="module")
def rgym_env(engine: Any) -> dict[str, str]:
    """Environment of the `rgym` subprocesses: test label on containers, local base."""
    return {**os.environ, "RGYM_DOCKER_BASE": base_image(engine),
            "RGYM_DOCKER_LABELS": ",".join(f"{k}={v}" for k, v in TEST_LABELS.items())}


def install_task(tmp_path: Path) -> Path:
    """Write the task folder and a `rgym` entry point registering it; returns the folder
    to put on PYTHONPATH."""
    task = tmp_path / "pack" / "net-off"
    (task / "grader").mkdir(parents=True)
    (task / "starter").mkdir()
    (task / "task.yaml").write_text(TASK_YAML)
    (task / "grader" / "evaluate.py").write_text(GRADER)
    (task / "starter" / "README.md").write_text("Write notes.txt.\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / "dockertools_plugin.py").write_text(
        "from pathlib import Path\n"
        "from rgym_core import hookimpl, load_task\n\n"
        "@hookimpl\n"
        "def rgym_register_tasks():\n"
        f"    return [load_task(Path({str(task)!r}))]\n")
    dist = site / "rgym_dockertools-0.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rgym-dockertools\n"
                                   "Version: 0.0.0\n")
    (dist / "entry_points.txt").write_text("[rgym]\ndockertools = dockertools_plugin\n")
    return site


def serve_papers(server: Any) -> None:
    blocked = literature.make_paper(
        "blk", BLOCKED_TITLE, year=2025, arxiv=BLOCKED_ARXIV, publication_date="2025-02-01",
        abstract="Sparse adapters for continual learning.")
    related = literature.make_paper(
        "rel", RELATED_TITLE, year=2024, publication_date="2024-03-01",
        pdf_url=server.url + "/paper.pdf", abstract="Adapters for continual learning.")
    server.handle(SEARCH, literature.scholar_search_handler([blocked, related]))
    server.handle("/paper.pdf", literature.Reply(
        200, pdf_testing.make_pdf(["Adapters page one: setup", "Adapters page two: results"]),
        content_type="application/pdf"))


def run_episode(tmp_path: Path, engine: Any, rgym_env: dict[str, str],
                script: list[dict[str, Any]], server_url: str, embedder: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`rgym run` on Docker with the network off and the three tools; the result and
    the trajectory's lines."""
    site = install_task(tmp_path)
    script_file = tmp_path / "script.yaml"
    script_file.write_text(yaml.safe_dump(script))
    env = {**rgym_env,
           "PYTHONPATH": os.pathsep.join(p for p in (str(site), rgym_env.get("PYTHONPATH"))
                                         if p),
           "RGYM_S2_BASE_URL": server_url, "RGYM_PDF_ALLOW_PRIVATE_HOSTS": "1",
           "RGYM_CACHE_DIR": str(tmp_path / "cache"), "RGYM_MEMORY_EMBEDDER": embedder,
           "RGYM_MEMORY_DIR": str(tmp_path / "memory")}
    done = subprocess.run(
        [sys.executable, "-m", "rgym_core.cli", "run", "dockertools/net-off", "--agent",
         "scripted", "--agent-option", f"script={script_file}", "--sandbox", "docker",
         "--no-network", "--tool", "literature", "--tool", "pdf", "--tool", "memory",
         "--runs-dir", str(tmp_path / "runs"), "--json"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    result = json.loads(done.stdout)
    run_label = {"label": [f"{lifecycle.RUN_ID_LABEL}={result['run_id']}"]}
    assert engine.containers.list(all=True, filters=run_label) == []  # cleaned up
    lines = [json.loads(x) for x in
             (Path(result["run_dir"]) / "trajectory.jsonl").read_text().splitlines()]
    return result, lines


def steps_of(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [x["step"] for x in lines if x["type"] == "step"]


def test_all_three_tools_work_with_the_network_off_and_the_source_is_withheld(
        tmp_path: Path, engine: Any, rgym_env: dict[str, str]) -> None:
    with literature.LoopbackServer() as server:
        serve_papers(server)
        port = server.url.rsplit(":", 1)[1]
        script = [
            {"tool": "literature_search", "args": {"query": BLOCKED_TITLE, "limit": 5}},
            {"tool": "literature_search", "args": {"query": "continual learning", "limit": 5}},
            {"tool": "read_pdf", "args": {"source": server.url + "/paper.pdf", "pages": "2"}},
            {"tool": "memory_write", "args": {"text": "sparse adapters reach 71.2 accuracy",
                                              "tags": ["results"]}},
            {"tool": "memory_read", "args": {"query": "adapters accuracy", "k": 3}},
            {"tool": "bash", "args": {"command": PROBE.format(url=server.url, port=port)}},
            {"tool": "bash", "args": {"command": "echo 'adapters are related' > notes.txt"}},
            {"tool": "submit"},
        ]
        result, lines = run_episode(tmp_path, engine, rgym_env, script, server.url, "hashing")
        served_pdf = len(server.hits("/paper.pdf"))
        searched = len(server.hits(SEARCH))

    assert result["status"] == "submitted" and result["sandbox"] == "docker/docker"
    assert result["final_scores"] == {"score": 1.0}
    config = json.loads((Path(result["run_dir"]) / "config.json").read_text())
    assert config["run"]["network"] is False
    tools = set(lines[0]["tools"])
    assert {"literature/literature_search", "pdf/read_pdf"} <= tools
    assert {"memory_write", "memory_read"} <= {t.split("/", 1)[1] for t in tools}

    steps = steps_of(lines)
    assert [s["action"]["tool"] for s in steps] == [a["tool"] for a in script]
    by_title, by_topic, read, write, recall, probe, _, _ = steps

    for search in (by_title, by_topic):
        facts = search["observation"]["info"]["literature"]
        assert facts["outcome"] == "ok" and facts["withheld"] >= 1
        assert facts["withheld_reasons"].get("blocked_paper", 0) >= 1
        assert "withheld" in search["observation"]["output"]
    # The title appears only where the observation echoes the query.
    out = by_title["observation"]["output"]
    assert out.count(BLOCKED_TITLE) == out.count(f'"{BLOCKED_TITLE}"') == 1, out
    assert by_title["observation"]["info"]["literature"]["results"] == 0
    assert BLOCKED_ARXIV not in out
    out = by_topic["observation"]["output"]
    assert by_topic["observation"]["info"]["literature"]["results"] == 1
    assert RELATED_TITLE in out and BLOCKED_TITLE not in out and BLOCKED_ARXIV not in out
    assert searched >= 2  # the host-side tool really asked the loopback server

    assert read["observation"]["info"]["pdf"]["outcome"] == "ok"
    assert "Adapters page two: results" in read["observation"]["output"]
    assert served_pdf >= 1  # fetched from the host; the probe below could not reach it

    assert write["observation"]["info"]["memory"]["op"] == "write"
    assert write["observation"]["info"]["memory"]["count"] == 1
    memory_facts = recall["observation"]["info"]["memory"]
    assert memory_facts["op"] == "read" and memory_facts["returned"] == 1
    assert "sparse adapters reach 71.2 accuracy" in recall["observation"]["output"]

    probe_out = probe["observation"]["output"]
    assert probe_out.split("ifaces:", 1)[1].splitlines()[0].split() == ["lo"], probe_out
    assert "REACHED" not in probe_out and probe_out.count("UNREACHABLE") == 2, probe_out
    for step in (by_title, by_topic, read, write, recall):
        assert not step["observation"]["error"], step["observation"]["output"]


def test_memory_with_the_real_embedding_model_in_a_docker_episode(
        tmp_path: Path, engine: Any, rgym_env: dict[str, str]) -> None:
    """With the default all-MiniLM-L6-v2 embedder, a read finds the note by meaning
    (the query shares no word with it)."""
    script = [
        {"tool": "memory_write", "args": {"text": "The cat sat on the warm windowsill."}},
        {"tool": "memory_write", "args": {"text": "Lowering the learning rate fixed the "
                                                  "divergence of training."}},
        {"tool": "memory_read", "args": {"query": "optimizer step size made the loss explode",
                                         "k": 1}},
        {"tool": "bash", "args": {"command": "echo done > notes.txt"}},
        {"tool": "submit"},
    ]
    with literature.LoopbackServer() as server:
        result, lines = run_episode(tmp_path, engine, rgym_env, script, server.url, "minilm")
    assert result["status"] == "submitted"
    recall = steps_of(lines)[2]
    assert recall["observation"]["info"]["memory"]["returned"] == 1
    assert "learning rate" in recall["observation"]["output"]
    (meta,) = (Path(result["run_dir"]) / "memory").rglob("meta.json")
    assert "minilm" in json.loads(meta.read_text())["embedder"].lower()
