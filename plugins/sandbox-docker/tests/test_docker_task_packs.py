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
import threading
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


@pytest.fixture(scope="module")
def engine() -> Any:
    """The engine's client.  Not conftest's session fixture: its end-of-session check
    prunes every test-labelled container, those of a concurrent test session too;
    these tests check instead that each run left nothing behind."""
    return client_or_skip()


@pytest.fixture(scope="module")
def rgym_env(engine: Any) -> dict[str, str]:
    """Environment of the `rgym` subprocesses: test label on containers, local base."""
    return {**os.environ, "RGYM_DOCKER_BASE": base_image(engine),
            "RGYM_DOCKER_LABELS": ",".join(f"{k}={v}" for k, v in TEST_LABELS.items())}


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


class _Creations:
    """Watches the engine's live event stream for test-labelled container creations
    (the engine keeps only its last ~1000 events, so they are not queried afterwards)."""

    def __init__(self, engine: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self._stream = engine.events(decode=True, filters={
            "type": "container", "event": "create",
            "label": [f"{k}={v}" for k, v in TEST_LABELS.items()]})
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for event in self._stream:
                self.events.append(event)
        except Exception:  # noqa: BLE001 - the stream was closed
            pass

    def roles(self, run_id: str) -> set[str]:
        """The roles of the containers run ``run_id`` created, once it has ended."""
        time.sleep(0.2)  # the last event may still be in flight
        self._stream.close()
        self._thread.join(timeout=10)
        attrs = [e["Actor"]["Attributes"] for e in self.events]
        return {a.get(lifecycle.ROLE_LABEL, "") for a in attrs
                if a.get(lifecycle.RUN_ID_LABEL) == run_id}


def _run_on_docker(task: str, agent: str, env: dict[str, str], tmp_path: Path,
                   engine: Any) -> tuple[dict[str, Any], set[str]]:
    """``rgym run TASK --agent AGENT --sandbox docker --json``: the result and the roles
    of the containers the run created (from the engine's events)."""
    watch = _Creations(engine)
    done = _rgym("run", task, "--agent", agent, "--sandbox", "docker", "--json", "--runs-dir",
                 str(tmp_path / "runs"), "--data-dir", str(DATA), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    result = json.loads(done.stdout)
    roles = watch.roles(result["run_id"])
    run_label = {"label": [f"{lifecycle.RUN_ID_LABEL}={result['run_id']}"]}
    left = engine.containers.list(all=True, filters=run_label) + engine.volumes.list(
        filters=run_label)
    assert left == [], f"run {result['run_id']} left containers/volumes behind: {left}"
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


def _steps(result: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    run_dir = Path(result["run_dir"])
    if not run_dir.is_absolute():
        run_dir = tmp_path / run_dir
    lines = [json.loads(x) for x in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    return [x["step"] for x in lines if x["type"] == "step"]


@pytest.fixture(scope="module")
def pack_image(engine: Any) -> Callable[[dict[str, Any]], str]:
    """Build a task's image once, in this process, from its `rgym show` spec; the runs then
    find it by its hash tag (on a warm engine this is only a lookup)."""
    built: dict[tuple[str, ...], str] = {}

    def ensure(spec: dict[str, Any]) -> str:
        reqs = tuple(spec["resources"]["requirements"])
        if reqs not in built:
            built[reqs] = images.task_image(engine, list(reqs), base=base_image(engine))
        return built[reqs]

    return ensure


@pytest.mark.parametrize("task", list(TASKS))
def test_baseline_agent_scores_the_recorded_baseline(task: str, engine, rgym_env,
                                                      pack_image, tmp_path: Path) -> None:
    _needs(task)
    spec = _show(task, rgym_env, tmp_path)
    pack_image(spec)
    result, roles = _run_on_docker(task, "baseline", rgym_env, tmp_path, engine)
    scores = _check_common(task, spec, result, roles)
    recorded = spec["baseline"]["scores"]
    assert result["baseline_scores"] == recorded
    for name, value in recorded.items():
        if (task, name) in HARDWARE_DEPENDENT:
            assert scores[name] > 0
        else:  # the spec's tolerance, or floating-point noise of the container's BLAS
            tolerance = (spec["baseline"].get("tolerances") or {}).get(name) \
                or spec["baseline"].get("tolerance") or 0.0
            assert math.isclose(scores[name], value, rel_tol=1e-12, abs_tol=tolerance), \
                f"{task}: {name} = {scores[name]}, recorded {value}"
    steps = _steps(result, tmp_path)
    assert [(s["action"]["tool"], s["action"]["args"].get("command")) for s in steps] == [
        ("bash", spec["baseline"]["command"]), ("submit", None)]
    assert steps[0]["observation"]["exit_code"] == 0, steps[0]["observation"]["output"][-1500:]


@pytest.mark.parametrize("task", list(TASKS))
def test_scripted_reference_agent_submits_a_valid_score(task: str, engine, rgym_env,
                                                         pack_image, tmp_path: Path) -> None:
    _needs(task)
    spec = _show(task, rgym_env, tmp_path)
    pack_image(spec)
    result, roles = _run_on_docker(task, "scripted", rgym_env, tmp_path, engine)
    _check_common(task, spec, result, roles)
    steps = _steps(result, tmp_path)
    assert [s["action"]["tool"] for s in steps] == [a["tool"] for a in spec["scripted_actions"]]
    for step in steps:  # every scripted action worked inside the container
        assert not step["observation"]["error"], step["observation"]["output"][-1500:]
    validations = [s for s in result["scores"] if s["kind"] == "validate"]
    assert all(v["valid"] for v in validations) and len(validations) == sum(
        a["tool"] == "validate" for a in spec["scripted_actions"])


def test_tabular_pack_layer_has_pandas_and_sklearn_installed_with_the_host_ca_bundle(
        engine, rgym_env, pack_image, tmp_path: Path) -> None:
    """pip installed the pack's requirements into the venv while building the pack layer,
    trusting the CA bundle copied from the host (PIP_CERT)."""
    _needs("mlgym/titanic")
    spec = _show("mlgym/titanic", rgym_env, tmp_path)
    assert {"pandas", "scikit-learn"} <= set(spec["resources"]["requirements"])
    tag = pack_image(spec)
    assert tag.startswith("rgym-pack:")
    probe = ('echo "cert=$PIP_CERT"; sha256sum "$PIP_CERT"; '
             'python -c "import sys, pandas, sklearn; print(sys.prefix, pandas.__file__, '
             'sklearn.__file__)"; pip freeze')
    out = engine.containers.run(tag, ["bash", "-c", probe], remove=True, network_mode="none",
                                labels=dict(TEST_LABELS), user="agent").decode()
    cert = out.split("cert=", 1)[1].splitlines()[0]
    assert cert.startswith("/"), out
    if images.CA_BUNDLE.is_file():
        host_digest = hashlib.sha256(images.CA_BUNDLE.read_bytes()).hexdigest()
        assert f"{host_digest}  {cert}" in out, out
    venv = "/opt/rgym/venv"
    imports = next(line for line in out.splitlines() if line.startswith(venv))
    assert f"{venv}/lib" in imports.split()[1] and f"{venv}/lib" in imports.split()[2], imports
    frozen = {line.split("==")[0].lower() for line in out.splitlines() if "==" in line}
    assert {"pandas", "scikit-learn", "numpy"} <= frozen
