"""Your own job, live: ``nccl-workbook watch -- COMMAND ...`` runs an unchanged training script under
its launcher and names late ranks while it runs.

- :mod:`nccl_workbook.watch.command`: the watching process (hub, live status, stall reports, the
  end-of-job report and outputs); :func:`watch` is its Python face.
- :mod:`nccl_workbook.watch.agent`: what runs inside each rank (tracer, publisher, hooks), started by
  the bootstrap ``sitecustomize`` in ``watch/bootstrap/``.
- :mod:`nccl_workbook.watch.hooks`: DDP's gradient all-reduce and optimizer steps made visible.
- :mod:`nccl_workbook.watch.report`: the :class:`WatchReport` and its JSON contract.
"""

from __future__ import annotations

from nccl_workbook.watch.command import WatchError, watch
from nccl_workbook.watch.report import RankEnd, WatchReport

__all__ = ["watch", "WatchError", "WatchReport", "RankEnd"]
