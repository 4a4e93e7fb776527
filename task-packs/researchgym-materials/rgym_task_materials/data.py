"""The dataset of the materials-tokenization pack: ResearchGym's task directory,
verified and split, with the test labels the repository ships moved to the grader.

``researchgym/materials-tokenization`` (form ``researchgym-task``) is prepared by
:func:`prepare_task`.  On top of the common split (``grading/``,
``idea_hint.txt``, ``blocked_urls.yaml`` and ``requirements.txt`` hidden),
:func:`post_build`:

* moves every **test** document out of the workspace, to the same relative
  path under the grader's ``private/``: the SOFC-Exp documents whose metadata
  ``set`` is ``test`` (text, sentence, token, entity/slot and frame files),
  MatScholar's ``test.txt``, the glass/non-glass ``test.csv``, and the
  relation-classification documents listed in ``sfex-test-fnames.txt``;
* writes ``private/mt_corpus.json`` (every NER sentence, test included, read
  with :mod:`rgym_task_materials.mtner.data`) and ``private/vocab_mappings.txt``
  (the normalisation table) from the verified files, so the grader never reads
  data from the agent's workspace;
* copies the pack's evaluation code into the workspace as ``rgym_mtner/`` (the
  overlay adds ``RGYM.md``, ``rgym_baseline.py`` and ``rgym_check.py``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from rgym_researchgym.pack import prepare_dataset
from rgym_researchgym.prepare import TaskLayout

HERE = Path(__file__).parent
TASK = "materials-tokenization"
TASK_DIR = HERE / "tasks" / TASK
MTNER = HERE / "mtner"

SOFC = "eval/classification/ner/datasets/sofc-exp-corpus"
MATSCHOLAR_TEST = "eval/classification/ner/datasets/NER_MATSCHOLAR/test.txt"
GLASS_TEST = "eval/classification/cls/datasets/glass_non_glass/test.csv"
RC = "eval/classification/relation_classification/datasets/datasets"
CORPUS_FILE = "mt_corpus.json"
MAPPINGS_FILE = "vocab_mappings.txt"


def _move(workspace: Path, private: Path, rel: str) -> None:
    source = workspace / rel
    if not source.is_file():
        raise FileNotFoundError(f"{source}: expected in ResearchGym's {TASK} task directory")
    target = private / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(source), target)


def test_files(workspace: Path) -> list[str]:
    """The workspace files (relative paths) that hold test data."""
    from rgym_task_materials.mtner.data import sofc_sets

    out = []
    for doc, split in sorted(sofc_sets(workspace / SOFC).items()):
        if split != "test":
            continue
        out += [p.relative_to(workspace).as_posix() for p in sorted((workspace / SOFC / "texts").glob(f"*_{doc}.txt"))]
        for kind in sorted(p.name for p in (workspace / SOFC / "annotations").iterdir() if p.is_dir()):
            if (workspace / SOFC / "annotations" / kind / f"{doc}.csv").is_file():
                out.append(f"{SOFC}/annotations/{kind}/{doc}.csv")
    out += [MATSCHOLAR_TEST, GLASS_TEST]
    names = (workspace / RC / "sfex-test-fnames.txt").read_text(encoding="utf-8").split()
    for name in names:
        for suffix in (".ann", ".txt"):
            if (workspace / RC / "data" / f"{name}{suffix}").is_file():
                out.append(f"{RC}/data/{name}{suffix}")
    return out


def post_build(workspace: Path, public: Path, private: Path) -> None:
    """See the module docstring."""
    from rgym_task_materials.mtner.data import read_corpus

    (private / MAPPINGS_FILE).write_bytes((workspace / "code" / MAPPINGS_FILE).read_bytes())
    moved = test_files(workspace)
    for rel in moved:
        _move(workspace, private, rel)
    # the corpus, test included: the workspace (train/dev) overlaid with the moved files
    staging = private / ".corpus-staging"
    for rel in (SOFC, "eval/classification/ner/datasets/NER_MATSCHOLAR"):
        shutil.copytree(workspace / rel, staging / rel)
        if (private / rel).is_dir():
            shutil.copytree(private / rel, staging / rel, dirs_exist_ok=True)
    corpus = read_corpus(staging, with_test=True)
    shutil.rmtree(staging)
    (private / CORPUS_FILE).write_text(json.dumps(corpus, ensure_ascii=False, separators=(",", ":")),
                                       encoding="utf-8")
    (private / "moved_test_files.json").write_text(json.dumps(moved, indent=1) + "\n")
    shutil.copytree(MTNER, workspace / "rgym_mtner", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _layout_version() -> str:
    """Changes whenever the evaluation code copied into the workspace changes."""
    import hashlib

    h = hashlib.sha256(b"materials-layout-1")
    for path in sorted(MTNER.glob("*.py")) + [Path(__file__)]:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


LAYOUT = TaskLayout(TASK, overlay=TASK_DIR / "overlay", post_build=post_build, version=_layout_version())


def prepare_task(spec: Any, cache_dir: Path, data_dir: Path | None) -> Any:
    """``researchgym/materials-tokenization``: the verified starter repository."""
    return prepare_dataset(LAYOUT, spec, cache_dir, data_dir)
