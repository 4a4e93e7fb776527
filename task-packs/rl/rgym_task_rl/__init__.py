"""rgym task pack: MLGym's reinforcement-learning tasks on gymnax (JAX).

Importing this package (or its plugin) imports no JAX: the tasks are plain
files that the runner copies into workspaces and evaluation folders.
"""

#: The JAX stack the starters and graders need, as pip requirement strings; the task
#: files list the same pins under ``resources.requirements`` (a test keeps them equal).
REQUIREMENTS = [
    "jax==0.10.2",
    "jaxlib==0.10.2",
    "flax==0.12.8",
    "optax==0.2.8",
    "gymnax==1.0.1",
    "six>=1.16",
    "PyYAML>=6.0",
]
