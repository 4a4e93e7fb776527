"""rgym tasks inside Inspect AI.

Installing this distribution registers, through Inspect's ``inspect_ai`` entry
points (namespace ``rgym_inspect``):

* the task ``rgym_inspect/rgym_task`` (:func:`rgym_inspect.tasks.rgym_task`): one
  rgym task, one Inspect sample (``-T epochs=N`` repeats it), solved by Inspect's ReAct agent with its
  ``bash()`` and ``python()`` tools unless ``--solver`` says otherwise;
* the sandbox type ``rgym`` (:class:`rgym_inspect.sandbox.RgymSandboxEnvironment`):
  one rgym episode per sample (:mod:`rgym_inspect.episode`), run by one of rgym's
  sandbox backends (``local`` by default), whose steps are Inspect's tool calls;
* the solver ``rgym_inspect/rgym_agent`` (:func:`rgym_inspect.solvers.rgym_agent`): an
  rgym agent playing the sample as one whole ``rgym run`` episode;
* the scorer ``rgym_inspect/rgym_scorer`` (:func:`rgym_inspect.scorer.rgym_scorer`):
  the episode's final grading and integrity verdict, as an Inspect score.

Only rgym's public API (:mod:`rgym_core`) is used.
"""

__version__ = "0.1.0"
