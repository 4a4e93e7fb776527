"""Generates the 3-SAT instance sets of ``mlgym/3sat``, deterministically.

MLGym never published its instance file, so this pack makes its own: uniform
random 3-SAT formulas at the satisfiability threshold (clauses = round(4.26 x
variables)), kept until each size has as many satisfiable as unsatisfiable
formulas, labelled by solving them with the task's DPLL solver and a strong
heuristic.  The shuffling draws only on ``random.Random(seed).random()``, whose
sequence Python guarantees across versions, so the files are byte-identical
everywhere.

    python -m rgym_task_sat.generate           # rewrite both files, print the checksums
    python -m rgym_task_sat.generate --check   # regenerate in memory, compare to the files

The evaluation set goes to the grader's hidden files (``grader/instances.json``;
its SHA-256 is recorded in ``grader/evaluate.py`` and checked before every
grading); a smaller development set with another seed goes to the starter files.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from random import Random
from types import ModuleType
from typing import Any

TASK_DIR = Path(__file__).resolve().parent / "tasks" / "3sat"
RATIO = 4.26

#: (file, seed, {variables: formulas per label})
SETS: dict[str, tuple[int, dict[int, int]]] = {
    "grader/instances.json": (2026, {20: 12, 30: 10, 40: 6, 50: 4}),
    "starter/dev_instances.json": (7, {20: 4, 30: 3, 40: 2}),
}


def _solver() -> ModuleType:
    path = TASK_DIR / "starter" / "solver.py"
    spec = importlib.util.spec_from_file_location("rgym_sat_reference_solver", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def jeroslow_wang(clauses: list[list[int]], assignments: dict[int, bool], *_: Any) -> tuple[int, bool]:
    """Two-sided Jeroslow-Wang: the literal with the largest sum of 2^-|clause|
    over the open clauses (counting only unassigned literals)."""
    score: dict[int, float] = {}
    for clause in clauses:
        free = [lit for lit in clause if abs(lit) not in assignments]
        weight = 2.0 ** -len(free)
        for lit in free:
            score[lit] = score.get(lit, 0.0) + weight
    best = max(sorted(score), key=lambda lit: score[lit] + score.get(-lit, 0.0))
    positive = score.get(abs(best), 0.0) >= score.get(-abs(best), 0.0)
    return abs(best), positive


def random_formula(rng: Random, num_vars: int) -> list[list[int]]:
    """A uniform random 3-CNF formula with round(4.26 * num_vars) clauses."""
    clauses = []
    for _ in range(round(RATIO * num_vars)):
        chosen: list[int] = []
        while len(chosen) < 3:
            var = 1 + int(rng.random() * num_vars)
            if var not in chosen:
                chosen.append(var)
        clauses.append([v if rng.random() < 0.5 else -v for v in chosen])
    return clauses


def generate(seed: int, sizes: dict[int, int]) -> dict[str, Any]:
    """An instance set: for each size, ``sizes[n]`` SAT and as many UNSAT formulas."""
    solver = _solver()
    rng = Random(seed)
    instances = []
    for num_vars, per_label in sorted(sizes.items()):
        kept = {"SAT": 0, "UNSAT": 0}
        while min(kept.values()) < per_label:
            clauses = random_formula(rng, num_vars)
            run = solver.DPLL(clauses, jeroslow_wang)
            label = "SAT" if run.solve() else "UNSAT"
            if kept[label] >= per_label:
                continue
            kept[label] += 1
            instances.append({"id": f"n{num_vars}-{label.lower()}-{kept[label]:02d}",
                              "num_vars": num_vars, "label": label, "clauses": clauses})
    return {"format": "rgym-3sat-1", "seed": seed, "ratio": RATIO,
            "sizes": {str(k): v for k, v in sorted(sizes.items())}, "instances": instances}


def dumps(instance_set: dict[str, Any]) -> bytes:
    """The canonical bytes of an instance set (one instance per line)."""
    head = {k: v for k, v in instance_set.items() if k != "instances"}
    lines = [json.dumps(i, separators=(",", ":")) for i in instance_set["instances"]]
    text = json.dumps(head, separators=(",", ":"))[:-1] + ',"instances":[\n' + ",\n".join(lines)
    return (text + "\n]}\n").encode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="regenerate in memory and compare with the files; write nothing")
    args = parser.parse_args(argv)
    status = 0
    for name, (seed, sizes) in SETS.items():
        data = dumps(generate(seed, sizes))
        path = TASK_DIR / name
        if args.check:
            same = path.is_file() and path.read_bytes() == data
            print(f"{name}: {'matches' if same else 'DIFFERS from'} the generator "
                  f"(sha256 {sha256(data)})")
            status |= 0 if same else 1
        else:
            path.write_bytes(data)
            print(f"{name}: {len(data)} bytes, sha256 {sha256(data)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
