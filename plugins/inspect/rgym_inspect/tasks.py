"""The task ``rgym_inspect/rgym_task``: one rgym task as an Inspect task.

``inspect eval rgym_inspect/rgym_task -T task=mlgym/prisoners-dilemma --model M``
builds one sample whose input is the task's description, whose sandbox is the
``rgym`` type (an rgym episode, whose steps are the sample's tool calls) and whose
scorer is that episode's final grading.  ``epochs`` repeat the sample (``rgym export inspect`` writes an rgym run of
each seed as one epoch, in the same way).  The budget comes from the task:
the episode applies rgym's own (steps, wall-clock, cost, action timeouts), and
Inspect gets the same as its limits (``max_steps`` its ``turn_limit``, ``time_limit_s``
its ``time_limit``, ``token_limit`` and ``cost_limit_usd``, ``action_timeout_s`` the
tools' timeout), so the model stops when the episode does; a sample that hits a
limit is still scored.  The default
solver is Inspect's ReAct agent with ``bash()`` and ``python()``; ``--solver`` replaces it.
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.agent import react
from inspect_ai.dataset import Sample
from inspect_ai.tool import bash, python
from inspect_ai.util import SandboxEnvironmentSpec

from rgym_inspect.sandbox import RgymSandboxConfig, load_task_spec
from rgym_inspect.scorer import rgym_scorer

PROMPT = """You are working on a research task in the workspace (your current folder).
The task's grader scores the workspace as you leave it when you submit.

{description}"""


@task
def rgym_task(task: str, profile: str | None = None, sandbox: str = "local", epochs: int = 1,
              grader_seed: int | None = None, data_dir: str | None = None,
              runs_dir: str | None = None) -> Task:
    """The rgym task ``task`` (``pack/task``, as ``rgym list tasks`` names it) with its
    ``profile``, run by the rgym sandbox backend ``sandbox``; each sample's run
    directory goes under ``runs_dir`` (default: rgym's, ``runs``)."""
    spec = load_task_spec(task, profile)
    budget = spec.budget
    timeout = int(budget.action_timeout_s)
    config = RgymSandboxConfig(task=spec.id, profile=spec.profile, backend=sandbox, data_dir=data_dir,
                               grader_seed=grader_seed, runs_dir=runs_dir)
    sample = Sample(id=spec.id, input=PROMPT.format(description=spec.description.strip()),
                    metadata={"rgym_task": spec.id, "rgym_profile": spec.profile or ""})
    return Task(
        dataset=[sample],
        solver=react(tools=[bash(timeout=timeout), python(timeout=timeout)]),
        scorer=rgym_scorer(),
        sandbox=SandboxEnvironmentSpec("rgym", config),
        epochs=epochs,
        turn_limit=budget.max_steps,
        time_limit=int(budget.time_limit_s) if budget.time_limit_s else None,
        token_limit=budget.token_limit,
        cost_limit=budget.cost_limit_usd,
        name=f"rgym/{spec.id}",
        version=spec.version,
        metadata={"rgym_task": spec.id, "primary_metric": spec.primary_metric.name},
    )
