"""Grading of the RL tasks: trusted environment loop, agent policy in a confined worker.

Shared by the three tasks (``grader.include`` copies this folder into every
evaluation's ``grader/``).  The submission is ``config.yaml`` plus exactly five
checkpoints ``checkpoints/*.msgpack``.  For each checkpoint, this process resets
``SEEDS x ENVS_PER_SEED`` gymnax environments from keys derived from the grading seed
and the task's grader secret (the same starts for every checkpoint; no public seed
reproduces them, so no policy can be fitted to the evaluation episodes); the five play in lockstep, and at every step the grader sends
the observations of the running episodes to the policy worker (the agent's
``src/networks.py`` and parameters, confined by the grader kit's ``start_worker``:
another unprivileged user, no network, no view of the grader), checks the
actions it returns, steps the environments and adds up the rewards.  Rewards,
episode ends and the score never leave this process; the worker sees observations
only, in an order shuffled at every step, and its sampling keys are public constants.

The protocol follows MLGym's evaluation: an episode's return is the sum of its
rewards until its first ``done`` or until the horizon; ``Reward Mean`` is the mean
over all ``5 checkpoints x 5 seeds x 256 environments`` returns.
"""

from __future__ import annotations

import math
import os
import select
import time
from pathlib import Path
from typing import Any

from rgym_grader_kit import Limits, WorkerError, context, start_worker, write_error, write_scores
from wire import WireError, read_frame, write_frame

NUM_CHECKPOINTS = 5
SEEDS = 5
ENVS_PER_SEED = 256
DEFAULT_SEED = 0
CHECKPOINT_SUFFIX = ".msgpack"
#: Time for the worker to import the agent's code and load the five checkpoints.
LOAD_LIMIT_S = 180.0
#: Time for one batch of actions (the first includes compiling the policy).
STEP_LIMIT_S = 60.0
#: The whole evaluation of the five checkpoints.
TOTAL_LIMIT_S = 600.0
#: Heap and anonymous memory of each process of the policy worker (RLIMIT_DATA).
WORKER_MEMORY_MB = 4096


class EvaluationError(Exception):
    """The submission cannot be scored; the message says why, for the agent."""


class MissingSubmission(EvaluationError):
    """The files to grade are not there."""


def find_checkpoints(submission: Path) -> list[str]:
    """The names of the five checkpoint files, or an error naming what is wrong."""
    if not (submission / "config.yaml").is_file():
        raise MissingSubmission("config.yaml is missing from the workspace root: the submission is "
                                "config.yaml plus five checkpoints in checkpoints/ "
                                "(python src/train.py writes them)")
    folder = submission / "checkpoints"
    if not folder.is_dir():
        raise MissingSubmission("checkpoints/ is missing: run python src/train.py to train and save "
                                "the five checkpoints")
    found = sorted(p.name for p in folder.iterdir() if p.is_file() and not p.is_symlink()
                   and p.name.endswith(CHECKPOINT_SUFFIX))
    if len(found) != NUM_CHECKPOINTS:
        others = sorted(p.name for p in folder.iterdir() if not p.name.endswith(CHECKPOINT_SUFFIX))
        hint = f"; other files there: {', '.join(others[:5])}" if others else ""
        what = "no checkpoint" if not found else f"{len(found)} checkpoints ({', '.join(found[:8])})"
        raise (MissingSubmission if not found else EvaluationError)(
            f"checkpoints/ must hold exactly {NUM_CHECKPOINTS} checkpoint files "
            f"(*{CHECKPOINT_SUFFIX}, one per training seed), found {what}{hint}")
    return found


