"""Grader of mlgym/blotto (hidden from the agent).

Colonel Blotto as in MLGym: 6 battlefields, 120 soldiers.  Whoever wins more
battlefields (more soldiers there) wins the round: +1 / -1, a draw is 0.  The
column player draws 6 integers in [0, 120], scales them to sum to 120
(rounding down), and gives the missing soldiers to random battlefields.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from arena import grade  # noqa: E402

FIELDS = 6
SOLDIERS = 120


def opponent(history, rng: random.Random) -> list[int]:
    raw = [rng.randint(0, SOLDIERS) for _ in range(FIELDS)]
    total = sum(raw)
    if total == 0:
        return [SOLDIERS // FIELDS] * FIELDS
    allocation = [int(x * SOLDIERS / total) for x in raw]
    while sum(allocation) != SOLDIERS:
        allocation[rng.randint(0, FIELDS - 1)] += SOLDIERS - sum(allocation)
    return allocation


def payoff(row, col):
    row_fields = sum(1 for r, c in zip(row, col, strict=True) if r > c)
    col_fields = sum(1 for r, c in zip(row, col, strict=True) if r < c)
    if row_fields == col_fields:
        return 0.0, 0.0
    return (1.0, -1.0) if row_fields > col_fields else (-1.0, 1.0)


def check_move(move) -> str | None:
    if not isinstance(move, list) or len(move) != FIELDS:
        return f"an allocation is a list of {FIELDS} non-negative ints"
    if not all(isinstance(x, int) and x >= 0 for x in move):
        return "every battlefield needs a non-negative int number of soldiers"
    if sum(move) > SOLDIERS:
        return f"the allocation uses {sum(move)} soldiers, more than the {SOLDIERS} available"
    return None


if __name__ == "__main__":
    grade("blotto", opponent, payoff, check_move,
          "a random allocation of the 120 soldiers, drawn anew every round")
