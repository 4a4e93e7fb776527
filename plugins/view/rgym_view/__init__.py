"""rgym-view: look at what agents did.

``rgym view PATH`` writes one self-contained HTML file (runs list and
trajectories, no server, no network), ``rgym analyze PATH`` tabulates and plots
action mixes, endings and failure modes, ``rgym export inspect PATH`` writes
Inspect AI ``.eval`` logs.  Modules: :mod:`rgym_view.data` (run directories as
the viewer's compact data), :mod:`rgym_view.html` (the HTML file),
:mod:`rgym_view.serve` (``--serve``), :mod:`rgym_view.analysis` and
:mod:`rgym_view.plots` (``rgym analyze``), :mod:`rgym_view.inspect_log`
(``rgym export inspect``), :mod:`rgym_view.report` (``rgym report``: a results
page of a sweep) and :mod:`rgym_view.mlgym_traj` (``rgym import mlgym-traj``:
MLGym's ``.traj`` files as run folders).
"""

__version__ = "0.1.0"
