"""Score your method locally the way rgym's grader does, on the development split.

    python rgym_check.py                # the first protocol seed
    python rgym_check.py --all-seeds    # every protocol seed

The learner runs in a child process (``rgym_cl_driver.py``), is shown each task's
training data once, and predicts the dev images of the classes seen so far; Acc and
AAA are computed here (``rgym_cl_protocol.py``).  The grader does the same on a test
split you never see, in a confined process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from rgym_cl_protocol import LearnerError, Protocol, run_seed, summary

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE / "data")
    parser.add_argument("--all-seeds", action="store_true")
    parser.add_argument("--profile", default=os.environ.get("RGYM_PROFILE", "cpu"))
    opts = parser.parse_args()
    meta = json.loads((opts.data / "meta.json").read_text())
    protocol = Protocol.from_meta(meta)
    train_x = np.load(opts.data / "train_x.npy", allow_pickle=False)
    train_y = np.load(opts.data / "train_y.npy", allow_pickle=False)
    dev = (np.load(opts.data / "dev_x.npy", allow_pickle=False),
           np.load(opts.data / "dev_y.npy", allow_pickle=False))
    if (opts.data / "dev_index.npy").exists():  # dev images taken out of the training split
        keep = np.ones(len(train_y), dtype=bool)
        keep[np.load(opts.data / "dev_index.npy", allow_pickle=False)] = False
        train_x, train_y = train_x[keep], train_y[keep]
    results = []
    for seed in protocol.seeds if opts.all_seeds else protocol.seeds[:1]:
        proc = subprocess.Popen([sys.executable, str(HERE / "rgym_cl_driver.py")], cwd=HERE,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None

        def exchange(message: bytes, timeout: float, proc: subprocess.Popen = proc) -> dict:
            proc.stdin.write(message)
            proc.stdin.flush()
            line = proc.stdout.readline()
            if not line:
                raise LearnerError(f"the driver exited (code {proc.wait()})")
            return json.loads(line)
        try:
            results.append(run_seed(exchange, protocol, seed, opts.profile, (train_x, train_y), dev))
        except LearnerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            proc.kill()
            proc.wait()
        r = results[-1]
        print(f"seed {seed}: Acc {r.acc:.2f}  AAA {r.aaa:.2f}  curve "
              + " ".join(f"{a:.1f}" for a in r.accuracy_curve), flush=True)
    print(json.dumps({k: v for k, v in summary(results).items() if k != "seeds"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
