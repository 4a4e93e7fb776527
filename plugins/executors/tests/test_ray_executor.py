"""``--executor ray`` on a real local Ray cluster: a head node and a second worker
node started with ``ray start`` inside a network namespace this test creates
(``unshare -n``, loopback only: Ray never sees the machine's own address), and a
sweep across them that gives the local executor's scores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from executors_test_support import CELLS, ENV, SWEEP, cell_scores, json_events, short_tmp

SCRIPT = r"""
set -u
ip link set lo up
export RAY_DISABLE_USAGE_STATS=1
ray_bin="$(dirname "$PYTHON")/ray"
trap '"$ray_bin" stop --force >/dev/null 2>&1' EXIT
# A node's `ray start` waits 30 s (fixed in Ray) for its raylet to register with the GCS;
# with the rest of the suite busy on both cores that was once too short for the second
# node. A cluster that did not come up is stopped whole and started again, three tries.
start_cluster() {
    "$ray_bin" start --head --port=6399 --node-ip-address=127.0.0.1 --num-cpus=2 \
        --include-dashboard=false --disable-usage-stats --temp-dir="$RAY_TMP" \
        >"$LOGS/head.log" 2>&1 || { echo "head failed (try $1)"; cat "$LOGS/head.log"; return 90; }
    "$ray_bin" start --address=127.0.0.1:6399 --node-ip-address=127.0.0.1 --num-cpus=2 \
        --disable-usage-stats >"$LOGS/worker.log" 2>&1 || {
        echo "worker failed (try $1)"; cat "$LOGS/worker.log"; return 91; }
}
for try in 1 2 3; do
    start_cluster "$try" && break
    code=$?
    "$ray_bin" stop --force >/dev/null 2>&1
    [ "$try" = 3 ] && exit "$code"
done
"$PYTHON" -m rgym_core.cli "$@"
"""

#: The cluster of SCRIPT, then a sweep whose process is killed (``kill -9``) once an episode
#: runs, the same sweep again, and the named actors left in the cluster.
KILL_SCRIPT = SCRIPT.replace('"$PYTHON" -m rgym_core.cli "$@"', r"""
"$PYTHON" -m rgym_core.cli "$@" >"$LOGS/first.jsonl" 2>"$LOGS/first.err" &
pid=$!
for _ in $(seq 1200); do
    grep -q '"event": "cell_start"' "$LOGS/first.jsonl" 2>/dev/null && break
    sleep 0.05
done
kill -9 "$pid"; wait "$pid"
"$PYTHON" -m rgym_core.cli "$@" >"$LOGS/second.jsonl" || exit 92
"$PYTHON" -c 'import ray; ray.init(address="127.0.0.1:6399", logging_level="error")
from ray.util import list_named_actors; print("actors left:", len(list_named_actors(all_namespaces=True)))'
""")


def _namespaces_problem() -> str | None:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare or ip is missing"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot create a network namespace: {probe.stderr.strip()}"
    ray = Path(sys.executable).parent / "ray"
    if not ray.exists():
        return f"ray is not installed next to {sys.executable}"
    return None


pytestmark = pytest.mark.skipif(_namespaces_problem() is not None, reason=str(_namespaces_problem()))


@pytest.mark.timeout(900)
def test_a_sweep_across_a_two_node_ray_cluster(local_reference: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    ray_tmp = short_tmp("rgr")
    logs = tmp_path / "logs"
    logs.mkdir()
    try:
        proc = subprocess.run(
            ["unshare", "-n", "bash", "-c", SCRIPT, "ray-sweep", *SWEEP, "--executor", "ray",
             "--address", "127.0.0.1:6399", "--sweep-dir", str(folder), "--json"],
            capture_output=True, text=True, timeout=900,
            env={**os.environ, **ENV, "PYTHON": sys.executable, "RAY_TMP": str(ray_tmp), "LOGS": str(logs)})
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    events = json_events(proc.stdout)
    ends = [e for e in events if e["event"] == "cell_end"]
    assert len(ends) == CELLS and all(e["outcome"] == "done" for e in ends)
    assert len({e["node"] for e in ends}) == 2  # both nodes ran episodes
    # each cell queued, then running, then ended
    order = {e["cell"]: [x["event"] for x in events if x.get("cell") == e["cell"]] for e in ends}
    assert all(o == ["cell_queued", "cell_start", "cell_end"] for o in order.values()), order
    assert events[-1]["event"] == "summary"
    # the run directories came back whole, and score as the local executor's
    assert cell_scores(folder) == local_reference["scores"]
    assert not any((folder / ".sweep" / "incoming").glob("*"))


@pytest.mark.timeout(900)
def test_a_killed_ray_sweep_adopts_its_actors(local_reference: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    ray_tmp = short_tmp("rgk")
    logs = tmp_path / "logs"
    logs.mkdir()
    try:
        proc = subprocess.run(
            ["unshare", "-n", "bash", "-c", KILL_SCRIPT, "ray-sweep", *SWEEP, "--executor", "ray",
             "--address", "127.0.0.1:6399", "--sweep-dir", str(folder), "--json"],
            capture_output=True, text=True, timeout=900,
            env={**os.environ, **ENV, "PYTHON": sys.executable, "RAY_TMP": str(ray_tmp), "LOGS": str(logs)})
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    first = json_events((logs / "first.jsonl").read_text())
    second = json_events((logs / "second.jsonl").read_text())
    assert not any(e["event"] == "sweep_end" for e in first)  # it was killed mid-sweep
    killed_while = {e["cell"] for e in first if e["event"] == "cell_start"} - {
        e["cell"] for e in first if e["event"] == "cell_end"}
    adopted = {e["cell"] for e in second if e["event"] == "cell_start" and e.get("adopted")}
    assert killed_while and killed_while <= adopted  # what ran when it was killed is adopted, not re-run
    # every cell ended exactly once over both invocations, and nothing ran twice
    ends = [e["cell"] for e in [*first, *second] if e["event"] == "cell_end"]
    assert sorted(ends) == sorted(set(ends)) and len(ends) == CELLS, ends
    journal = [json.loads(line) for line in (folder / ".sweep" / "ray" / "actors.jsonl").read_text().splitlines()]
    assert len(journal) == CELLS and len({j["cell"] for j in journal}) == CELLS
    assert cell_scores(folder) == local_reference["scores"]
    assert "actors left: 0" in proc.stdout  # adopted actors are ended once their results are in place

