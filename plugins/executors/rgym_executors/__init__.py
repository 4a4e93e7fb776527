"""rgym sweep executors: ``--executor ray`` and ``--executor slurm``.

Ray and submitit are imported only when a sweep uses them."""
