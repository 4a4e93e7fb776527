"""Grader of mlgym/battle-of-sexes (hidden from the agent).

Payoffs as in MLGym: both choose 0 -> row 2, column 1; both choose 1 -> row 1,
column 2; otherwise 0 for both.  The column player opens with 1, then repeats
the row player's first move of the game with probability 0.8 (and plays the
other move otherwise).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from arena import grade  # noqa: E402

PAYOFFS = {(0, 0): (2.0, 1.0), (1, 1): (1.0, 2.0), (0, 1): (0.0, 0.0), (1, 0): (0.0, 0.0)}


def opponent(history, rng: random.Random) -> int:
    if not history:
        return 1
    their_first = history[0][0]
    return their_first if rng.random() < 0.8 else 1 - their_first


def payoff(row, col):
    return PAYOFFS[(row, col)]


def check_move(move) -> str | None:
    if move not in (0, 1) or not isinstance(move, int):
        return "a move is the int 0 or 1"
    return None


if __name__ == "__main__":
    grade("battle-of-sexes", opponent, payoff, check_move,
          "opens with 1, then mostly follows the row player's first move")
