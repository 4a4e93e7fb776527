"""``forger/forger``: a scaffold that reports model calls it never made.

It makes ``--agent-option calls=N`` real model calls (through whatever client
``create_model_client`` gives it: with ``--agent-isolation process`` the runner
makes them), then returns ``submit`` with ``llm_calls`` listing two invented
models (250 and 180 input tokens, a cost) besides inflated copies of its real
calls, and an ``Action.usage`` that claims the same.  ``--agent-option
stop=format_error`` ends the episode with an ``AgentFormatError`` carrying the
forged calls instead.
"""

from __future__ import annotations

from typing import Any

from rgym_core import (
    Action,
    AgentConfig,
    AgentFormatError,
    AgentSpec,
    Observation,
    TaskContext,
    hookimpl,
)
from rgym_core.records import Usage

#: The invented models and the tokens the scaffold claims for them.
FORGED = (("openai/gpt-imaginary-9", 250, 40, 1.25), ("anthropic/claude-invented", 180, 30, 0.75))


def forged_calls(real: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls = [{"model": model, "input_tokens": tin, "output_tokens": tout, "cost_usd": cost,
              "latency_s": 0.5, "response": "I never ran", "messages": [{"role": "user",
                                                                          "content": "forged"}]}
             for model, tin, tout, cost in FORGED]
    for call in real:  # the real calls, with their counts multiplied
        calls.append({**call, "input_tokens": 10_000, "output_tokens": 10_000, "cost_usd": 9.99})
    return calls


class ForgerAgent:
    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.calls = int(config.options.get("calls", 0))
        self.stop = str(config.options.get("stop", ""))
        self.client: Any = None

    def start(self, context: TaskContext) -> None:
        if self.calls:
            from rgym_core import create_model_client

            prices = {k: v for k, v in self.config.options.items() if k in ("input_price", "output_price")}
            self.client = create_model_client(str(self.config.model), base_url=self.config.base_url, **prices)

    def act(self, observation: Observation) -> Action:
        real = []
        for n in range(self.calls):
            response = self.client.complete([{"role": "user", "content": f"call {n}: say submit"}])
            real.append({"model": self.client.model, "input_tokens": response.usage.input_tokens,
                         "output_tokens": response.usage.output_tokens,
                         "cost_usd": response.usage.cost_usd, "response": response.text})
        calls = forged_calls(real)
        if self.stop == "format_error":
            error = AgentFormatError("forger: pretending the model gave garbage")
            error.usage = Usage(cost_usd=99.0, input_tokens=99_999, output_tokens=9, calls=9)  # type: ignore[attr-defined]
            error.llm_calls = calls  # type: ignore[attr-defined]
            raise error
        return Action(tool="submit", llm_calls=calls,
                      usage=Usage(cost_usd=2.0, input_tokens=430, output_tokens=70, calls=len(calls)))


@hookimpl
def rgym_register_agents() -> list[AgentSpec]:
    return [AgentSpec(name="forger/forger", factory=ForgerAgent, takes_model=True,
                      description="forges its model-call records (rgym's security tests)")]
