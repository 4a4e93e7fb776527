"""Tests of the game-theory pack: its graders run as the runner runs them (a
real subprocess in a fresh evaluation folder), on real strategy files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rgym_task_gametheory import MLGYM_BASELINES
from rgym_task_gametheory.plugin import rgym_register_tasks

from rgym_core import load_task
from rgym_core.checks import check_pack
from rgym_core.grader_protocol import install_kit
from rgym_core.grading import resolve_includes

TASKS_DIR = Path(__file__).resolve().parents[1] / "rgym_task_gametheory" / "tasks"
TASKS = {"mlgym/prisoners-dilemma": "prisoners-dilemma", "mlgym/battle-of-sexes": "battle-of-sexes",
         "mlgym/blotto": "blotto"}
#: The grader secret of every evaluation folder these tests lay out: new at each test run,
#: so the recorded baselines are checked against a secret they were not measured with.
SECRET = os.urandom(32)


def _layout(tmp: Path, folder: str, strategy: str | None) -> Path:
    """An evaluation folder as the runner lays it out."""
    root = tmp / f"eval-{folder}"
    (root / "submission").mkdir(parents=True)
    shutil.copytree(TASKS_DIR / folder / "grader", root / "grader")
    for name, source in resolve_includes(load_task(TASKS_DIR / folder)).items():
        shutil.copy(source, root / "grader" / name)
    install_kit(root / "grader")
    (root / "data").mkdir()
    (root / "private").mkdir()
    (root / "private" / ".rgym-secret").write_text(SECRET.hex() + "\n")
    if strategy is not None:
        (root / "submission" / "strategy.py").write_text(strategy)
    return root


def _env(root: Path, **extra: str) -> dict[str, str]:
    env = {"PATH": os.environ["PATH"], "RGYM_SUBMISSION_DIR": str(root / "submission"),
           "RGYM_GRADER_DIR": str(root / "grader"), "RGYM_DATA_DIR": str(root / "data"),
           "RGYM_PRIVATE_DIR": str(root / "private"), "RGYM_SCORES_FILE": str(root / "scores.json"),
           "RGYM_GRADE_KIND": "validate", "PYTHONDONTWRITEBYTECODE": "1"}
    env.update(extra)
    return env


def _start(tmp: Path, folder: str, strategy: str | None, **extra: str) -> tuple[subprocess.Popen, Path]:
    root = _layout(tmp, folder, strategy)
    proc = subprocess.Popen([sys.executable, "grader/evaluate.py"], cwd=root, env=_env(root, **extra),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return proc, root


def _finish(proc: subprocess.Popen, root: Path) -> dict:
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out.decode()
    return json.loads((root / "scores.json").read_text())


def grade(tmp: Path, folder: str, strategy: str | None, games: int = 200, **extra: str) -> dict:
    return _finish(*_start(tmp, folder, strategy, RGYM_GAMETHEORY_GAMES=str(games), **extra))


def starter(folder: str) -> str:
    return (TASKS_DIR / folder / "starter" / "strategy.py").read_text()


def scripted_strategy(folder: str) -> str:
    """The improved strategy the task's scripted actions write."""
    spec = yaml.safe_load((TASKS_DIR / folder / "task.yaml").read_text())
    command = spec["scripted_actions"][0]["args"]["command"]
    return command.split("<<'PY'\n", 1)[1].rsplit("PY", 1)[0]


# -- the pack ------------------------------------------------------------------------


def test_plugin_registers_the_three_tasks() -> None:
    tasks = {t.id: t for t in rgym_register_tasks()}
    assert set(tasks) == set(TASKS)
    for task in tasks.values():
        assert task.primary_metric.name == "Score" and task.primary_metric.direction == "maximize"
        assert (task.root / "starter" / "strategy.py").is_file()
        assert (task.root / "grader" / "evaluate.py").is_file()
    for name in ("arena.py", "arena_worker.py"):
        shared = {resolve_includes(task)[name] for task in tasks.values()}
        assert shared == {(TASKS_DIR / "_shared" / name).resolve()}


def test_check_pack_passes() -> None:
    report = check_pack(TASKS_DIR.parent.parent)
    assert report.ok, [f for f in report.findings if not f.ok]
    assert {"grader.include '../_shared/arena.py'"} <= {f.message for f in report.findings}


def test_opponent_code_is_not_in_the_starter_files() -> None:
    for folder in TASKS.values():
        starter_dir = TASKS_DIR / folder / "starter"
        names = {p.name for p in starter_dir.iterdir()}
        assert names == {"strategy.py", "evaluate.py"}
        text = "".join(p.read_text() for p in starter_dir.iterdir())
        assert "target_column_strategy" not in text and "def opponent" not in text
        assert "_tit_for_two_tats" not in text and "rgym-" not in text


# -- scores --------------------------------------------------------------------------


