"""The MLGym task packs on the Docker sandbox, end to end through the CLI.

Each task runs with the baseline agent (its score must equal the task's recorded
baseline, as `rgym show` gives it) and with the scripted reference agent (submitted,
with a valid score), on the real grading configuration.  The game-theory and 3-SAT
packs grade with ``location: sandbox``: the tests check from the engine's events that
the episode and the grader each ran in a container of the run.  The tabular packs
need pandas and scikit-learn in the pack layer, installed by pip at image build time
with the host's CA bundle; their data come from ``RGYM_TEST_DATA_DIR`` (default
``<repo>/../shared/data``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from docker_testlib import TEST_LABELS, base_image, client_or_skip
from rgym_sandbox_docker import images, lifecycle

import rgym_core

client_or_skip()
pytestmark = pytest.mark.docker

RGYM = [sys.executable, "-m", "rgym_core.cli"]
REPO = Path(rgym_core.__file__).resolve().parents[1]
DATA = Path(os.environ.get("RGYM_TEST_DATA_DIR") or REPO.parent / "shared" / "data")

#: task -> (module of its pack, data file it needs or None)
TASKS: dict[str, tuple[str, str | None]] = {
    "mlgym/prisoners-dilemma": ("rgym_task_gametheory", None),
    "mlgym/battle-of-sexes": ("rgym_task_gametheory", None),
    "mlgym/blotto": ("rgym_task_gametheory", None),
    "mlgym/3sat": ("rgym_task_sat", None),
    "mlgym/house-price": ("rgym_task_tabular", "house-price/ames_train.csv"),
    "mlgym/titanic": ("rgym_task_tabular", "titanic/train.csv"),
}
#: Metrics that depend on the machine: only their presence is checked.
HARDWARE_DEPENDENT = {("mlgym/3sat", "Time")}


def _needs(task: str) -> None:
    module, data_file = TASKS[task]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e task-packs/...)")
    if data_file and not (DATA / data_file).is_file():
        pytest.skip(f"real data absent: {DATA / data_file} (set RGYM_TEST_DATA_DIR)")


def _rgym(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RGYM, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=900)


def _show(task: str, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    done = _rgym("show", task, "--json", env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _run_on_docker(task: str, agent: str, env: dict[str, str], tmp_path: Path,
                   docker_client: Any) -> tuple[dict[str, Any], set[str]]:
    """``rgym run TASK --agent AGENT --sandbox docker --json``: the result and the roles
    of the containers the run created (from the engine's events)."""
    since = int(time.time()) - 1
    done = _rgym("run", task, "--agent", agent, "--sandbox", "docker", "--json", "--runs-dir",
                 str(tmp_path / "runs"), "--data-dir", str(DATA), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    result = json.loads(done.stdout)
    now = f"{time.time():.9f}"  # a past `until` makes the engine answer at once
    events = docker_client.events(since=since, until=now, decode=True, filters={
        "type": "container", "event": "create",
        "label": [f"{lifecycle.RUN_ID_LABEL}={result['run_id']}"]})
    roles = {e["Actor"]["Attributes"].get(lifecycle.ROLE_LABEL, "") for e in events}
    return result, roles


def _check_common(task: str, spec: dict[str, Any], result: dict[str, Any],
                  roles: set[str]) -> dict[str, float]:
    assert result["status"] == "submitted", result.get("error")
    assert result["sandbox"] == "docker/docker" and result["end_reason"] == "submit"
    expected_roles = {"episode", "grader"} if spec["grader"]["location"] == "sandbox" \
        else {"episode"}
    assert roles == expected_roles
    submit = [s for s in result["scores"] if s["kind"] == "submit"]
    assert len(submit) == 1 and submit[0]["valid"], submit
    scores = result["final_scores"]
    assert scores == submit[0]["scores"]
    metrics = {m["name"] for m in spec["metrics"]}
    assert set(scores) == metrics
    assert all(isinstance(v, float | int) and math.isfinite(v) for v in scores.values()), scores
    return scores


@pytest.fixture(scope="module")
def pack_image(docker_client) -> Callable[[dict[str, Any]], str]:  # type: ignore[no-untyped-def]
    """Build a task's image once, in this process, from its `rgym show` spec; the runs then
    find it by its hash tag (on a warm engine this is only a lookup)."""
    built: dict[tuple[str, ...], str] = {}

    def ensure(spec: dict[str, Any]) -> str:
        reqs = tuple(spec["resources"]["requirements"])
        if reqs not in built:
            built[reqs] = images.task_image(docker_client, list(reqs),
                                            base=base_image(docker_client))
        return built[reqs]

    return ensure


@pytest.mark.parametrize("task", list(TASKS))
def test_baseline_agent_scores_the_recorded_baseline(task: str, docker_client, test_env,
                                                      pack_image, tmp_path: Path) -> None:
    _needs(task)
    spec = _show(task, test_env, tmp_path)
    pack_image(spec)
    result, roles = _run_on_docker(task, "baseline", test_env, tmp_path, docker_client)
    scores = _check_common(task, spec, result, roles)
    recorded = spec["baseline"]["scores"]
    assert result["baseline_scores"] == recorded
    for name, value in recorded.items():
        if (task, name) in HARDWARE_DEPENDENT:
            assert scores[name] > 0
        else:
            assert scores[name] == value, f"{task}: {name} = {scores[name]}, recorded {value}"
    primary = next(m["name"] for m in spec["metrics"] if m.get("primary"))
    assert (task, primary) in HARDWARE_DEPENDENT or scores[primary] == recorded[primary]


@pytest.mark.parametrize("task", list(TASKS))
def test_scripted_reference_agent_submits_a_valid_score(task: str, docker_client, test_env,
                                                         pack_image, tmp_path: Path) -> None:
    _needs(task)
    spec = _show(task, test_env, tmp_path)
    pack_image(spec)
    result, roles = _run_on_docker(task, "scripted", test_env, tmp_path, docker_client)
    _check_common(task, spec, result, roles)
    run_dir = Path(result["run_dir"])
    if not run_dir.is_absolute():
        run_dir = tmp_path / run_dir
    lines = [json.loads(x) for x in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    steps = [x["step"] for x in lines if x["type"] == "step"]
    assert [s["action"]["tool"] for s in steps] == [a["tool"] for a in spec["scripted_actions"]]
    for step in steps:  # every scripted action worked inside the container
        assert not step["observation"]["error"], step["observation"]["output"][-1500:]
    validations = [s for s in result["scores"] if s["kind"] == "validate"]
    assert all(v["valid"] for v in validations) and len(validations) == sum(
        a["tool"] == "validate" for a in spec["scripted_actions"])


def test_tabular_pack_layer_has_pandas_and_sklearn_installed_with_the_host_ca_bundle(
        docker_client, test_env, pack_image, tmp_path: Path) -> None:
    """pip installed the pack's requirements into the venv while building the pack layer,
    trusting the CA bundle copied from the host (PIP_CERT)."""
    _needs("mlgym/titanic")
    spec = _show("mlgym/titanic", test_env, tmp_path)
    assert {"pandas", "scikit-learn"} <= set(spec["resources"]["requirements"])
    tag = pack_image(spec)
    assert tag.startswith("rgym-pack:")
    probe = ('echo "cert=$PIP_CERT"; sha256sum "$PIP_CERT"; '
             'python -c "import sys, pandas, sklearn; print(sys.prefix, pandas.__file__, '
             'sklearn.__file__)"; pip freeze')
    out = docker_client.containers.run(tag, ["bash", "-c", probe], remove=True,
                                       network_mode="none", labels=dict(TEST_LABELS),
                                       user="agent").decode()
    cert = out.split("cert=", 1)[1].split()[0]
    assert cert, out
    if images.CA_BUNDLE.is_file():
        host_digest = hashlib.sha256(images.CA_BUNDLE.read_bytes()).hexdigest()
        assert f"{host_digest}  {cert}" in out, out
    venv = "/opt/rgym/venv"
    imports = next(line for line in out.splitlines() if line.startswith(venv))
    assert f"{venv}/lib" in imports.split()[1] and f"{venv}/lib" in imports.split()[2], imports
    frozen = {line.split("==")[0].lower() for line in out.splitlines() if "==" in line}
    assert {"pandas", "scikit-learn", "numpy"} <= frozen
