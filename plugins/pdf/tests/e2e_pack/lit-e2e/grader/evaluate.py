"""Grader of the literature end-to-end test task: 1.0 when notes.txt is not empty."""

import json
import os
from pathlib import Path

scores_file = Path(os.environ["RGYM_SCORES_FILE"])
notes = Path(os.environ["RGYM_SUBMISSION_DIR"]) / "notes.txt"
if not notes.is_file():
    scores_file.write_text(json.dumps({"error": "notes.txt not found in the workspace",
                                       "missing_submission": True}))
else:
    text = notes.read_text()
    scores_file.write_text(json.dumps({"scores": {"score": 1.0 if text.strip() else 0.0}}))
