"""Example scripts that ship with the workbook: stand-ins for a user's own training script.

They import nothing from ``nccl_workbook``: the workbook must find their problems from outside
(``nccl-workbook attach``, ``nccl-workbook watch``), exactly as it would in the user's own script.

- ``train_ddp.py``: a small DDP training script in nanoGPT's shape, with faults that can be
  planted from the command line (``--fault rank0-eval|stall-data|raise|skip-step``).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TRAIN_DDP"]

#: path of the example training script, for ``torchrun ... TRAIN_DDP``
TRAIN_DDP: Path = Path(__file__).with_name("train_ddp.py")
