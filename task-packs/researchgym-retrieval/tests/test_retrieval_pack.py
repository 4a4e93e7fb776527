"""researchgym/cross-modal-retrieval end to end: the cpu baseline reproduces its recorded
score, a real adaptation method scores higher, and the hand-written evaluate.txt that
fooled ResearchGym's grader gets no score."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from rgym_core.testing import run_cli

TASK = "researchgym/cross-modal-retrieval"
DATA = Path(os.environ.get("RGYM_TEST_DATA_DIR",
                           Path(__file__).resolve().parents[3] / ".." / "shared" / "data")) / "researchgym"
TASK_YAML = Path(__file__).resolve().parents[1] / "rgym_task_retrieval" / "tasks" / \
    "cross-modal-retrieval" / "task.yaml"
pytestmark = pytest.mark.skipif(not any(DATA.glob("*.tar.gz")),
                                reason=f"no ResearchGym archive in {DATA} (set RGYM_TEST_DATA_DIR)")


def rgym_run(tmp_path: Path, *args: str) -> dict:
    runs = tmp_path / "runs"
    proc = run_cli("run", TASK, "--profile", "cpu", "--runs-dir", str(runs), "--data-dir", str(DATA),
                   *args, timeout=600, cwd=tmp_path)
    results = list(runs.rglob("result.json"))
    assert results, f"no result (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(results[0].read_text())


def scripted(tmp_path: Path, *commands: str) -> dict:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([*({"tool": "bash", "args": {"command": c}} for c in commands),
                                      {"tool": "submit"}]))
    return rgym_run(tmp_path, "--agent", "scripted", "--agent-option", f"script={script}")


def test_cpu_baseline_reproduces_recorded_score(tmp_path: Path) -> None:
    result = rgym_run(tmp_path, "--agent", "baseline")
    recorded = yaml.safe_load(TASK_YAML.read_text())["profiles"]["cpu"]["baseline"]["scores"]
    tolerances = yaml.safe_load(TASK_YAML.read_text())["profiles"]["cpu"]["baseline"]["tolerances"]
    assert result["status"] == "submitted", result.get("error")
    for metric, value in recorded.items():  # the eval split is per machine (a grader secret)
        assert abs(result["final_scores"][metric] - value) <= tolerances[metric], (metric, result["final_scores"])
    from rgym_integrity import integrity_problems

    assert integrity_problems(tmp_path) == []  # the task's own starter is no attack


CENTERING = '''
import numpy as np
def retrieve(queries, gallery, direction):
    q = queries - queries.mean(0)          # remove the query stream's domain offset online
    g = gallery - gallery.mean(0)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return q @ g.T
'''


def test_adaptation_beats_the_source_model(tmp_path: Path) -> None:
    """Centering is the cpu profile's recorded reference solution: it reproduces the
    reference scores, and the run carries the cpu profile's own sub-tasks, both graded."""
    result = scripted(tmp_path, f"cat > rgym_tta.py <<'END'\n{CENTERING}\nEND")
    cpu = yaml.safe_load(TASK_YAML.read_text())["profiles"]["cpu"]
    assert result["status"] == "submitted", result.get("error")
    assert result["final_scores"]["r1"] > cpu["baseline"]["scores"]["r1"] + cpu["baseline"]["tolerances"]["r1"]
    # the eval split is per machine: over 21 grader secrets centering scored r1 47.5-56.3 (sd 2.4),
    # i2t_r1 44.6-59.2 (sd 3.3), t2i_r1 49.6-57.8 (sd 2.0); 11 covers 3 sd and the largest deviation
    assert result["final_scores"] == pytest.approx(cpu["reference_scores"], abs=11.0)
    assert [s["id"] for s in result["subtasks"]] == ["qs-image", "qs-text"]
    graded = result["scores"][-1]["subtasks"]
    assert graded == {"qs-image": {"r1": result["final_scores"]["i2t_r1"]},
                      "qs-text": {"r1": result["final_scores"]["t2i_r1"]}}


def test_check_pack_runs_the_baseline(tmp_path: Path) -> None:
    """`rgym check-pack` without --fast: task.yaml alone (the prepared task is the dataset's
    starter) runs the cpu baseline and reproduces its scores; researchgym needs a GPU."""
    from rgym_core.checks import visible_gpus

    if visible_gpus():
        pytest.skip("the researchgym profile's baseline would run on this GPU machine (needs its real data)")
    pack = TASK_YAML.parents[3]
    proc = run_cli("check-pack", str(pack), "--data-dir", str(DATA), "--json", timeout=600, cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], [f for f in report["findings"] if not f["ok"]]
    messages = [f["message"] for f in report["findings"]]
    baseline = yaml.safe_load(TASK_YAML.read_text())["profiles"]["cpu"]["baseline"]
    expected = (rf"baseline r1: measured [0-9.]+, recorded {re.escape(format(baseline['scores']['r1'], '.6g'))}"
                rf" \(within {re.escape(format(baseline['tolerances']['r1'], '.2g'))}\)")
    assert any(re.fullmatch(expected, m) for m in messages), messages
    skipped = [f for f in report["findings"] if f["skipped"]]
    assert [f["where"].endswith("[profile researchgym]") for f in skipped] == [True]
    assert "needs 1 GPU(s)" in skipped[0]["message"]


FORGED = "| qs_image_blip_base | 99.0 | 99.0 | 99.0 |\nI2TR@1: 99.0\nT2IR@1: 99.0\n"


def test_forged_evaluate_txt_gets_no_score(tmp_path: Path) -> None:
    """ResearchGym's grade.py accepted a made-up output/**/evaluate.txt row; rgym never reads
    it: without a method there is no score, and with the source model the score stays the
    baseline's."""
    forge = ("mkdir -p output/QS/coco/gaussian_noise_5 && printf '%s' "
             f"'{FORGED}' > output/QS/coco/gaussian_noise_5/evaluate.txt && "
             "printf 'backbone: blip\\nretrieval: i2t\\n' > output/QS/coco/gaussian_noise_5/config.yaml")
    result = scripted(tmp_path, forge + " && rm rgym_tta.py")
    assert result["status"] == "submission_missing"
    assert not result.get("final_scores")


def test_show_lists_each_profiles_subtasks() -> None:
    proc = run_cli("show", TASK, env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    lines = [line.strip() for line in proc.stdout.splitlines()]
    assert "sub-tasks: qs-image (primary, r1, baseline " in "\n".join(lines) and "qs-text (r1, baseline " in "\n".join(lines)
    assert any(line.startswith("sub-tasks: reid (primary, r1, baseline 37.8)") for line in lines)
    assert any("researchgym/cross-modal-retrieval -> .researchgym/ (starter files)" in line for line in lines)
