"""Random 3-SAT instance sets at the satisfiability threshold (hidden from the agent).

MLGym never published its instance file, so the task makes its own: uniform random
3-SAT formulas with round(4.26 x variables) clauses, kept until each size has as many
satisfiable as unsatisfiable formulas, labelled by solving them with the task's DPLL
solver and a strong heuristic.  Only ``random.Random(seed).random()`` is drawn on,
whose sequence Python guarantees across versions, so a seed gives the same bytes
everywhere.

The evaluation set is drawn at every grading from the task's grader secret
(``context().secret("instances")``): the same formulas on every grading on this
machine, so a regrade reproduces its score, and no seed in public code rebuilds
them.  The development set (``starter/dev_instances.json``) has a public seed on
purpose: ``python -m rgym_task_sat.generate`` rewrites it.
"""

from __future__ import annotations

import hashlib
import json
from random import Random
from typing import Any

from reference_solver import DPLL

RATIO = 4.26
#: The evaluation set: {variables: formulas per label} (64 formulas, half satisfiable).
EVALUATION_SIZES = {20: 12, 30: 10, 40: 6, 50: 4}
FORMAT = "rgym-3sat-1"


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


def generate(seed: int, sizes: dict[int, int], *, record_seed: bool = True) -> dict[str, Any]:
    """An instance set: for each size, ``sizes[n]`` SAT and as many UNSAT formulas.
    ``record_seed=False`` leaves the seed out of the set (a secret seed)."""
    rng = Random(seed)
    instances = []
    for num_vars, per_label in sorted(sizes.items()):
        kept = {"SAT": 0, "UNSAT": 0}
        while min(kept.values()) < per_label:
            clauses = random_formula(rng, num_vars)
            label = "SAT" if DPLL(clauses, jeroslow_wang).solve() else "UNSAT"
            if kept[label] >= per_label:
                continue
            kept[label] += 1
            instances.append({"id": f"n{num_vars}-{label.lower()}-{kept[label]:02d}",
                              "num_vars": num_vars, "label": label, "clauses": clauses})
    head: dict[str, Any] = {"format": FORMAT}
    if record_seed:
        head["seed"] = seed
    return {**head, "ratio": RATIO, "sizes": {str(k): v for k, v in sorted(sizes.items())},
            "instances": instances}


def evaluation_set(secret: bytes) -> dict[str, Any]:
    """The hidden evaluation set drawn from ``secret`` (32 bytes): by size, the
    unsatisfiable formulas first (``n20-unsat-01``, ... ``n20-sat-01``, ...)."""
    drawn = generate(int.from_bytes(secret, "big"), EVALUATION_SIZES, record_seed=False)
    drawn["instances"].sort(key=lambda i: (i["num_vars"], i["label"] != "UNSAT", i["id"]))
    return drawn


def dumps(instance_set: dict[str, Any]) -> bytes:
    """The canonical bytes of an instance set (one instance per line)."""
    head = {k: v for k, v in instance_set.items() if k != "instances"}
    lines = [json.dumps(i, separators=(",", ":")) for i in instance_set["instances"]]
    text = json.dumps(head, separators=(",", ":"))[:-1] + ',"instances":[\n' + ",\n".join(lines)
    return (text + "\n]}\n").encode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