class PolicyWorker:
    """The agent's policy in its confined process, behind a deadline on every answer."""

    def __init__(self, names: list[str], *, deadline: float) -> None:
        self.deadline = deadline
        self.total_limit_s = deadline - time.monotonic()
        here = Path(__file__).resolve().parent
        script = (here / "wire.py").read_text() + "\n" + (here / "policy_worker.py").read_text()
        self.worker = start_worker(
            ["python", "-c", script, *names], name="your policy",
            env={"JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONHASHSEED": "0"},
            # JAX runs a few dozen threads; the starter's policy needs about 0.4 GB.
            limits=Limits(wall_s=max(deadline - time.monotonic(), 1.0) + 5,
                          memory_mb=WORKER_MEMORY_MB, pids=512, open_files=1024))
        self._buffer = bytearray()
        self.env_name: str | None = None

    def wait_ready(self) -> None:
        """Wait until the worker has loaded the network and the checkpoints."""
        hello = self._receive(min(LOAD_LIMIT_S, self._left()), "to load src/networks.py and the "
                              "checkpoints", max_payload=0)
        if not hello.get("ready"):
            raise EvaluationError(str(hello.get("error") or "the policy worker did not start"))
        self.env_name = hello.get("env_name")

    def act(self, groups: list[tuple[int, int]], obs, max_bytes: int):
        """The worker's actions (unchecked) for ``obs``: consecutive blocks of rows, one
        per ``(checkpoint index, rows)`` group."""
        import numpy as np

        obs = np.ascontiguousarray(obs)
        header = {"op": "act", "groups": [list(g) for g in groups], "dtype": obs.dtype.str,
                  "shape": list(obs.shape)}
        try:
            write_frame(self.worker.stdin.fileno(), header, obs.tobytes())
        except OSError:
            self._died()
        reply = self._receive(min(STEP_LIMIT_S, self._left()), "for one batch of actions",
                              max_payload=max_bytes)
        if "error" in reply:
            raise EvaluationError(str(reply["error"]))
        try:
            dtype = np.dtype(reply["dtype"])
            if dtype.hasobject:
                raise TypeError("object arrays are not actions")
            return np.frombuffer(reply["payload"], dtype=dtype).reshape(reply["shape"])
        except (KeyError, TypeError, ValueError) as exc:
            raise EvaluationError(f"the policy worker sent a malformed batch of actions: {exc}") from None

    def close(self) -> None:
        self.worker.close()

    # -- internals ---------------------------------------------------------

    def _left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def _receive(self, timeout: float, what: str, *, max_payload: int) -> dict[str, Any]:
        end = time.monotonic() + timeout
        fd = self.worker.stdout.fileno()

        def read_exact(n: int) -> bytes:
            while len(self._buffer) < n:
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                ready, _, _ = select.select([fd], [], [], left)
                if ready:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        raise WireError("closed")
                    self._buffer += chunk
            data = bytes(self._buffer[:n])
            del self._buffer[:n]
            return data

        try:
            header, payload = read_frame(read_exact, max_payload)
        except TimeoutError:
            self.worker.kill()
            total = self._left() <= 0
            raise EvaluationError(
                f"the policy did not answer within {timeout:.0f} s {what}"
                + (f" (the evaluation's time limit of {self.total_limit_s:.0f} s ran out)"
                   if total else "")
                + ": it is stuck or far too slow, and was stopped") from None
        except WireError as exc:
            if str(exc) == "closed":
                self._died()
            self.worker.kill()
            raise EvaluationError(f"the policy worker broke the protocol: {exc}") from None
        header["payload"] = payload
        return header

    def _died(self) -> None:
        try:
            code = self.worker.wait(5.0)
        except WorkerError:
            code = None
        tail = self.worker.stderr_tail(1500)
        raise EvaluationError(f"the policy worker exited unexpectedly (exit code {code})"
                              + (f": {tail}" if tail else ""))


