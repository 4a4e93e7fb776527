"""The online-RL protocol, grader side: the environment, the interaction budget and the
returns (numpy + gymnasium).  The grader uses its own copy of this file; your
``rgym_check.py`` uses this one, so what you measure locally is computed the same way.

For one seed: a fresh ``gymnasium`` MuJoCo environment (``reset(seed=seed)``), exactly
``train_steps`` environment steps during which the agent acts (``deterministic=False``)
and is shown every transition (``observe``), then ``eval_episodes`` episodes on a
separate environment instance (seeds ``10_000 + seed * 100 + i``) acting
deterministically and learning nothing.  **Average return** = the mean undiscounted
return of those evaluation episodes (what ResearchGym's tables report after 100K
steps); seeds are reported as mean and standard deviation.  Before training, one
deterministic episode measures the untrained agent (``initial_return``): a policy
trained elsewhere and shipped in the code shows up there.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


class AgentError(Exception):
    """The agent (the submission's code) failed; ``str()`` is written for the agent."""


@dataclass
class Protocol:
    env_id: str = "Hopper-v5"
    train_steps: int = 2000
    eval_episodes: int = 5
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    max_episode_steps: int = 1000

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Protocol:
        return cls(**{k: data[k] for k in ("env_id", "train_steps", "eval_episodes", "seeds",
                                             "max_episode_steps") if k in data})


Exchange = Callable[[dict[str, Any], float], dict[str, Any]]
"""Send one JSON message to the driver and return its reply."""


@dataclass
class SeedResult:
    seed: int
    average_return: float
    eval_returns: list[float]
    eval_lengths: list[int]
    train_episodes: int
    train_returns_last: list[float] = field(default_factory=list)
    initial_return: float | None = None


def _ask(exchange: Exchange, message: dict[str, Any], timeout: float, what: str) -> dict[str, Any]:
    reply = exchange(message, timeout)
    if not isinstance(reply, dict):
        raise AgentError(f"{what}: the driver sent something that is not a JSON object")
    if not reply.get("ok"):
        raise AgentError(f"{what} failed:\n{str(reply.get('error', 'no reason given'))[-3000:]}")
    return reply


def _clip_action(reply: dict[str, Any], low: Any, high: Any) -> Any:
    import numpy as np

    action = reply.get("action")
    if not isinstance(action, list) or len(action) != len(low) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in action):
        raise AgentError(f"act must return {len(low)} finite numbers; got {str(action)[:200]}")
    return np.clip(np.asarray(action, dtype=np.float64), low, high).astype(np.float32)


def _obs(x: Any) -> list[float]:
    return [float(v) for v in x]


def make_env(protocol: Protocol) -> Any:
    import gymnasium as gym

    return gym.make(protocol.env_id, max_episode_steps=protocol.max_episode_steps)


def run_seed(exchange: Exchange, protocol: Protocol, seed: int, profile: str, *,
             act_timeout: float = 60, observe_timeout: float = 600,
             start_timeout: float = 600, secret: bytes | None = None) -> SeedResult:
    """Train the agent for exactly ``train_steps`` interactions, then evaluate it.

    The evaluation episodes' environment seeds are ``10000 + 100 x seed + episode``
    (public: what ``rgym_check.py`` uses locally), or, given the grader's ``secret``,
    drawn from it: no policy can then be fitted to the episodes it is scored on."""
    import numpy as np

    def episode_seed(public: int, name: str) -> int:
        if secret is None:
            return public
        return int.from_bytes(hashlib.sha256(secret + b"\0" + name.encode()).digest()[:4], "big")

    env = make_env(protocol)
    low, high = env.action_space.low.astype(np.float64), env.action_space.high.astype(np.float64)
    spec = {"env_id": protocol.env_id, "obs_dim": int(env.observation_space.shape[0]),
            "act_dim": int(env.action_space.shape[0]), "act_low": _obs(low), "act_high": _obs(high),
            "seed": seed, "profile": profile, "train_steps": protocol.train_steps,
            "max_episode_steps": protocol.max_episode_steps}
    _ask(exchange, {"op": "start", "spec": spec}, start_timeout, "make_agent")
    # One deterministic episode before any interaction: a high return here means the
    # policy was trained elsewhere (weights shipped in the code), which the budget forbids.
    initial_return, _ = _episode(exchange, protocol, episode_seed(20_000 + seed, "initial"),
                                 act_timeout, "before training", low, high)
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    episode_return, train_returns = 0.0, []
    for step in range(protocol.train_steps):
        action = _clip_action(_ask(exchange, {"op": "act", "obs": _obs(obs), "deterministic": False},
                                   act_timeout, f"act at step {step}"), low, high)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        episode_return += float(reward)
        _ask(exchange, {"op": "observe", "obs": _obs(obs), "action": _obs(action),
                        "reward": float(reward), "next_obs": _obs(next_obs),
                        "terminated": bool(terminated), "truncated": bool(truncated)},
             observe_timeout, f"observe at step {step}")
        if terminated or truncated:
            train_returns.append(episode_return)
            episode_return = 0.0
            obs, _ = env.reset()
        else:
            obs = next_obs
    env.close()
    returns, lengths = [], []
    for episode in range(protocol.eval_episodes):
        total, length = _episode(exchange, protocol,
                                 episode_seed(10_000 + seed * 100 + episode, f"evaluation-{episode}"),
                                 act_timeout, f"in evaluation episode {episode}", low, high)
        returns.append(total)
        lengths.append(length)
    _ask(exchange, {"op": "end"}, 60, "closing")
    return SeedResult(seed=seed, average_return=float(sum(returns) / len(returns)),
                      eval_returns=returns, eval_lengths=lengths, train_episodes=len(train_returns),
                      train_returns_last=train_returns[-5:], initial_return=initial_return)


def _episode(exchange: Exchange, protocol: Protocol, env_seed: int, act_timeout: float, what: str,
             low: Any, high: Any) -> tuple[float, int]:
    """One deterministic episode on a fresh environment: (return, length)."""
    env = make_env(protocol)
    obs, _ = env.reset(seed=env_seed)
    total, length, done = 0.0, 0, False
    while not done:
        action = _clip_action(_ask(exchange, {"op": "act", "obs": _obs(obs), "deterministic": True},
                                   act_timeout, f"act {what}"), low, high)
        obs, reward, terminated, truncated, _ = env.step(action)
        total, length, done = total + float(reward), length + 1, terminated or truncated
    env.close()
    return total, length


def summary(results: list[SeedResult], digits: int = 4) -> dict[str, Any]:
    values = [r.average_return for r in results]
    mean = math.fsum(values) / len(values)
    std = statistics.stdev(values) if len(values) > 1 else None

    def rnd(v: Any) -> Any:
        if isinstance(v, float):
            return round(v, digits)
        if isinstance(v, list):
            return [rnd(x) for x in v]
        return v
    return {"average_return": rnd(mean), "return_std": rnd(std),
            "seeds": [{k: rnd(v) for k, v in asdict(r).items()} for r in results]}


def dumps(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"
