"""What Inspect imports for the ``rgym_inspect`` namespace: importing the modules
registers the task, the sandbox type, the solver and the scorer with Inspect's registry."""

from rgym_inspect.sandbox import RgymSandboxEnvironment
from rgym_inspect.scorer import rgym_scorer
from rgym_inspect.solvers import rgym_agent
from rgym_inspect.tasks import rgym_task

__all__ = ["RgymSandboxEnvironment", "rgym_agent", "rgym_scorer", "rgym_task"]
