"""``--executor slurm`` on a real one-node Slurm cluster (``.ci/setup.d/40-slurm.sh``
starts munge, slurmctld and slurmd on this machine): the same scores as the local
executor, and a sweep whose process is killed adopts its queued and running jobs
instead of submitting the same episodes again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from executors_test_support import CELLS, ENV, SWEEP, cell_scores, json_events
from rgym_executors.slurm_executor import cluster_problem

from rgym_core.testing import run_cli

PROBLEM = cluster_problem()
pytestmark = pytest.mark.skipif(PROBLEM is not None,
                                reason=f"no Slurm cluster here ({PROBLEM}); .ci/setup.d/40-slurm.sh starts one")


@pytest.mark.timeout(900)
def test_a_sweep_of_slurm_jobs_scores_as_the_local_one(local_reference: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    proc = run_cli(*SWEEP, "--executor", "slurm", "--sweep-dir", str(folder), "--json", env=ENV, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ends = [e for e in json_events(proc.stdout) if e["event"] == "cell_end"]
    assert len(ends) == CELLS and all(e["outcome"] == "done" and e.get("job_id") for e in ends)
    assert cell_scores(folder) == local_reference["scores"]
    # queued, then running: four jobs in flight on a node of two CPUs, so some wait in the queue, and
    # no more cells are shown running at once than the node can run
    cpus = sum(int(n) for n in subprocess.run(["sinfo", "-h", "-N", "-o", "%c"], capture_output=True,
                                               text=True).stdout.split())
    state: dict[str, str] = {}
    most_running = most_queued = 0
    for event in json_events(proc.stdout):
        kind = {"cell_queued": "queued", "cell_start": "running", "cell_end": "ended"}.get(event["event"])
        if kind is None:
            continue
        assert (state.get(event["cell"]), kind) in ((None, "queued"), ("queued", "running"), ("running", "ended"))
        state[event["cell"]] = kind
        most_running = max(most_running, sum(v == "running" for v in state.values()))
        most_queued = max(most_queued, sum(v == "queued" for v in state.values()))
    assert 1 <= most_running <= cpus < 4 and most_queued >= 4 - cpus, (most_running, most_queued, cpus)
    end = json_events(proc.stdout)[-2]
    assert end["event"] == "sweep_end" and end["queued"] == end["running"] == 0
    jobs = [json.loads(line) for line in (folder / ".sweep" / "slurm" / "jobs.jsonl").read_text().splitlines()]
    assert sorted(j["cell"] for j in jobs) == sorted(local_reference["scores"])


@pytest.mark.timeout(900)
def test_a_killed_sweep_adopts_its_jobs(local_reference: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    journal = folder / ".sweep" / "slurm" / "jobs.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "rgym_core.cli", *SWEEP, "--executor", "slurm",
                             "--sweep-dir", str(folder), "--quiet"], env={**os.environ, **ENV},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while not (journal.exists() and len(journal.read_text().splitlines()) >= CELLS):
            assert proc.poll() is None, "the sweep ended before all its jobs were submitted"
            assert time.monotonic() < deadline, "the jobs were not submitted"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)  # the jobs stay queued or running in Slurm
    finally:
        proc.wait(timeout=60)
    submitted = [json.loads(line)["job_id"] for line in journal.read_text().splitlines()]
    rerun = run_cli(*SWEEP, "--executor", "slurm", "--sweep-dir", str(folder), "--json", env=ENV, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    events = json_events(rerun.stdout)
    assert [json.loads(line)["job_id"] for line in journal.read_text().splitlines()] == submitted
    adopted = [e for e in events if e["event"] == "cell_start" and e.get("adopted")]
    done_before = next(e for e in events if e["event"] == "sweep_start")["complete"]
    assert len(adopted) + done_before == CELLS  # nothing submitted twice
    assert cell_scores(folder) == local_reference["scores"]
    queue = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split()
    assert not set(submitted) & set(queue)