@pytest.mark.slow
def test_starter_scores_equal_the_recorded_baselines_and_mlgyms(tmp_path: Path) -> None:
    """The real configuration (10,000 games, default seed): the recorded baseline
    (within its recorded tolerance), and within three standard errors of MLGym's
    published baseline."""
    for task_id, folder in TASKS.items():
        result = _finish(*_start(tmp_path, folder, starter(folder)))
        task = load_task(TASKS_DIR / TASKS[task_id])
        score, se = result["scores"]["Score"], result["details"]["std_error"]
        assert result["details"]["games"] == 10_000 and result["details"]["seed"] == 0
        assert task.baseline is not None
        assert abs(score - task.baseline_scores["Score"]) <= task.baseline.tolerance_for("Score"), \
            (task_id, score)
        assert abs(score - MLGYM_BASELINES[task_id]) <= 3 * se, (task_id, score, se)


@pytest.mark.slow
@pytest.mark.parametrize("folder", list(TASKS.values()))
def test_recorded_tolerance_covers_the_grader_seeds(tmp_path: Path, folder: str) -> None:
    """The starter graded at other seeds than the recorded one (10,000 games) stays
    within the recorded tolerance, and that tolerance is no narrower than three of
    the grader's standard errors: seed noise never counts as an improvement."""
    task = load_task(TASKS_DIR / folder)
    assert task.baseline is not None
    recorded, tolerance = task.baseline_scores["Score"], task.baseline.tolerance_for("Score")
    for seed in (3, 7, 12):
        result = _finish(*_start(tmp_path / str(seed), folder, starter(folder), RGYM_SEED=str(seed)))
        score, se = result["scores"]["Score"], result["details"]["std_error"]
        assert abs(score - recorded) <= tolerance, (folder, seed, score, recorded, tolerance)
        assert tolerance >= 3 * se, (folder, seed, se, tolerance)


def test_scores_are_seeded(tmp_path: Path) -> None:
    first = grade(tmp_path / "a", "prisoners-dilemma", starter("prisoners-dilemma"), RGYM_SEED="5")
    again = grade(tmp_path / "b", "prisoners-dilemma", starter("prisoners-dilemma"), RGYM_SEED="5")
    other = grade(tmp_path / "c", "prisoners-dilemma", starter("prisoners-dilemma"), RGYM_SEED="6")
    assert first["scores"] == again["scores"] and first["details"]["seed"] == 5
    assert first["scores"] != other["scores"]
    assert first["details"]["std_error"] > 0


@pytest.mark.parametrize("folder", list(TASKS.values()))
def test_improved_strategy_beats_the_baseline(tmp_path: Path, folder: str) -> None:
    result = grade(tmp_path, folder, scripted_strategy(folder), games=400)
    baseline = load_task(TASKS_DIR / folder).baseline_scores["Score"]
    score, se = result["scores"]["Score"], result["details"]["std_error"]
    assert score > baseline + 3 * se, (score, se, baseline)


def test_strategy_state_and_numpy_are_allowed(tmp_path: Path) -> None:
    strategy = ("import numpy as np\nSEEN = []\n"
                "def row_strategy(history):\n"
                "    print('debug output must not break the grader')\n"
                "    SEEN.append(len(history))\n"
                "    return int(np.random.randint(0, 2))\n")
    result = grade(tmp_path, "battle-of-sexes", strategy, games=50)
    assert "error" not in result and 0 <= result["scores"]["Score"] <= 2


# -- failures ------------------------------------------------------------------------


FAILURES = [
    ("prisoners-dilemma", "def row_strategy(history):\n    raise RuntimeError('boom')\n",
     ["raised an exception", "RuntimeError: boom"]),
    ("prisoners-dilemma", "def row_strategy(history):\n    return 2\n",
     ["invalid move 2", "0 (cooperate) or 1 (defect)"]),
    ("battle-of-sexes", "def row_strategy(history):\n    return 0.5\n",
     ["returned 0.5 (of type float)", "not a move"]),
    ("battle-of-sexes", "def row_strategy(history):\n    return None\n", ["returned None"]),
    ("blotto", "def row_strategy(history):\n    return [21] * 6\n",
     ["126 soldiers", "more than the 120"]),
    ("blotto", "def row_strategy(history):\n    return [130, -10, 0, 0, 0, 0]\n", ["non-negative"]),
    ("blotto", "def row_strategy(history):\n    return [60, 60]\n", ["list of 6"]),
    ("blotto", "def row_strategy(history):\n    return [20.0] * 6\n", ["float"]),
    ("prisoners-dilemma", "def row_strategy(history:\n", ["cannot import row_strategy", "SyntaxError"]),
    ("prisoners-dilemma", "def play(history):\n    return 0\n", ["cannot import row_strategy"]),
    ("prisoners-dilemma", "import os\ndef row_strategy(history):\n    os._exit(3)\n",
     ["exited unexpectedly (exit code 3)"]),
    ("prisoners-dilemma", "import time\ndef row_strategy(history):\n    time.sleep(0.6)\n    return 0\n",
     ["too slow", "more than the limit of 0.3 s"]),
    ("prisoners-dilemma", "def row_strategy(history):\n    while True:\n        pass\n",
     ["did not answer within", "stuck in a loop"]),
]


