"""Fixes for the workbook's scenarios, for use in your own training script.

Each function is documented with the incident it fixes and an example; all are tested on CPU
(gloo) by the workbook's test suite. Import what you need::

    from nccl_workbook.fixes import new_side_group, wait_for_main, sharded
"""

from __future__ import annotations

from nccl_workbook.fixes.rank0_work import new_side_group, shard_indices, sharded, wait_for_main

__all__ = ["new_side_group", "wait_for_main", "shard_indices", "sharded"]
