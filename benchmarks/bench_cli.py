"""Start-up cost of the ``rgym`` command line: every installed pack against the
built-in plugin alone, measured side by side (interleaved runs, medians).

    python benchmarks/bench_cli.py [--runs 15]

For ``rgym list tasks`` and ``rgym --help`` it prints the median wall time and
the peak memory (max RSS) of a fresh process with all packs and with
``--plugins builtin``, and their ratios (target: at most 1.3x CPU time for
``list tasks``; wall time is shown too, but on a loaded machine it mostly measures
waiting), and the heavy modules each command imported (target: none).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

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


def run_once(args: list[str]) -> tuple[float, float, int, list[str]]:
    """Wall seconds, CPU seconds, max RSS in KiB and the imported heavy modules of one
    ``rgym ARGS``."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as modules:
        code = PROBE.format(path=modules.name)
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(args)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        names = json.load(open(modules.name)) if os.path.getsize(modules.name) else []
    heavy = sorted({n.split(".")[0] for n in names} & set(HEAVY))
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, heavy


def compare(label: str, args: list[str], runs: int) -> tuple[float, float]:
    full: list[tuple[float, float, int]] = []
    alone: list[tuple[float, float, int]] = []
    heavy_full: list[str] = []
    run_once(args)  # warm the file and byte-code caches
    run_once(["--plugins", "builtin", *args])
    for _ in range(runs):  # interleaved: both sides see the same load
        t, cpu, rss, heavy_full = run_once(args)
        full.append((t, cpu, rss))
        t, cpu, rss, _ = run_once(["--plugins", "builtin", *args])
        alone.append((t, cpu, rss))

    def med(rows: list[tuple[float, float, int]], i: int) -> float:
        return float(statistics.median(r[i] for r in rows))

    t_full, t_alone = med(full, 0), med(alone, 0)
    c_full, c_alone = med(full, 1), med(alone, 1)
    m_full, m_alone = med(full, 2) / 1024, med(alone, 2) / 1024
    print(f"rgym {label:<11} all packs {t_full * 1000:6.0f} ms wall {c_full * 1000:6.0f} ms cpu "
          f"{m_full:5.1f} MiB | built-in alone {t_alone * 1000:6.0f} ms wall {c_alone * 1000:6.0f} ms cpu "
          f"{m_alone:5.1f} MiB | ratio {t_full / t_alone:.2f}x wall, {c_full / c_alone:.2f}x cpu, "
          f"{m_full / m_alone:.2f}x memory | heavy imports: {', '.join(heavy_full) or 'none'}")
    return c_full / c_alone, t_full / t_alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.runs} runs each, "
          f"interleaved")
    cpu, wall = compare("list tasks", ["list", "tasks"], args.runs)
    compare("--help", ["--help"], args.runs)
    # The CPU time of the process is what the packs add; wall time also counts the
    # waits for the other processes of a loaded machine, so it is shown, not judged.
    print(f"target: list tasks at most 1.3x the built-in plugin alone, in CPU time -> "
          f"{'met' if cpu <= 1.3 else 'NOT met'} ({cpu:.2f}x cpu, {wall:.2f}x wall)")


if __name__ == "__main__":
    main()
