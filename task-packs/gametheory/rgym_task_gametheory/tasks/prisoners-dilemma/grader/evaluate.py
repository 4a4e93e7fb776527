"""Grader of mlgym/prisoners-dilemma (hidden from the agent).

Payoffs as in MLGym (0 = cooperate, 1 = defect): both cooperate 3/3, both
defect 1/1, a defector facing a cooperator 5/0.  Every round the column player
draws one of eleven classic strategies at random and plays its move.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from arena import grade  # noqa: E402

PAYOFFS = {(0, 0): (3.0, 3.0), (0, 1): (0.0, 5.0), (1, 0): (5.0, 0.0), (1, 1): (1.0, 1.0)}

# Each opponent strategy sees the history as (row move, column move) pairs; the
# row player is "them".


def _noisy(history, rng):
    if not history:
        return 1
    their_last, my_last = history[-1]
    draw = rng.random()
    if draw < 0.3333:
        return 0
    if draw < 0.5:
        return 1
    if draw < 0.9:
        return my_last
    return 1 - their_last


def _tit_for_tat(history, rng):
    return history[-1][0] if history else 0


def _always_cooperate(history, rng):
    return 0


def _always_defect(history, rng):
    return 1


def _coin(history, rng):
    return rng.choice((0, 1))


def _grim_trigger(history, rng):
    return 1 if any(theirs == 1 for theirs, _ in history) else 0


def _pavlov(history, rng):
    if not history:
        return 0
    theirs, mine = history[-1]
    return 0 if theirs == mine else 1


def _tit_for_two_tats(history, rng):
    return 1 if len(history) >= 2 and history[-1][0] == 1 and history[-2][0] == 1 else 0


def _suspicious_tit_for_tat(history, rng):
    return history[-1][0] if history else 1


def _half_cooperate(history, rng):
    return 0 if rng.random() < 0.5 else 1


def _forgiving_tit_for_tat(history, rng):
    if not history:
        return 0
    if len(history) >= 2 and history[-1][0] == 1 and history[-2][0] == 1:
        return 0
    return history[-1][0]


POOL = (_noisy, _tit_for_tat, _always_cooperate, _always_defect, _coin, _grim_trigger,
        _pavlov, _tit_for_two_tats, _suspicious_tit_for_tat, _half_cooperate,
        _forgiving_tit_for_tat)


def opponent(history, rng: random.Random) -> int:
    """Pick one strategy of the pool for this round, uniformly, and play it."""
    return rng.choice(POOL)(history, rng)


def payoff(row, col):
    return PAYOFFS[(row, col)]


def check_move(move) -> str | None:
    if isinstance(move, bool) or move not in (0, 1) or not isinstance(move, int):
        return "a move is the int 0 (cooperate) or 1 (defect)"
    return None


if __name__ == "__main__":
    grade("prisoners-dilemma", opponent, payoff, check_move,
          "each round, one of 11 classic strategies drawn uniformly")
