"""Start-up cost of the ``rgym`` command line: every installed pack against a real
core-only install, measured side by side (interleaved runs, paired ratios).

    python benchmarks/bench_cli.py [--runs 15] [--core-venv PATH]

The core-only install is a fresh venv with only ``pip install .`` of this checkout,
made in a temporary folder (dependencies from a wheel cache, offline once it is
filled; ``--core-venv PATH`` reuses one instead).  For ``rgym list tasks`` and
``rgym --help`` it prints the wall time, CPU time and peak memory (max RSS) of a
fresh process with all packs (this interpreter's venv), with the core alone, and of
a bare ``python -c pass`` (the floor), each as median (IQR, min, max) over rounds in
an order shuffled per round, and the ratios taken round by round (target: all packs
at most 1.3x the core alone in CPU time for ``list tasks``; wall time is shown too,
but on a loaded machine it mostly measures waiting), and the heavy modules each
command imported (target: none).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _paired import load, ratios, rounds, show, spread

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("numpy", "scipy", "pandas", "sklearn", "torch", "jax", "flax", "gymnax", "faiss", "httpx",
         "tenacity", "pypdf", "docker", "ray", "submitit", "matplotlib", "PIL", "tiktoken",
         "transformers", "sentence_transformers", "rich")

#: As users run it: byte-code caches written and read (the first, warming run writes them).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

PROBE = """
import json, sys
sys.argv = ["rgym", *json.loads(sys.argv[1])]
from rgym_core.cli import main
try:
    main()
except SystemExit:
    pass
with open({path!r}, "w") as fh:
    json.dump(sorted(sys.modules), fh)
"""


def run_once(python: str, args: list[str] | None, cwd: Path) -> tuple[float, float, int, list[str]]:
    """Wall seconds, CPU seconds, max RSS in KiB and the imported heavy modules of one
    ``rgym ARGS`` under ``python`` (run from ``cwd``, so that the checkout is not on
    ``sys.path``); with ``args`` None, a bare ``python -c pass`` (the floor)."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as modules:
        code = PROBE.format(path=modules.name) if args is not None else "pass"
        started = time.perf_counter()
        proc = subprocess.Popen([python, "-c", code, json.dumps(args)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=ENV, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        names = json.load(open(modules.name)) if os.path.getsize(modules.name) else []
    heavy = sorted({n.split(".")[0] for n in names} & set(HEAVY))
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, heavy


def core_venv(root: Path) -> Path:
    """A fresh venv under ``root`` with only the core (``pip install .``), its
    dependencies installed offline from a wheel cache when they are there (the cache is
    filled by ``pip wheel`` from the package index the first time); its python."""
    wheels = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rgym-bench" / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    # The core's files alone, copied out, so that the build leaves nothing in the
    # checkout and a stale build/ there cannot bring back removed modules.
    source = root / "core-source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "rgym_core", source / "rgym_core",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    venv = root / "core-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    offline = [*pip, "--no-index", "--find-links", str(wheels), str(source)]
    if subprocess.run(offline, capture_output=True, cwd=root).returncode != 0:
        for step in ([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
                      "-w", str(wheels), str(source), "setuptools>=68", "wheel"], offline):
            proc = subprocess.run(step, capture_output=True, text=True, cwd=root)
            if proc.returncode != 0:
                raise SystemExit(f"making the core-only venv failed ({' '.join(step[:4])} ...): "
                                 f"{proc.stderr.strip()[-1500:]}\nfix the install or pass --core-venv PATH")
    return python


def compare(label: str, args: list[str], runs: int, core_python: Path, cwd: Path) -> float:
    """Print ``rgym ARGS`` with every pack against a core-only install and a bare
    interpreter start, interleaved; return the median paired CPU ratio (all / core)."""
    methods = {
        "all": lambda: run_once(sys.executable, args, cwd),
        "core": lambda: run_once(str(core_python), args, cwd),
        "floor": lambda: run_once(sys.executable, None, cwd),
    }
    got = rounds(methods, runs)
    heavy = got["all"][-1][3]
    for side, name in (("all", "all packs"), ("core", "core only"), ("floor", "bare python")):
        rows = got[side]
        print(f"rgym {label:<11} {name:<12} wall {show([r[0] for r in rows], ' ms', 0, 1000)}; "
              f"cpu {show([r[1] for r in rows], ' ms', 0, 1000)}; "
              f"max RSS {show([r[2] for r in rows], ' MiB', 1, 1 / 1024)}")
    cpu = ratios([r[1] for r in got["all"]], [r[1] for r in got["core"]])
    wall = ratios([r[0] for r in got["all"]], [r[0] for r in got["core"]])
    mem = ratios([r[2] for r in got["all"]], [r[2] for r in got["core"]])
    floor = ratios([r[1] for r in got["core"]], [r[1] for r in got["floor"]])
    print(f"    all packs / core only, paired: cpu {show(cpu)}; wall {show(wall)}; memory {show(mem)}")
    print(f"    core only / bare python, paired: cpu {show(floor)} | heavy imports with all packs: "
          f"{', '.join(heavy) or 'none'}")
    return spread(cpu)["median"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--core-venv", type=Path, default=None,
                        help="a venv with only the core installed (default: made afresh in a "
                             "temporary folder, a minute or so)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rgym-bench-cli-") as tmp:
        root = Path(tmp)
        if args.core_venv is not None:
            core_python = args.core_venv / "bin" / "python"
            if not core_python.exists():
                raise SystemExit(f"--core-venv {args.core_venv}: no bin/python there; make one with "
                                 f"`python -m venv PATH && PATH/bin/pip install .`")
        else:
            started = time.perf_counter()
            core_python = core_venv(root)
            print(f"core-only venv made in {time.perf_counter() - started:.1f} s "
                  f"(pass --core-venv PATH to reuse one)")
        print(f"load average: {load()}; {args.runs} rounds, order shuffled per round; "
              f"median (IQR, min, max) of each figure and of the ratios taken round by round")
        cpu = compare("list tasks", ["list", "tasks"], args.runs, core_python, root)
        compare("--help", ["--help"], args.runs, core_python, root)
    # The CPU time of the process is what the packs add; wall time also counts the
    # waits for the other processes of a loaded machine, so it is shown, not judged.
    print(f"target: list tasks with all packs at most 1.3x a core-only install, in CPU time "
          f"(median of paired ratios) -> {'met' if cpu <= 1.3 else 'NOT met'} ({cpu:.2f}x)")


if __name__ == "__main__":
    main()
