"""Grader of mlgym/mountain-car-continuous (hidden from the agent): see rl_grading.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rl_grading import grade  # noqa: E402

if __name__ == "__main__":
    grade("MountainCarContinuous-v0", horizon=200)
