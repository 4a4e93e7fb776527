"""Tests of the 3-SAT pack: instance generation and checksums, labels checked
by an independent solver, and the grader run as the runner runs it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rgym_task_sat import generate
from rgym_task_sat.plugin import rgym_register_tasks

from rgym_core import load_task
from rgym_core.checks import check_pack
from rgym_core.grader_protocol import install_kit
from rgym_core.grading import resolve_includes

TASK_DIR = Path(__file__).resolve().parents[1] / "rgym_task_sat" / "tasks" / "3sat"
GRADER = TASK_DIR / "grader"
STARTER = TASK_DIR / "starter"
#: The grader secret of the evaluation folders laid out here: new at each test run, so
#: the recorded baseline is checked on formulas it was not measured on.
SECRET = os.urandom(32)


def _layout(tmp: Path, heuristic: str | None, grader: Path = GRADER,
            secret: bytes | None = SECRET) -> Path:
    root = tmp / "eval"
    (root / "submission").mkdir(parents=True)
    shutil.copytree(grader, root / "grader")
    for name, source in resolve_includes(load_task(TASK_DIR)).items():
        shutil.copy(source, root / "grader" / name)
    install_kit(root / "grader")
    (root / "data").mkdir()
    (root / "private").mkdir()
    if secret is not None:
        (root / "private" / ".rgym-secret").write_text(secret.hex() + "\n")
    shutil.copy(STARTER / "solver.py", root / "submission" / "solver.py")
    shutil.copy(STARTER / "heuristic.py", root / "submission" / "heuristic_base.py")
    if heuristic is not None:
        (root / "submission" / "heuristic.py").write_text(heuristic)
    return root


def run_grader(tmp: Path, heuristic: str | None, *, grader: Path = GRADER,
               **extra: str) -> tuple[int, str, dict | None]:
    root = _layout(tmp, heuristic, grader)
    env = {"PATH": os.environ["PATH"], "RGYM_SUBMISSION_DIR": str(root / "submission"),
           "RGYM_GRADER_DIR": str(root / "grader"), "RGYM_DATA_DIR": str(root / "data"),
           "RGYM_PRIVATE_DIR": str(root / "private"), "RGYM_SCORES_FILE": str(root / "scores.json"),
           "RGYM_GRADE_KIND": "submit", **extra}
    proc = subprocess.run([sys.executable, "grader/evaluate.py"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    scores = root / "scores.json"
    return proc.returncode, proc.stderr, json.loads(scores.read_text()) if scores.exists() else None


def grade(tmp: Path, heuristic: str | None, **extra: str) -> dict:
    code, stderr, result = run_grader(tmp, heuristic, **extra)
    assert code == 0, stderr
    assert result is not None
    return result


def load(name: str) -> list[dict]:
    return json.loads((TASK_DIR / name).read_text())["instances"]


# -- an independent solver, to check the labels -----------------------------------------


def independent_sat(clauses: list[list[int]]) -> dict[int, bool] | None:
    """A model, or None when unsatisfiable (plain recursive DPLL on clause sets,
    sharing no code with the pack's solver)."""
    def simplify(cnf: list[frozenset[int]], lit: int) -> list[frozenset[int]] | None:
        out = []
        for clause in cnf:
            if lit in clause:
                continue
            reduced = clause - {-lit}
            if not reduced:
                return None
            out.append(reduced)
        return out

    def search(cnf: list[frozenset[int]], model: dict[int, bool]) -> dict[int, bool] | None:
        while True:
            unit = next((c for c in cnf if len(c) == 1), None)
            if unit is None:
                break
            (lit,) = unit
            model = {**model, abs(lit): lit > 0}
            cnf = simplify(cnf, lit)
            if cnf is None:
                return None
        if not cnf:
            return model
        counts: dict[int, int] = {}
        for clause in cnf:
            for lit in clause:
                counts[lit] = counts.get(lit, 0) + 1
        lit = max(sorted(counts), key=lambda x: counts[x])
        for choice in (lit, -lit):
            reduced = simplify(cnf, choice)
            if reduced is not None:
                found = search(reduced, {**model, abs(choice): choice > 0})
                if found is not None:
                    return found
        return None

    return search([frozenset(c) for c in clauses], {})


# -- the pack ----------------------------------------------------------------------------


def test_plugin_registers_the_task() -> None:
    (task,) = rgym_register_tasks()
    assert task.id == "mlgym/3sat"
    assert task.primary_metric.name == "Time" and task.primary_metric.direction == "minimize"
    assert task.metric("Decisions").direction == "minimize"


def test_the_development_file_regenerates_byte_for_byte(capsys: pytest.CaptureFixture[str]) -> None:
    assert generate.main(["--check"]) == 0, capsys.readouterr().out


def drawn_secret(key: bytes = SECRET) -> bytes:
    """What the grader kit's ``context().secret("instances")`` gives for the task key ``key``."""
    return hashlib.sha256(key + b"\0instances").digest()


def evaluation(key: bytes = SECRET) -> list[dict]:
    """The evaluation set the grader draws with the task key ``key``."""
    return generate.generator().evaluation_set(drawn_secret(key))["instances"]


def test_no_instance_file_ships_with_the_pack() -> None:
    """The evaluation formulas exist only while a grading runs: nothing in the pack,
    the grader's folder included, holds them."""
    shipped = [p for p in TASK_DIR.parents[2].rglob("*.json") if p.name != "dev_instances.json"]
    assert not [p for p in shipped if "clauses" in p.read_text()], shipped


def test_the_public_generator_with_every_documented_seed_misses_the_evaluation_set(
        tmp_path: Path) -> None:
    """The attack of an agent that read the pack: rebuild the hidden formulas from the
    generator and the seeds public code names (the development seed 7, the former
    evaluation seed 2026, and every small seed) and look answers up.  Not one formula
    of what the grader really graded is among them; two gradings with one secret grade
    the same formulas (a regrade reproduces), another secret grades others."""
    first = grade(tmp_path / "a", scripted_heuristic())
    again = grade(tmp_path / "b", scripted_heuristic())
    digest = first["details"]["instances_sha256"]
    assert again["details"]["instances_sha256"] == digest
    assert generate.generator().sha256(generate.generator().dumps(
        generate.generator().evaluation_set(drawn_secret()))) == digest
    gen = generate.generator()
    graded = {json.dumps(i["clauses"]) for i in evaluation()}
    for seed in [7, 2026, *range(0, 64)]:
        drawn = gen.generate(seed, gen.EVALUATION_SIZES)
        assert not graded & {json.dumps(i["clauses"]) for i in drawn["instances"]}, seed
        assert gen.sha256(gen.dumps(drawn)) != digest
    other = _layout(tmp_path / "c", scripted_heuristic(), secret=os.urandom(32))
    env = {"PATH": os.environ["PATH"], "RGYM_SUBMISSION_DIR": str(other / "submission"),
           "RGYM_SCORES_FILE": str(other / "scores.json")}
    subprocess.run([sys.executable, "grader/evaluate.py"], cwd=other, env=env, check=True,
                   timeout=300)
    assert json.loads((other / "scores.json").read_text())["details"]["instances_sha256"] != digest


def test_instance_sets_are_balanced_near_the_threshold_and_disjoint() -> None:
    drawn, dev = evaluation(), load("starter/dev_instances.json")
    assert len(drawn) == 64
    for num_vars in (20, 30, 40, 50):
        labels = [i["label"] for i in drawn if i["num_vars"] == num_vars]
        assert labels.count("SAT") == labels.count("UNSAT") > 0
    for inst in drawn + dev:
        assert len(inst["clauses"]) == round(4.26 * inst["num_vars"])
        assert all(len(set(map(abs, c))) == 3 for c in inst["clauses"])
    dev_formulas = {json.dumps(i["clauses"]) for i in dev}
    assert not dev_formulas & {json.dumps(i["clauses"]) for i in drawn}


def test_labels_agree_with_an_independent_solver() -> None:
    for inst in evaluation() + load("starter/dev_instances.json"):
        model = independent_sat(inst["clauses"])
        assert (model is not None) == (inst["label"] == "SAT"), inst["id"]
        if model is not None:
            assert all(any(model.get(abs(lit), False) == (lit > 0) for lit in c)
                       for c in inst["clauses"])


def test_grader_solver_is_the_starter_solver() -> None:
    includes = resolve_includes(load_task(TASK_DIR))
    assert includes == {"reference_solver.py": (STARTER / "solver.py").resolve(),
                        "baseline_heuristic.py": (STARTER / "heuristic.py").resolve()}
    assert not (GRADER / "reference_solver.py").exists()


def test_check_pack_passes() -> None:
    report = check_pack(TASK_DIR.parents[2])
    assert report.ok, [f for f in report.findings if not f.ok]


def test_starter_local_evaluation_runs() -> None:
    out = subprocess.run([sys.executable, "evaluate.py"], cwd=STARTER, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["formulas"] == 18


# -- grading ---------------------------------------------------------------------------


def scripted_heuristic() -> str:
    spec = yaml.safe_load((TASK_DIR / "task.yaml").read_text())
    command = spec["scripted_actions"][0]["args"]["command"]
    return command.split("<<'PY'\n", 1)[1].rsplit("PY", 1)[0]


def test_starter_heuristic_reproduces_the_recorded_baseline(tmp_path: Path) -> None:
    """Decisions are exact; the grader solves with its own solver.py, whatever
    the workspace's says (here a fake one that claims SAT for everything)."""
    root = _layout(tmp_path, (STARTER / "heuristic.py").read_text())
    (root / "submission" / "solver.py").write_text(
        "class DPLL:\n    def __init__(self, *a):\n        self.num_decisions = 0\n"
        "    def solve(self):\n        return True\n")
    env = {"PATH": os.environ["PATH"], "RGYM_SUBMISSION_DIR": str(root / "submission"),
           "RGYM_SCORES_FILE": str(root / "scores.json")}
    subprocess.run([sys.executable, "grader/evaluate.py"], cwd=root, env=env, check=True,
                   timeout=300)
    result = json.loads((root / "scores.json").read_text())
    baseline = load_task(TASK_DIR).baseline_scores
    assert result["scores"]["Decisions"] == baseline["Decisions"]
    assert result["scores"]["Time"] > 0 and result["details"]["correct"] == 64


def test_time_is_normalised_by_the_baseline_timed_in_the_same_run(tmp_path: Path) -> None:
    """Time = the agent's seconds x 2.761 / the starter's seconds in this grading run, so
    the starter scores the recorded baseline within its tolerance whatever the machine
    (the raw seconds swing 1.5-5.4 s with load on the 2-core machine)."""
    result = grade(tmp_path, (STARTER / "heuristic.py").read_text())
    task = load_task(TASK_DIR)
    assert task.baseline is not None
    details = result["details"]
    assert details["time_s"] > 0 and details["baseline_time_s"] > 0
    expected = details["time_s"] / details["baseline_time_s"] * details["reference_baseline_s"]
    assert abs(result["scores"]["Time"] - expected) <= 0.002
    assert abs(result["scores"]["Time"] - task.baseline_scores["Time"]) <= task.baseline.tolerance_for("Time")


def test_improved_heuristic_needs_fewer_decisions(tmp_path: Path) -> None:
    result = grade(tmp_path, scripted_heuristic())
    assert result["scores"]["Decisions"] < load_task(TASK_DIR).baseline_scores["Decisions"] / 3


FAILURES = [
    ("def heuristic_fn(*args):\n    raise KeyError('oops')\n", ["raised an exception", "KeyError"]),
    ("def heuristic_fn(clauses, assignments, *rest):\n    return 'x1'\n", ["must return a tuple"]),
    ("def heuristic_fn(clauses, assignments, *rest):\n    return 10**6, True\n", ["not in the formula"]),
    ("def heuristic_fn(clauses, assignments, *rest):\n"
     "    return abs(clauses[0][0]), 'yes'\n", ["must be True or False"]),
    ("def heuristic_fn(clauses, assignments, *rest):\n"
     "    assigned = [v for v in assignments]\n"
     "    return (assigned[0] if assigned else abs(clauses[0][0])), True\n",
     ["already assigned"]),
    ("import solver\nsolver.DPLL.solve = lambda self: True\n"
     "def heuristic_fn(*args):\n    return None\n",
     ["wrong answer", "answered SAT but the formula is UNSAT"]),
    ("import solver\nfrom heuristic_base import heuristic_fn\nreal = solver.DPLL.solve\n"
     "def claim(self):\n    sat = real(self)\n    self.model = None\n    return sat\n"
     "solver.DPLL.solve = claim\n", ["wrong answer", "without a model"]),
    ("import solver\nfrom heuristic_base import heuristic_fn\nreal = solver.DPLL.solve\n"
     "def claim(self):\n    sat = real(self)\n"
     "    if sat:\n        self.model = {v: not x for v, x in self.model.items()}\n"
     "    return sat\n"
     "solver.DPLL.solve = claim\n", ["wrong answer", "does not satisfy the clause"]),
    ("import solver\nsolver.DPLL.solve = lambda self: False\n"
     "def heuristic_fn(*args):\n    return None\n",
     ["formula n20-unsat-01", "not a search of the reference solver", "must not change the solver"]),
    ("def heuristic_fn(*args):\n    while True:\n        pass\n", ["took more than 1 s", "faster"]),
    ("import nonexistent_module_xyz\n", ["cannot import heuristic_fn", "ModuleNotFoundError"]),
]


@pytest.mark.parametrize(("heuristic", "phrases"), FAILURES)
def test_a_broken_heuristic_gets_a_clear_error(tmp_path: Path, heuristic: str,
                                               phrases: list[str]) -> None:
    result = grade(tmp_path, heuristic, RGYM_SAT_INSTANCE_LIMIT_S="1")
    assert "scores" not in result
    for phrase in phrases:
        assert phrase in result["error"], result["error"]


def test_missing_heuristic_is_a_missing_submission(tmp_path: Path) -> None:
    result = grade(tmp_path, None)
    assert result["missing_submission"] is True and "heuristic.py" in result["error"]


def test_the_grader_refuses_to_run_without_its_secret(tmp_path: Path) -> None:
    root = _layout(tmp_path, (STARTER / "heuristic.py").read_text(), secret=None)
    env = {"PATH": os.environ["PATH"], "RGYM_SUBMISSION_DIR": str(root / "submission"),
           "RGYM_SCORES_FILE": str(root / "scores.json")}
    proc = subprocess.run([sys.executable, "grader/evaluate.py"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and not (root / "scores.json").exists()
    assert "private/.rgym-secret: no grader secret" in proc.stderr
