"""Your strategy for the iterated prisoner's dilemma. Edit row_strategy (keep its name
and signature): it is imported and called by the grader once per round."""

import random


def row_strategy(history):
    """Return your next move: 0 to cooperate, 1 to defect.

    history is a list of (your_move, partner_move) tuples, one per earlier round
    of the current game (empty in the first round).
    """
    if not history:
        return random.choice((0, 1))
    my_last, partner_last = history[-1]
    draw = random.random()
    if partner_last == 1:
        # The partner defected: mostly defect back.
        if draw < 0.75:
            return 1
        return my_last if draw < 0.9 else 0
    # The partner cooperated: mostly cooperate.
    if draw < 0.6:
        return 0
    return my_last if draw < 0.9 else 1
