"""Grader: accuracy 1.0 when answer.txt says hello."""

import json
import os
from pathlib import Path

answer = Path(os.environ["RGYM_SUBMISSION_DIR"]) / "answer.txt"
out = Path(os.environ["RGYM_SCORES_FILE"])
if not answer.exists():
    out.write_text(json.dumps({"error": "answer.txt not found", "missing_submission": True}))
else:
    correct = answer.read_text().strip() == "hello"
    out.write_text(json.dumps({"scores": {"accuracy": 1.0 if correct else 0.0}}))
