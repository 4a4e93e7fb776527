"""Score your agent locally the way rgym's grader does.

    python rgym_check.py                 # the first protocol seed
    python rgym_check.py --all-seeds     # every protocol seed
    python rgym_check.py --steps 500     # a shorter run while you debug

Your agent runs in a child process (``rgym_rl_driver.py``); the environment, the
interaction budget and the returns are handled here (``rgym_rl_protocol.py``), as the
grader does on its own machine, in a confined process, with its own copies.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from rgym_rl_protocol import AgentError, Protocol, dumps, run_seed, summary

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all-seeds", action="store_true")
    parser.add_argument("--steps", type=int, default=None, help="override train_steps")
    parser.add_argument("--profile", default=os.environ.get("RGYM_PROFILE", "cpu"))
    opts = parser.parse_args()
    settings = json.loads((HERE / "rgym_protocol.json").read_text())[opts.profile]
    protocol = Protocol.from_dict(settings)
    if opts.steps:
        protocol = dataclasses.replace(protocol, train_steps=opts.steps)
    results = []
    for seed in protocol.seeds if opts.all_seeds else protocol.seeds[:1]:
        proc = subprocess.Popen([sys.executable, str(HERE / "rgym_rl_driver.py")], cwd=HERE,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None

        def exchange(message: dict, timeout: float, proc: subprocess.Popen = proc) -> dict:
            proc.stdin.write(dumps(message))
            proc.stdin.flush()
            line = proc.stdout.readline()
            if not line:
                raise AgentError(f"the driver exited (code {proc.wait()})")
            return json.loads(line)
        try:
            results.append(run_seed(exchange, protocol, seed, opts.profile))
        except AgentError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            proc.kill()
            proc.wait()
        r = results[-1]
        print(f"seed {seed}: average return {r.average_return:.2f} over {len(r.eval_returns)} "
              f"evaluation episodes ({r.train_episodes} training episodes)", flush=True)
    print(json.dumps({k: v for k, v in summary(results).items() if k != "seeds"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
