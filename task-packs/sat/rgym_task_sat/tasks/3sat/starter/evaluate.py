"""Try your heuristic locally: python evaluate.py [instances.json]

Solves the development formulas in dev_instances.json with solver.py and your
heuristic_fn, checks every answer, and prints the time and the number of
decisions. The real evaluation uses other, hidden formulas of the same kind
(random 3-SAT at the threshold, 20 to 50 variables, half satisfiable); use the
`validate` tool for your real score.
"""

import json
import sys
import time

from heuristic import heuristic_fn
from solver import DPLL


def main(path="dev_instances.json"):
    with open(path) as fh:
        instances = json.load(fh)["instances"]
    total_time, decisions = 0.0, 0
    for inst in instances:
        start = time.perf_counter()
        run = DPLL(inst["clauses"], heuristic_fn)
        sat = run.solve()
        total_time += time.perf_counter() - start
        decisions += run.num_decisions
        if sat != (inst["label"] == "SAT"):
            raise SystemExit(f"{inst['id']}: wrong answer {'SAT' if sat else 'UNSAT'}")
        if sat and not all(any(run.model[abs(lit)] == (lit > 0) for lit in clause)
                           for clause in inst["clauses"]):
            raise SystemExit(f"{inst['id']}: the model does not satisfy the formula")
    print(json.dumps({"Time": round(total_time, 3), "Decisions": decisions,
                      "formulas": len(instances)}))


if __name__ == "__main__":
    main(*sys.argv[1:])
