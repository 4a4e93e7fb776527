"""Untrusted agent scaffolds: ``rgym run --agent-isolation process``.

By default (``--agent-isolation none``) a scaffold runs inside the runner's
process: it is trusted code, as any Python package you import (it could read the
task's hidden files or patch the grader).  With ``--agent-isolation process`` the
scaffold runs in its own process, confined (:mod:`rgym_core.isolation.agent_confinement`:
an unprivileged uid, bubblewrap, no network, no task files, no run directory, no
view of the runner), and talks to the runner over a pipe
(:mod:`~rgym_core.agent_process.protocol`): actions out, observations in, model
calls made by the runner (:class:`~rgym_core.agent_process.host.ModelGateway`), so
API keys stay with the runner and cost and token limits still hold.

* :mod:`~rgym_core.agent_process.protocol`: the messages and their framing;
* :mod:`~rgym_core.agent_process.host`: :class:`ProcessAgent`, the runner's side;
* :mod:`~rgym_core.agent_process.child`: the scaffold's side;
* :mod:`rgym_core.isolation.agent_confinement` (with the other isolation code):
  what the process sees and runs as.
"""

from __future__ import annotations

from typing import Any

#: The values of ``--agent-isolation``.
ISOLATION_MODES = ("none", "process")


def isolated_agent(registration: Any, config: Any, mode: str, *, registry: Any,
                   budget: Any = None) -> Any:
    """The agent of ``registration`` (a :class:`rgym_core.registry.Registered`
    agent spec) built for ``mode``: ``none`` calls its factory in this process,
    ``process`` starts it confined (:class:`~rgym_core.agent_process.host.ProcessAgent`).
    Raises ``ValueError`` for an unknown mode and ``RuntimeError`` when the agent
    process cannot start (the message says why)."""
    if mode == "none":
        return registration.item.factory(config)
    if mode != "process":
        raise ValueError(f"unknown agent isolation {mode!r}; choose one of {', '.join(ISOLATION_MODES)}")
    from rgym_core.agent_process.host import ProcessAgent

    return ProcessAgent(registration, config, registry=registry, budget=budget)


def __getattr__(name: str) -> Any:
    if name in ("ProcessAgent", "AgentProcessError", "IsolationSettings", "ModelGateway"):
        from rgym_core.agent_process import host

        return getattr(host, name)
    raise AttributeError(name)


__all__ = ["ISOLATION_MODES", "AgentProcessError", "IsolationSettings", "ModelGateway", "ProcessAgent",
           "isolated_agent"]
