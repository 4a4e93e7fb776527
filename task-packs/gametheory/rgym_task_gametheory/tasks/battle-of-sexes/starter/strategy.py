"""Your strategy for the iterated battle of the sexes. Edit row_strategy (keep its name
and signature): it is imported and called by the grader once per round."""

import random


def row_strategy(history):
    """Return your next move: 0 or 1.

    history is a list of (your_move, partner_move) tuples, one per earlier round
    of the current game (empty in the first round).
    """
    if not history:
        return 0
    my_last, partner_last = history[-1]
    draw = random.random()
    if draw < 0.1:
        return 0
    if draw < 0.2:
        return 1
    # Mostly follow the partner's last move, sometimes repeat our own.
    return partner_last if draw < 0.9 else my_last
