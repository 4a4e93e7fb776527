"""Writes the public development set of ``mlgym/3sat`` (``starter/dev_instances.json``).

The generator itself is the grader's (``grader/instances.py``, loaded from the
task folder with the grader's copy of the solver): the hidden evaluation set is
drawn from it at every grading, seeded by the task's grader secret, so no file and
no seed in this package holds it.  The development set has a public seed on
purpose, and is byte-identical everywhere.

    python -m rgym_task_sat.generate           # rewrite the development file
    python -m rgym_task_sat.generate --check   # regenerate in memory, compare to the file
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TASK_DIR = Path(__file__).resolve().parent / "tasks" / "3sat"
DEV_FILE = "starter/dev_instances.json"
DEV_SEED = 7
DEV_SIZES = {20: 4, 30: 3, 40: 2}


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def generator() -> ModuleType:
    """The grader's ``instances`` module (with the starter's solver as ``reference_solver``)."""
    if "reference_solver" not in sys.modules:
        _load("reference_solver", TASK_DIR / "starter" / "solver.py")
    return _load("rgym_sat_instances", TASK_DIR / "grader" / "instances.py")


def dev_set_bytes() -> bytes:
    gen = generator()
    return gen.dumps(gen.generate(DEV_SEED, DEV_SIZES))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="regenerate in memory and compare with the file; write nothing")
    args = parser.parse_args(argv)
    data = dev_set_bytes()
    path = TASK_DIR / DEV_FILE
    digest = generator().sha256(data)
    if args.check:
        same = path.is_file() and path.read_bytes() == data
        print(f"{DEV_FILE}: {'matches' if same else 'DIFFERS from'} the generator (sha256 {digest})")
        return 0 if same else 1
    path.write_bytes(data)
    print(f"{DEV_FILE}: {len(data)} bytes, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
