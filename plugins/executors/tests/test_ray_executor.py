"""``--executor ray`` on a real local Ray cluster: a head node and a second worker
node started with ``ray start`` inside a network namespace this test creates
(``unshare -n``, loopback only: Ray never sees the machine's own address), and a
sweep across them that gives the local executor's scores."""

from __future__ import annotations

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
"$ray_bin" start --head --port=6399 --node-ip-address=127.0.0.1 --num-cpus=2 --include-dashboard=false \
    --disable-usage-stats --temp-dir="$RAY_TMP" >"$LOGS/head.log" 2>&1 || { echo "head failed"; cat "$LOGS/head.log"; exit 90; }
"$ray_bin" start --address=127.0.0.1:6399 --node-ip-address=127.0.0.1 --num-cpus=2 \
    --disable-usage-stats >"$LOGS/worker.log" 2>&1 || { echo "worker failed"; cat "$LOGS/worker.log"; exit 91; }
"$PYTHON" -m rgym_core.cli "$@"
"""


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
    assert events[-1]["event"] == "summary"
    # the run directories came back whole, and score as the local executor's
    assert cell_scores(folder) == local_reference["scores"]
    assert not any((folder / ".sweep" / "incoming").glob("*"))
