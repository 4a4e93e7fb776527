"""The grader on real (tiny, untrained) checkpoints, confined the way episodes are:
scores, reproducibility, every way a submission can be broken, and attacks."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from rl_testlib import config_text, small_task, starter_src, submission

from rgym_core.testing import grade

# The tests make checkpoints with JAX in this process, then start graders (fork + exec).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")]


@pytest.fixture(scope="module")
def breakout() -> dict:
    return submission("Breakout-MinAtar")


def test_untrained_policies_score_and_scores_are_reproducible(breakout: dict) -> None:
    first = grade(small_task("Breakout-MinAtar"), breakout)
    assert first.valid, first.error
    assert 0 <= first.scores["Reward Mean"] < 3      # a random paddle breaks a brick or two
    assert first.scores["Reward Mean SE"] > 0
    details = first.details
    assert details["episodes"] == 5 * 5 * 4 and details["horizon"] == 999
    assert details["confined"] is True
    assert [c["checkpoint"] for c in details["checkpoints"]] == [f"config-42-{i}.msgpack" for i in range(5)]
    again = grade(small_task("Breakout-MinAtar"), breakout)
    assert again.scores == first.scores


def test_the_evaluation_episodes_come_from_the_grader_secret(
        breakout: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The starts and the environments' randomness derive from the task's grader secret
    and the grading seed, not from the seed alone (public: a policy could be fitted to
    the episodes it names): one secret grades the same episodes every time (the record
    names it), another secret other ones, with the same grading seed."""
    first = grade(small_task("Breakout-MinAtar"), breakout, seed=3)
    assert first.valid, first.error
    monkeypatch.setenv("RGYM_CACHE_DIR", str(tmp_path / "another-machine"))
    other = grade(small_task("Breakout-MinAtar"), breakout, seed=3)
    assert other.valid, other.error
    assert other.grader_secret and other.grader_secret != first.grader_secret
    assert other.details["checkpoints"] != first.details["checkpoints"]
    assert grade(small_task("Breakout-MinAtar"), breakout, seed=3).scores == other.scores


@pytest.mark.parametrize("env_name", ["MetaMaze-misc", "MountainCarContinuous-v0"])
def test_other_environments_score(env_name: str) -> None:
    record = grade(small_task(env_name), submission(env_name))
    assert record.valid, record.error
    horizon = {"MetaMaze-misc": 199, "MountainCarContinuous-v0": 200}[env_name]
    assert record.details["horizon"] == horizon
    if env_name == "MountainCarContinuous-v0":
        assert -30 < record.scores["Reward Mean"] <= 100   # action costs, rarely the flag
    else:
        assert 0 <= record.scores["Reward Mean"] <= 200


def test_config_that_does_not_fit_the_checkpoints(breakout: dict) -> None:
    files = {**breakout, "config.yaml": config_text("Breakout-MinAtar", {"num_hidden_units": 16,
                                                                          "num_hidden_layers": 1})}
    record = grade(small_task("Breakout-MinAtar"), files)
    assert not record.valid
    assert "does not fit the network" in record.error and "shape (400, 8)" in record.error


def test_pickled_or_garbage_checkpoint_is_unloadable(breakout: dict) -> None:
    import pickle

    files = dict(breakout)
    files["checkpoints/config-42-3.msgpack"] = pickle.dumps({"network": [1, 2, 3]})
    record = grade(small_task("Breakout-MinAtar"), files)
    assert not record.valid
    assert "config-42-3.msgpack" in record.error
    assert "not a flax msgpack file" in record.error or "does not fit" in record.error


def test_policy_for_another_environment() -> None:
    """Checkpoints and config.yaml that agree, but for Asterix-MinAtar."""
    files = submission("Breakout-MinAtar", env_name="Asterix-MinAtar")  # same obs and actions
    record = grade(small_task("Breakout-MinAtar"), files)
    assert not record.valid
    assert "env_name is 'Asterix-MinAtar'" in record.error and "Breakout-MinAtar" in record.error


POLICY_RETURNING = """
import jax.numpy as jnp
from flax import struct
import networks as _real

class _Fixed:
    def __init__(self, value):
        self.value = value
    def sample(self, seed):
        return {value}

class _Wrapped:
    def __init__(self, model):
        self.model = model
    def apply(self, params, obs):
        value, pi = self.model.apply(params, obs)
        return value, _Fixed(obs.shape[0])

def get_model_ready(rng, config):
    model, params = _real.get_model_ready(rng, config)
    return _Wrapped(model), params
"""


