"""nccl-workbook: reproduce, diagnose and fix collective timeouts in PyTorch distributed training.

The package behind the notebooks in ``notebooks/`` and the ``nccl-workbook`` command:

- :mod:`nccl_workbook.cluster`   ``RankCluster``: one ipyparallel engine per rank, runs with deadlines
- :mod:`nccl_workbook.scenarios` one module per incident: the rank program, broken and fixed variants
- :mod:`nccl_workbook.fixes`     the fixes, importable into your own training script
- :mod:`nccl_workbook.trace`     per-rank step/collective timings as one tidy DataFrame
- :mod:`nccl_workbook.diagnose`  which rank was late or missing, in which collective
- :mod:`nccl_workbook.plots`     DataFrame -> matplotlib Figure
- :mod:`nccl_workbook.runner`    ``run_scenario``: cluster + scenario + diagnosis -> ``RunResult``

Importing the package does not import torch; the modules that need it import it where they run.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
