"""Your strategy for Colonel Blotto. Edit row_strategy (keep its name and signature):
it is imported and called by the grader once per round."""

import random

SOLDIERS = 120
FIELDS = 6


def row_strategy(history):
    """Return your allocation: a list of 6 non-negative ints summing to at most 120.

    history is a list of (your_allocation, opponent_allocation) tuples, one per
    earlier round of the current game (empty in the first round).
    """
    allocation = [0] * FIELDS
    # Reinforce a few random battlefields with 10 to 30 soldiers each.
    for _ in range(random.randint(1, FIELDS)):
        allocation[random.randint(0, FIELDS - 1)] += random.randint(10, 30)
    # Spread what is left over the battlefields not yet reinforced.
    left = SOLDIERS - sum(allocation)
    if left > 0:
        for field in [i for i in range(FIELDS) if allocation[i] == 0]:
            allocation[field] = random.randint(0, left)
            left -= allocation[field]
    # Scale to exactly 120 soldiers; rounding leftovers go to a random battlefield.
    total = sum(allocation)
    allocation = [int(x * SOLDIERS / total) for x in allocation]
    while sum(allocation) != SOLDIERS:
        allocation[random.randint(0, FIELDS - 1)] += SOLDIERS - sum(allocation)
    return allocation
