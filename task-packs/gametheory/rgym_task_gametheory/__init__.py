"""rgym task pack: MLGym's game-theory tasks, with hidden opponents and seeded grading."""

from __future__ import annotations

#: MLGym's published baselines (``baseline_scores`` of its task configs), which the
#: starter strategies' scores under this pack's grader must match within 3 standard errors.
MLGYM_BASELINES: dict[str, float] = {
    "mlgym/prisoners-dilemma": 2.3716301918029785,
    "mlgym/battle-of-sexes": 1.0226699113845825,
    "mlgym/blotto": -0.24797001481056213,
}
