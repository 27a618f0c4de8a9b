"""What the linter needs to know of torch's defaults. The settings that do nothing are the doctor's
table (:data:`nccl_workbook.doctor.NOOP_SETTINGS`, looked up with
:func:`nccl_workbook.doctor.noop_setting`): one source of truth for ``doctor`` and ``lint``.
"""

from __future__ import annotations


__all__ = ["DEFAULT_PG_TIMEOUT_S", "DEEPSPEED_DEFAULT_PG_TIMEOUT_S"]


#: the process-group timeout a script gets when it passes none (NCCL's default in torch 2.13: 10 min;
#: gloo's is 30 min, and so is that of a group made with no backend named, ``init_process_group()``, whose NCCL
#: half gets it too: torch's ``_get_default_timeout`` tests the backend named, "undefined" there)
DEFAULT_PG_TIMEOUT_S: dict[str, float] = {"nccl": 600.0, "gloo": 1800.0, "undefined": 1800.0}

#: the timeout DeepSpeed's ``init_distributed()`` passes when given none: ``deepspeed.constants.default_pg_timeout``,
#: 30 min (``DEEPSPEED_TIMEOUT``, in minutes, in newer versions), not torch's 10
DEEPSPEED_DEFAULT_PG_TIMEOUT_S = 1800.0
