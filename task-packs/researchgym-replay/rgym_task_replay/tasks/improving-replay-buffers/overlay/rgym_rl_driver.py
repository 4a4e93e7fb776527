"""rgym's online-RL driver: runs *inside* the confined worker, next to your agent.

The grader (or ``rgym_check.py``) starts ``python rgym_rl_driver.py`` in a copy of your
workspace.  The environment lives in the grader: it sends observations, your agent
(``rgym_agent.make_agent``) answers with actions, and the grader steps the simulator,
counts the interaction budget and sums the rewards.  This process never sees the
simulator; what it prints or writes is never read as a score.  The grader ships its
own copy of this file over yours.

Messages: one JSON line each way (grader -> driver: ``start``, ``act``, ``observe``,
``end``; driver -> grader: ``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``).
"""

from __future__ import annotations

import importlib.abc
import json
import math
import os
import sys
import traceback
from typing import Any

# Replies go to a private copy of stdout; what your code prints goes to stderr.
_OUT = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

#: Simulators your agent may not load: every environment step must go through the
#: grader's budget (the interaction count is the quantity this task is about).
SIMULATORS = ("mujoco", "mujoco_py", "gymnasium", "gym", "dm_control", "dmcgym", "d4rl")


class _NoSimulators(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.split(".", 1)[0] in SIMULATORS:
            raise ImportError(f"{fullname}: your agent may not load a simulator; environment "
                              "steps come from the grader (see RGYM.md)")
        return None


sys.meta_path.insert(0, _NoSimulators())

import numpy as np  # noqa: E402


def _reply(**payload: Any) -> None:
    _OUT.write(json.dumps(payload) + "\n")
    _OUT.flush()


def _action(value: Any, act_dim: int) -> list[float]:
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.shape != (act_dim,):
        raise ValueError(f"act returned an action of shape {list(np.shape(value))}; expected [{act_dim}]")
    out = [float(v) for v in arr]
    if not all(math.isfinite(v) for v in out):
        raise ValueError("act returned NaN or infinite values")
    return out


def main() -> None:
    agent: Any = None
    act_dim = 0
    for line in sys.stdin:
        message = json.loads(line)
        op = message.get("op")
        try:
            if op == "start":
                import rgym_agent  # your module

                spec = message["spec"]
                act_dim = int(spec["act_dim"])
                np.random.seed(int(spec["seed"]))
                try:
                    import torch

                    torch.manual_seed(int(spec["seed"]))
                    torch.set_num_threads(int(spec.get("threads", 1)))
                except ImportError:
                    pass
                agent = rgym_agent.make_agent(spec)
                _reply(ok=True)
            elif op == "act":
                obs = np.asarray(message["obs"], dtype=np.float64)
                _reply(ok=True, action=_action(agent.act(obs, bool(message.get("deterministic"))), act_dim))
            elif op == "observe":
                agent.observe(np.asarray(message["obs"], dtype=np.float64),
                              np.asarray(message["action"], dtype=np.float64), float(message["reward"]),
                              np.asarray(message["next_obs"], dtype=np.float64),
                              bool(message["terminated"]), bool(message["truncated"]))
                _reply(ok=True)
            elif op == "end":
                _reply(ok=True)
                return
            else:
                _reply(ok=False, error=f"unknown op {op!r}")
        except Exception:  # your code raised: the grader reports the traceback's tail
            _reply(ok=False, error=traceback.format_exc()[-3000:])
            return


if __name__ == "__main__":
    main()