def _policy_override(expression: str) -> dict:
    """src/networks.py whose policy returns ``expression`` (of ``self.value``, the batch size)."""
    real = (starter_src() / "networks.py").read_text()
    return {"src/real_networks.py": real,
            "src/networks.py": POLICY_RETURNING.replace("import networks as _real",
                                                        "import real_networks as _real")
            .format(value=expression)}


@pytest.mark.parametrize("expression, message", [
    ("jnp.full((self.value,), 3, dtype=jnp.int32)", "invalid action 3"),
    ("jnp.zeros((self.value,), dtype=jnp.float32)", "dtype float32"),
], ids=["out-of-range", "float"])
def test_invalid_discrete_actions(breakout: dict, expression: str, message: str) -> None:
    record = grade(small_task("Breakout-MinAtar"), {**breakout, **_policy_override(expression)})
    assert not record.valid
    assert message in record.error and "step 1" in record.error, record.error


def test_nan_continuous_action() -> None:
    files = {**submission("MountainCarContinuous-v0"),
             **_policy_override("jnp.full((self.value, 1), jnp.nan)")}
    record = grade(small_task("MountainCarContinuous-v0"), files)
    assert not record.valid and "NaN or infinite action" in record.error


def test_network_code_that_raises_is_reported(breakout: dict) -> None:
    files = {**breakout, "src/networks.py": "def get_model_ready(rng, config):\n"
                                            "    raise RuntimeError('my network is broken')\n"}
    record = grade(small_task("Breakout-MinAtar"), files)
    assert not record.valid
    assert "get_model_ready" in record.error and "my network is broken" in record.error


def test_policy_that_hangs_is_stopped_by_the_time_limit(breakout: dict) -> None:
    files = {**breakout, "src/networks.py": "import time\nwhile True:\n    time.sleep(1)\n"}
    record = grade(small_task("Breakout-MinAtar", time_limit_s=15), files)
    assert not record.valid
    assert "did not answer within" in record.error and "was stopped" in record.error
    assert "time limit of 15 s ran out" in record.error
    assert record.duration_s < 90


SPY = r'''
import glob, json, os
SECRET = "{secret}"
found = []
for key, value in os.environ.items():
    if (key.startswith("RGYM") and key != "RGYM_WORKER_DIR") or SECRET in value:
        found.append(f"env {{key}}={{value}}")
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        for what in ("environ", "cmdline"):
            try:
                data = open(f"/proc/{{pid}}/{{what}}", "rb").read()
            except OSError:
                continue
            if SECRET.encode() in data or b"RGYM_SEED" in data or b"rl_grading" in data:
                found.append(f"/proc/{{pid}}/{{what}}")
for pattern in ("/tmp/*/grader", "/tmp/*/*/grader", "/eval", "/eval/*", "../grader", "../../grader",
                "/tmp/rgym-*", "/work/main/task-packs/rl/rgym_task_rl/tasks/*/grader/*"):
    for path in glob.glob(pattern):
        try:
            found.append(f"{{path}}: {{os.listdir(path) if os.path.isdir(path) else open(path).read(20)}}")
        except OSError:
            pass
for top in ("/", "/tmp", os.path.expanduser("~")):
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "usr", "dev", "lib", "lib64", "bin")]
        if "rl_grading.py" in files or "scores.json" in files:
            found.append(os.path.join(root, "*"))
        if root.count("/") > 6:
            dirs[:] = []
raise RuntimeError("SPY-REPORT " + json.dumps(found))
'''


def test_policy_that_looks_for_the_grader_seed_and_files_finds_nothing(breakout: dict) -> None:
    secret = "271828"
    record = grade(small_task("Breakout-MinAtar"),
                   {**breakout, "src/networks.py": textwrap.dedent(SPY.format(secret=secret))},
                   seed=int(secret))
    assert not record.valid
    report = re.search(r"RuntimeError: SPY-REPORT (.*)", record.error)
    assert report, record.error
    assert json.loads(report.group(1)) == [], report.group(1)
    assert secret not in record.error


def test_missing_checkpoint_copy_is_a_missing_submission() -> None:
    files = {"config.yaml": config_text("Breakout-MinAtar")}
    record = grade(small_task("Breakout-MinAtar"), files, starter=False)
    assert not record.valid and record.details.get("missing_submission") is True
