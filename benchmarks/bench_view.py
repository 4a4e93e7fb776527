"""How fast `rgym view` and `rgym analyze` are on a large sweep and on a long run.

Writes two sets of run directories through ``rgym_core.rundir``'s writers (not
timed), shaped like react runs: every step has a thought, a shell command, an
output of about a kilobyte, one model call with its new messages, tokens, cost
and latency; every tenth step is a validation:

* a sweep of 1,000 runs (``--runs``) of 40 steps (``--steps``) each, over 4 tasks
  and 5 solvers;
* one run of 20,000 steps (``--long``).

Then, for each set, measured side by side in one process (median of
``--repeat`` rounds, the sets alternating so machine load hits both alike):

* ``read``: only reading and parsing every trajectory line (the floor);
* ``viewer``: building the self-contained HTML file (``write_viewer``: summaries,
  compact trajectories, gzip, the page), target under 5 s;
* ``analysis``: ``analyze_paths`` and its tables (``render_text``), target under 5 s;
* ``plots``: the four matplotlib figures, PNG and SVG (reported apart);
* ``rgym view`` and ``rgym analyze --no-plots`` as subprocesses (start-up included);
* with ``--browser`` (needs chromium, chromedriver and selenium): the time
  headless Chromium takes to show the run list, and to open the long run and
  show its first steps.

    python benchmarks/bench_view.py [--runs 1000] [--steps 40] [--long 20000] [--repeat 3] [--browser]

Figures depend on machine load; the script prints the load average with them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TASKS = ["vision/cifar10", "language/fineweb", "tabular/house-price", "rl/breakout"]
SOLVERS = [("react/react", "openai/gpt-x"), ("react/react", "anthropic/claude-y"), ("aide/aide", "openai/gpt-x"),
           ("mlgym/sweagent", "google/gemini-z"), ("rgym/baseline", None)]
TARGET_S = 5.0


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def write_run(path: Path, steps: int, rng: random.Random, *, task: str, agent: str, model: str | None,
              seed: int) -> None:
    """One finished run directory shaped like a react run (see the module's docstring)."""
    from rgym_core.records import Action, EpisodeResult, Observation, ScoreRecord, Step, Usage
    from rgym_core.rundir import TrajectoryWriter, create_run_dir, write_config, write_result

    create_run_dir(path)
    budget = {"max_steps": max(steps, 50), "time_limit_s": 86_400.0, "action_timeout_s": 600.0,
              "cost_limit_usd": 50.0, "token_limit": None}
    metrics = [{"name": "accuracy", "direction": "maximize", "primary": True}]
    write_config(path, {"run_id": path.name, "run": {"task": task, "agent": agent, "model": model, "seed": seed,
                                                     "tags": {}},
                        "budget": budget, "task": {"id": task, "description": "Improve the model.",
                                                   "metrics": metrics,
                                                   "baseline": {"scores": {"accuracy": 0.5}}},
                        "agent": agent})
    started = time.time() - 7200
    elapsed, cost, tin, tout = 0.0, 0.0, 0, 0
    records: list[ScoreRecord] = []
    best = 0.5
    prompt = [{"role": "system", "content": "You are an autonomous ML researcher. " * 40},
              {"role": "user", "content": "TASK DESCRIPTION: improve the accuracy. " * 30}]
    with TrajectoryWriter(path) as writer:
        writer.write("start", {"run_id": path.name, "task": task, "agent": agent, "model": model,
                               "started_at": started,
                               "tools": ["rgym/bash", "rgym/edit", "rgym/validate", "rgym/submit"]})
        for i in range(1, steps + 1):
            last = i == steps
            kind = "submit" if last else "validate" if i % 10 == 0 else "bash"
            failing = rng.random() < 0.15
            command = f"python train.py --lr {rng.choice([0.1, 0.01, 0.001])} --epochs {rng.randint(1, 9)}"
            output = "".join(f"epoch {e}: loss {rng.random():.5f} accuracy {rng.random():.4f}\n"
                             for e in range(16))
            if failing:
                output += "Traceback (most recent call last):\n  File \"train.py\", line 12\nValueError: shapes\n"
            in_tok, out_tok, call_cost = 3000 + 40 * i, rng.randint(40, 400), 0.002
            messages = prompt if i == 1 else [
                {"role": "assistant", "content": f"step {i - 1}"}, {"role": "user", "content": output}]
            call = {"model": (model or "none").split("/")[-1], "requery": 0,
                    "prefix_messages": 0 if i == 1 else len(prompt) + 2 * (i - 2), "messages": messages,
                    "response": f"I will try another learning rate.\n```\n{command}\n```", "stop_reason": "stop",
                    "input_tokens": in_tok, "output_tokens": out_tok, "cost_usd": call_cost,
                    "latency_s": round(rng.uniform(0.5, 4.0), 3)}
            action = Action(tool=kind, args={"command": command} if kind == "bash" else {},
                            thought="The loss is still high; a smaller learning rate may help. " * 3,
                            usage=Usage(cost_usd=call_cost, input_tokens=in_tok, output_tokens=out_tok, calls=1),
                            llm_calls=[call] if model else [])
            obs = Observation(output=output if kind == "bash" else "scored", error=failing and kind == "bash",
                              exit_code=(1 if failing else 0) if kind == "bash" else None)
            duration = rng.uniform(0.2, 30.0)
            writer.step(Step(index=i, action=action, observation=obs, started_at=started + elapsed,
                             duration_s=duration, elapsed_s=elapsed))
            elapsed += duration + 1.0
            cost, tin, tout = cost + call_cost, tin + in_tok, tout + out_tok
            if kind in ("validate", "submit"):
                score = round(min(0.99, best + rng.uniform(-0.05, 0.08)), 4)
                best = max(best, score)
                record = ScoreRecord(step=i, kind=kind, valid=True, scores={"accuracy": score})
                records.append(record)
                writer.score(record)
        final = records[-1].scores if records else None
        result = EpisodeResult(run_id=path.name, task_id=task, agent=agent, model=model, status="submitted",
                               seed=seed, scores=records, final_scores=final, primary_metric="accuracy",
                               metrics={"accuracy": "maximize"}, baseline_scores={"accuracy": 0.5},
                               steps=steps, started_at=started, ended_at=started + elapsed, duration_s=elapsed,
                               end_reason="submit", cost_usd=cost, input_tokens=tin, output_tokens=tout)
        writer.end(result)
        write_result(path, result)


def make_sweep(root: Path, runs: int, steps: int) -> Path:
    rng = random.Random(17)
    folder = root / "sweep"
    for n in range(runs):
        task = TASKS[n % len(TASKS)]
        agent, model = SOLVERS[(n // len(TASKS)) % len(SOLVERS)]
        write_run(folder / task.replace("/", "__") / f"run-{n:04d}", steps, rng, task=task, agent=agent,
                  model=model, seed=n)
    return folder


def make_long(root: Path, steps: int) -> Path:
    path = root / "long" / "run-long"
    write_run(path, steps, random.Random(3), task="vision/cifar10", agent="react/react", model="openai/gpt-x",
              seed=1)
    return path


def read_only(path: Path) -> int:
    from rgym_core.rundir import iter_run_dirs

    lines = 0
    for run in iter_run_dirs(path):
        for _ in run.records():
            lines += 1
    return lines


def cpu_s() -> float:
    """CPU time of this process and its finished children (worker pools, subprocesses)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of ``fn()``."""
    c0, t0 = cpu_s(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, cpu_s() - c0


def rgym_cli(*args: str) -> Callable[[], None]:
    exe = Path(sys.executable).with_name("rgym")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "rgym_core.cli"]

    def run() -> None:
        proc = subprocess.run([*command, *args], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"rgym {' '.join(args)} failed:\n{proc.stderr}")

    return run


def browser_times(sweep_page: Path, long_page: Path) -> dict[str, float]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--disable-background-networking"):
        options.add_argument(flag)
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)
    out: dict[str, float] = {}
    try:
        t0 = time.perf_counter()
        driver.get(sweep_page.as_uri())
        WebDriverWait(driver, 120, poll_frequency=0.05).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.run-row")) > 0)
        out["sweep: run list shown"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        driver.get(long_page.as_uri())
        WebDriverWait(driver, 120, poll_frequency=0.05).until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr.run-row"))
        driver.find_element(By.CSS_SELECTOR, "tr.run-row").click()
        WebDriverWait(driver, 120, poll_frequency=0.05).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#step-1"))
        out["long run: page + run + first steps"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        driver.execute_script("window.scrollTo(0, document.body.scrollHeight / 2)")
        WebDriverWait(driver, 60, poll_frequency=0.05).until(lambda d: d.execute_script(
            "var e = document.elementFromPoint(700, 500); return !!(e && e.closest('.step'));"))
        out["long run: scroll to the middle, steps shown"] = time.perf_counter() - t0
    finally:
        driver.quit()
    return out


def measure(args: argparse.Namespace, root: Path) -> None:
    from rgym_view.analysis import analyze_paths, render_text
    from rgym_view.html import write_viewer
    from rgym_view.plots import write_plots

    t0 = time.perf_counter()
    sweep = make_sweep(root, args.runs, args.steps)
    long_run = make_long(root, args.long)
    made = time.perf_counter() - t0
    sizes = {name: sum(f.stat().st_size for f in p.rglob("trajectory.jsonl")) for name, p in
             (("sweep", sweep), ("long", long_run))}
    print(f"bench_view: {args.runs} runs x {args.steps} steps ({sizes['sweep'] / 1e6:.0f} MB of trajectories) "
          f"and one run of {args.long} steps ({sizes['long'] / 1e6:.0f} MB), written in {made:.0f} s under {root}")
    print(f"load average before: {load()}  (cpus: {os.cpu_count()})\n")

    cases = {"sweep": sweep, "long": long_run}
    pages = {name: root / f"{name}.html" for name in cases}
    measures: dict[str, Callable[[Path, str], tuple[float, float]]] = {
        "read": lambda p, n: timed(lambda: read_only(p)),
        "viewer": lambda p, n: timed(lambda: write_viewer([p], pages[n])),
        "analysis": lambda p, n: timed(lambda: render_text(analyze_paths([p]))),
        "plots": lambda p, n: plots_time(analyze_paths([p]), root / f"plots-{n}"),
        "rgym view": lambda p, n: timed(rgym_cli("view", str(p), "-o", str(root / f"cli-{n}.html"))),
        "rgym analyze": lambda p, n: timed(rgym_cli("analyze", str(p), "--no-plots")),
    }
    def plots_time(report: Any, folder: Path) -> tuple[float, float]:
        return timed(lambda: write_plots(report, folder))

    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.repeat):
        for measure, fn in measures.items():
            for name, path in cases.items():
                results.setdefault((measure, name), []).append(fn(path, name))

    def med(measure: str, name: str, cpu: bool = False) -> float:
        return statistics.median(r[1] if cpu else r[0] for r in results[(measure, name)])

    sweep_label = "1,000 runs" if args.runs == 1000 else f"{args.runs} runs"
    long_label = "20,000-step run" if args.long == 20_000 else f"{args.long}-step run"
    head = f"{'':<22}{sweep_label + ' wall':>17}{'cpu':>7}{long_label + ' wall':>22}{'cpu':>7}   target"
    print(head)
    print("-" * len(head))
    for measure in measures:
        target = f"< {TARGET_S:.0f} s" if measure in ("viewer", "analysis") else ""
        print(f"{measure + ' (s)':<22}{med(measure, 'sweep'):>17.2f}{med(measure, 'sweep', True):>7.2f}"
              f"{med(measure, 'long'):>22.2f}{med(measure, 'long', True):>7.2f}   {target}")
    for measure in ("viewer", "analysis"):
        print(f"{measure + ' / read':<22}{med(measure, 'sweep') / med('read', 'sweep'):>16.1f}x"
              f"{med(measure, 'sweep', True) / med('read', 'sweep', True):>6.1f}x"
              f"{med(measure, 'long') / med('read', 'long'):>21.1f}x"
              f"{med(measure, 'long', True) / med('read', 'long', True):>6.1f}x")
    for measure in ("viewer", "analysis"):
        print(f"{measure + ' / target':<22}{med(measure, 'sweep') / TARGET_S:>17.2f}"
              f"{med(measure, 'sweep', True) / TARGET_S:>7.2f}"
              f"{med(measure, 'long') / TARGET_S:>22.2f}{med(measure, 'long', True) / TARGET_S:>7.2f}")
    print(f"{'HTML size (MB)':<22}{pages['sweep'].stat().st_size / 1e6:>17.1f}{'':>7}"
          f"{pages['long'].stat().st_size / 1e6:>22.1f}")
    from rgym_view.data import workers

    print(f"\nmedian of {args.repeat} rounds; {workers()} reading process(es) (RGYM_VIEW_WORKERS); "
          f"cpu = this process and its children; load average after: {load()}")
    wall_ok = all(med(m, n) < TARGET_S for m in ("viewer", "analysis") for n in cases)
    cpu_ok = all(med(m, n, True) < TARGET_S for m in ("viewer", "analysis") for n in cases)
    print("targets met (wall)" if wall_ok else
          "targets met in CPU time, missed in wall time at this load" if cpu_ok else
          "TARGETS MISSED on this machine at this load")
    if args.browser:
        print("\nheadless Chromium (one round):")
        for what, seconds in browser_times(pages["sweep"], pages["long"]).items():
            print(f"  {what:<46}{seconds:>7.2f} s")
    print(json.dumps({f"{m}:{n}": [round(med(m, n), 3), round(med(m, n, True), 3)] for m, n in results}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--long", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--browser", action="store_true", help="also time headless Chromium")
    parser.add_argument("--keep", type=Path, default=None, help="write the runs here and keep them")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-view-", dir=os.environ.get("TMPDIR", "/var/tmp")))
    root.mkdir(parents=True, exist_ok=True)
    try:
        measure(args, root)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