@pytest.mark.parametrize(("folder", "strategy", "phrases"), FAILURES)
def test_a_broken_strategy_gets_a_clear_error(tmp_path: Path, folder: str, strategy: str,
                                              phrases: list[str]) -> None:
    result = grade(tmp_path, folder, strategy, games=20, RGYM_GAMETHEORY_CALL_LIMIT_S="0.3")
    assert "scores" not in result
    for phrase in phrases:
        assert phrase in result["error"], result["error"]
    assert "missing_submission" not in result


def test_missing_strategy_is_a_missing_submission(tmp_path: Path) -> None:
    result = grade(tmp_path, "blotto", None)
    assert result["missing_submission"] is True and "strategy.py" in result["error"]


def test_strategy_sees_neither_grader_files_nor_seed(tmp_path: Path) -> None:
    """A strategy that looks for the opponent or the seed where it runs finds nothing."""
    strategy = ("import os, pathlib\n"
                "here = pathlib.Path.cwd()\n"
                "secret = 'def _tit_for' + '_two_tats'\n"
                "found = [str(p) for p in here.rglob('*.py') if secret in p.read_text()]\n"
                "found += [str(p) for p in (here.parent / 'grader', here / 'grader') if p.exists()]\n"
                "leaks = found + [k for k in os.environ if k.startswith('RGYM') and k != 'RGYM_WORKER_DIR']\n"
                "def row_strategy(history):\n"
                "    if leaks:\n"
                "        raise RuntimeError(f'found {leaks}')\n"
                "    return 1\n")
    result = grade(tmp_path, "prisoners-dilemma", strategy, games=20, RGYM_SEED="3")
    assert "error" not in result, result.get("error")


# -- the opponent's draws cannot be replayed from public code ------------------------------

#: A strategy that replays the battle-of-sexes opponent: the column player's code (public,
#: in the installed pack) run on a mirror of the grader's generator, advanced in the same
#: order as the grader's (game by game, round by round), so it knows every column move
#: before it is made and matches it.
REPLAY_ATTACK = '''
import random
MIRROR = random.Random({seed_expr})

def opponent(history, rng):
    if not history:
        return 1
    their_first = history[0][0]
    return their_first if rng.random() < 0.8 else 1 - their_first

def row_strategy(history):
    predicted = opponent(history, MIRROR)
    return 0 if not history else predicted
'''


def _attack(seed_expr: str) -> str:
    return REPLAY_ATTACK.format(seed_expr=seed_expr)


def test_the_opponent_cannot_be_replayed_from_public_code(tmp_path: Path) -> None:
    """The attack of an agent that read the pack: every derivation of the opponent's
    generator that public code and seeds allow (the former
    ``Random("rgym-<game>-opponent-<seed>")``, for the default and the documented seeds)
    gains nothing; the same attack with the grader secret in hand wins by far, so only
    the secret stops it."""
    task = load_task(TASKS_DIR / "battle-of-sexes")
    baseline, tolerance = task.baseline_scores["Score"], task.baseline.tolerance_for("Score")
    games = 2000
    for seed in (0, 5):
        public = grade(tmp_path / f"public-{seed}", "battle-of-sexes",
                       _attack(f'"rgym-battle-of-sexes-opponent-{seed}"'), RGYM_SEED=str(seed),
                       games=games)
        assert public["scores"]["Score"] < 1.3, (seed, public["scores"])  # no better than chance
        with_secret = grade(
            tmp_path / f"secret-{seed}", "battle-of-sexes",
            _attack("int.from_bytes(__import__('hashlib').sha256(bytes.fromhex("
                    f"'{SECRET.hex()}') + b'\\0' + b'battle-of-sexes-opponent-{seed}')"
                    ".digest(), 'big')"), RGYM_SEED=str(seed), games=games)
        # Knowing every column move: 0 in round 1, then 0.8 x 2 + 0.2 x 1 in rounds 2-10.
        assert with_secret["scores"]["Score"] > 1.6, (seed, with_secret["scores"])
        assert with_secret["scores"]["Score"] > baseline + 10 * tolerance


def test_the_grader_refuses_to_run_without_its_secret(tmp_path: Path) -> None:
    root = _layout(tmp_path, "prisoners-dilemma", starter("prisoners-dilemma"))
    (root / "private" / ".rgym-secret").unlink()
    proc = subprocess.run([sys.executable, "grader/evaluate.py"], cwd=root, env=_env(root),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and not (root / "scores.json").exists()
    assert "private/.rgym-secret: no grader secret" in proc.stderr
