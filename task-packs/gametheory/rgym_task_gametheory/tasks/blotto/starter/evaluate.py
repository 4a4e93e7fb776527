"""Try your strategy locally: python evaluate.py

It plays row_strategy against a few simple, visible opponents. These are NOT the
opponent of the real evaluation (it stays hidden); use the `validate` tool for
your real score.
"""

import random
import statistics

from strategy import row_strategy

SOLDIERS, FIELDS = 120, 6


def even(history):
    return [SOLDIERS // FIELDS] * FIELDS


def three_fronts(history):
    fields = random.sample(range(FIELDS), 3)
    return [40 if i in fields else 0 for i in range(FIELDS)]


def check(allocation):
    ok = (isinstance(allocation, list) and len(allocation) == FIELDS
          and all(isinstance(x, int) and x >= 0 for x in allocation)
          and sum(allocation) <= SOLDIERS)
    if not ok:
        raise SystemExit(f"invalid allocation {allocation!r}: 6 non-negative ints, sum <= 120")


def outcome(mine, theirs):
    won = sum(m > t for m, t in zip(mine, theirs))
    lost = sum(m < t for m, t in zip(mine, theirs))
    return (won > lost) - (won < lost)


def play(opponent, games=1000, rounds=10):
    means = []
    for _ in range(games):
        history = []
        for _ in range(rounds):
            mine, theirs = row_strategy(list(history)), opponent(history)
            check(mine)
            history.append((mine, theirs))
        means.append(sum(outcome(m, t) for m, t in history) / rounds)
    return statistics.mean(means)


if __name__ == "__main__":
    random.seed(0)
    for opponent in (even, three_fronts):
        print(f"against {opponent.__name__:12s} mean payoff per round: {play(opponent):.3f}")