def _bucket(n: int, quantum: int) -> int:
    """Batch sizes the worker sees: multiples of ``quantum`` (the environments of one
    seed), so its jitted policy compiles for five shapes at most."""
    return max(1, -(-n // quantum)) * quantum


def check_actions(actions, rows: int, space) -> Any:
    """The actions as the environment takes them, or an error saying what is wrong."""
    import numpy as np

    if hasattr(space, "n"):  # discrete
        if actions.shape == (rows, 1):
            actions = actions[:, 0]
        if actions.shape != (rows,):
            raise EvaluationError(f"the policy returned actions of shape {actions.shape} for {rows} "
                                  f"observations; expected ({rows},): one int per observation")
        if not np.issubdtype(actions.dtype, np.integer):
            raise EvaluationError(f"the policy returned actions of dtype {actions.dtype}; this task's "
                                  f"actions are ints in [0, {space.n})")
        bad = (actions < 0) | (actions >= space.n)
        if bad.any():
            raise EvaluationError(f"the policy returned the invalid action {int(actions[bad][0])}; "
                                  f"this task's actions are ints in [0, {space.n})")
        return actions.astype(np.int32)
    size = int(np.prod(space.shape))
    if actions.shape == (rows,) and size == 1:
        actions = actions[:, None]
    if actions.shape != (rows, size):
        raise EvaluationError(f"the policy returned actions of shape {actions.shape} for {rows} "
                              f"observations; expected ({rows}, {size})")
    if not (np.issubdtype(actions.dtype, np.floating) or np.issubdtype(actions.dtype, np.integer)):
        raise EvaluationError(f"the policy returned actions of dtype {actions.dtype}; expected floats")
    actions = actions.astype(np.float32)
    if not np.isfinite(actions).all():
        raise EvaluationError("the policy returned a NaN or infinite action")
    return actions


def evaluate(env_name: str, horizon: int, submission: Path, seed: int, *,
             envs_per_seed: int = ENVS_PER_SEED, total_limit_s: float = TOTAL_LIMIT_S,
             secret: bytes = b"") -> dict[str, Any]:
    """Score the submission; raises :class:`EvaluationError` with the reason when it cannot."""
    names = find_checkpoints(submission)
    started = time.monotonic()
    # Start the worker first: it loads while this process imports JAX, and no thread of
    # JAX exists yet when we fork.
    worker = PolicyWorker(names, deadline=started + total_limit_s)
    try:
        return _evaluate(worker, names, env_name, horizon, seed, envs_per_seed, started, secret)
    finally:
        worker.close()


def _make_env(env_name: str):
    """`gymnax.make(env_name)`, with stand-ins for matplotlib.pyplot and seaborn, which
    gymnax imports for rendering only (seconds of imports the grader never uses)."""
    import sys
    import types

    added = [n for n in ("seaborn", "matplotlib.pyplot") if n not in sys.modules]
    sys.modules.update({n: types.ModuleType(n) for n in added})
    try:
        import gymnax
    finally:
        for name in added:
            sys.modules.pop(name, None)
    return gymnax.make(env_name)


def _evaluate(worker: PolicyWorker, names: list[str], env_name: str, horizon: int, seed: int,
              envs_per_seed: int, started: float, secret: bytes = b"") -> dict[str, Any]:
    """The five checkpoints play in lockstep: at every step one request carries the
    observations of every checkpoint's running episodes, and one answer their actions."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    env, env_params = _make_env(env_name)
    space = env.action_space(env_params)
    rows = SEEDS * envs_per_seed            # environments per checkpoint
    total = len(names) * rows
    # 32 bits of the seed and 256 of the secret (eight 32-bit words folded in).
    words = [int.from_bytes(secret[i:i + 4], "big") for i in range(0, len(secret) - 3, 4)]
    root = jax.random.PRNGKey(seed)
    for word in words:
        root = jax.random.fold_in(root, word)
    step_keys = jnp.stack([jax.random.fold_in(root, 1000 + i) for i in range(len(names))])

    @jax.jit
    def reset():
        per_seed = [jax.random.split(jax.random.fold_in(root, s), envs_per_seed)
                    for s in range(SEEDS)]
        keys = jnp.tile(jnp.concatenate(per_seed), (len(names), 1))  # same starts for each checkpoint
        return jax.vmap(env.reset, in_axes=(0, None))(keys, env_params)

    @jax.jit
    def advance(state, actions, t, returns, alive):
        keys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, t), rows))(step_keys)
        obs, state, reward, terminated, truncated, _ = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(keys.reshape(total, -1), state, actions, env_params)
        returns = returns + reward * alive
        alive = alive * (1.0 - jnp.logical_or(terminated, truncated))
        return obs, state, returns, alive

    discrete = hasattr(space, "n")
    actions = (np.zeros(total, np.int32) if discrete
               else np.zeros((total, int(np.prod(space.shape))), np.float32))
    obs_size = int(np.prod(env.observation_space(env_params).shape))
    max_bytes = total * max(obs_size, 16) * 8 + 1024
    # The order of the rows the worker sees, reshuffled at every step.
    shufflers = [np.random.default_rng([seed, 7919, i, *words]) for i in range(len(names))]
    obs, state = reset()
    returns, alive = jnp.zeros(total), jnp.ones(total)
    running = np.ones(total, dtype=bool)
    steps = [0] * len(names)
    steps_run = 0
    worker.wait_ready()
    if worker.env_name != env_name:
        raise EvaluationError(f"config.yaml: env_name is {worker.env_name!r}, but this task "
                              f"evaluates on {env_name!r}")
    for t in range(horizon):
        # Only environments whose episode still runs need actions (the others' rewards
        # no longer count): send those rows, shuffled, padded to a few batch sizes.
        all_obs = np.asarray(obs)
        groups, batches = [], []
        for i in range(len(names)):
            live = np.flatnonzero(running[i * rows:(i + 1) * rows]) + i * rows
            if live.size == 0:
                continue
            live = live[shufflers[i].permutation(live.size)]
            size = _bucket(live.size, envs_per_seed)
            batch = all_obs[live]
            if size > live.size:
                batch = np.concatenate([batch, np.repeat(batch[:1], size - live.size, axis=0)])
            groups.append((i, live, size))
            batches.append(batch)
            steps[i] = t + 1
        if not groups:
            break
        raw = worker.act([(i, size) for i, _, size in groups], np.concatenate(batches), max_bytes)
        sent = sum(size for _, _, size in groups)
        if raw.ndim == 0 or raw.shape[0] != sent:
            raise EvaluationError(f"step {t + 1}: the policy returned actions of shape {raw.shape} "
                                  f"for {sent} observations")
        offset = 0
        for i, live, size in groups:
            try:
                chosen = check_actions(raw[offset:offset + size], size, space)
            except EvaluationError as exc:
                raise EvaluationError(f"checkpoints/{names[i]}, step {t + 1}: {exc}") from None
            actions[live] = chosen[:live.size]
            offset += size
            steps_run += live.size
        obs, state, returns, alive = advance(state, actions, t, returns, alive)
        running = np.asarray(alive) > 0
    values = np.asarray(returns, dtype=np.float64)
    per_checkpoint = [{"checkpoint": name, "steps": steps[i],
                       "reward_mean": round(float(values[i * rows:(i + 1) * rows].mean()), 6)}
                      for i, name in enumerate(names)]
    mean, std = float(values.mean()), float(values.std())
    means = [c["reward_mean"] for c in per_checkpoint]
    return {
        "scores": {"Reward Mean": mean, "Reward Std": std,
                   "Reward Mean SE": std / math.sqrt(len(values))},
        "details": {
            "env": env_name, "horizon": horizon, "episodes": int(len(values)),
            "checkpoints": per_checkpoint,
            "checkpoint_spread_se": float(np.std(means, ddof=1) / math.sqrt(len(means))),
            "seed": seed, "seeds": SEEDS, "envs_per_seed": envs_per_seed,
            "env_steps": steps_run, "seconds": round(time.monotonic() - started, 2),
            "env_steps_per_s": round(steps_run / max(time.monotonic() - started, 1e-9)),
            "note": "Reward Mean is the mean return over all episodes (checkpoints x seeds x envs); "
                    "Reward Mean SE its standard error over episodes; checkpoint_spread_se the "
                    "standard error of the mean over the five checkpoints' means",
        },
    }


def grade(env_name: str, horizon: int) -> None:
    """The whole grader: read the context, evaluate, write the scores file."""
    ctx = context()
    seed = DEFAULT_SEED if ctx.seed is None else int(ctx.seed)
    # Test hooks only (set through a task's `env`): smaller, shorter evaluations.
    envs = int(os.environ.get("RGYM_RL_EVAL_ENVS", "") or ENVS_PER_SEED)
    limit = float(os.environ.get("RGYM_RL_TIME_LIMIT_S", "") or TOTAL_LIMIT_S)
    try:
        secret = ctx.secret(f"evaluation-keys-{seed}")
    except RuntimeError as exc:
        raise SystemExit(f"{exc}") from None
    try:
        result = evaluate(env_name, horizon, ctx.submission_dir, seed, envs_per_seed=envs,
                          total_limit_s=limit, secret=secret)
    except MissingSubmission as exc:
        write_error(str(exc), missing_submission=True)
        return
    except (EvaluationError, WorkerError) as exc:
        write_error(str(exc))
        return
    result["details"]["confined"] = ctx.confined
    write_scores(result["scores"], details=result["details"])
