"""Timeout settings that do nothing: the one table the lint reads, and the doctor should read too.

:data:`NOOP_SETTINGS` lists what a script can set that changes no timeout in torch 2.13 (verified
in its source: ``torch/distributed/constants.py`` copies the C++ constant ``_DEFAULT_PG_TIMEOUT``
into ``default_pg_timeout`` once, at import, and ``distributed_c10d`` imports that value by name;
no string ``NCCL_TIMEOUT`` exists in torch's libraries). :mod:`nccl_workbook.doctor` checks the
same environment variables in a live environment and should take its list from here, so that the
two faces cannot disagree. Deprecated aliases are the doctor's table,
:data:`nccl_workbook.doctor.DEPRECATED_ALIASES`, read as it is.

What is *not* here, on purpose: assigning ``torch.distributed.distributed_c10d.default_pg_timeout``
(or ``default_pg_nccl_timeout``) before ``init_process_group`` does change the default, because
``_get_default_timeout`` reads that module global at call time; and a script's own variable such
as seed 000's ``NCCL_TIMEOUT_MINUTES`` works when the script passes it to ``init_process_group``.

Usage::

    from nccl_workbook.lint.settings import NOOP_SETTINGS, SettingKind
    [s.name for s in NOOP_SETTINGS if s.kind is SettingKind.ENV]     # ['NCCL_TIMEOUT', ...]
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["SettingKind", "NoopSetting", "NOOP_SETTINGS", "DEFAULT_PG_TIMEOUT_S"]


class SettingKind(str, enum.Enum):
    """Where the setting is made."""

    #: an environment variable (``os.environ[...] = ...``, ``export ...``)
    ENV = "env"
    #: an attribute assigned in Python (``module.NAME = ...``)
    ATTRIBUTE = "attribute"


@dataclass(frozen=True)
class NoopSetting:
    """One setting that changes nothing, and why."""

    name: str
    kind: SettingKind
    #: why it does nothing (one clause)
    why: str
    #: for attributes: it is a no-op only when the object it is set on is not one of these modules
    #: (empty: a no-op wherever it is set)
    effective_on: tuple[str, ...] = ()


NOOP_SETTINGS: tuple[NoopSetting, ...] = (
    NoopSetting("NCCL_TIMEOUT", SettingKind.ENV,
                "neither NCCL nor torch reads NCCL_TIMEOUT: NCCL has no timeout of its own"),
    NoopSetting("NCCL_TIMEOUT_MS", SettingKind.ENV, "neither NCCL nor torch reads NCCL_TIMEOUT_MS"),
    NoopSetting("NCCL_TIMEOUT_S", SettingKind.ENV, "neither NCCL nor torch reads NCCL_TIMEOUT_S"),
    NoopSetting("_DEFAULT_PG_TIMEOUT", SettingKind.ATTRIBUTE,
                "torch copied the C++ constant `_DEFAULT_PG_TIMEOUT` at import; assigning it later changes nothing"),
    NoopSetting("_DEFAULT_PG_NCCL_TIMEOUT", SettingKind.ATTRIBUTE,
                "torch copied the C++ constant `_DEFAULT_PG_NCCL_TIMEOUT` at import; assigning it later changes nothing"),
    NoopSetting("default_pg_timeout", SettingKind.ATTRIBUTE,
                "`distributed_c10d` imported its own reference at import; only "
                "`torch.distributed.distributed_c10d.default_pg_timeout` is read",
                effective_on=("distributed_c10d", "c10d")),
    NoopSetting("default_pg_nccl_timeout", SettingKind.ATTRIBUTE,
                "`distributed_c10d` imported its own reference at import; only "
                "`torch.distributed.distributed_c10d.default_pg_nccl_timeout` is read",
                effective_on=("distributed_c10d", "c10d")),
)

#: the process-group timeout a script gets when it passes none (NCCL's default in torch 2.13: 10 min;
#: gloo's is 30 min, see :func:`nccl_workbook.lint.source` for how the backend is read)
DEFAULT_PG_TIMEOUT_S: dict[str, float] = {"nccl": 600.0, "gloo": 1800.0}
