"""The scenario registry: one module per incident, each defining ``SCENARIO``.

To add a scenario: write ``nccl_workbook/scenarios/<your_id>.py`` following
``rank0_work_before_barrier.py`` (a ``Params`` dataclass, a ``program(ctx, params)``, a
``SCENARIO = Scenario(...)`` with a ``broken`` variant and named fixes), then add the module to
``_MODULES`` below. The CLI, the runner and the tests pick it up from here.
"""

from __future__ import annotations

import importlib

from nccl_workbook.scenarios.base import Scenario, Variant

__all__ = ["Scenario", "Variant", "SCENARIOS", "get_scenario", "scenario_ids"]

_MODULES = (
    "rank0_work_before_barrier",
    "collective_mismatch",
    "slow_rank_dynamic_shapes",
    "timeout_settings",
    "slow_metrics_on_rank0",
    "exception_on_one_rank",
    "dataloader_stall",
    "unused_parameters",
    "fd_exhaustion",
    "uneven_eval_allgather",
)

_loaded = [importlib.import_module(f"{__name__}.{_name}").SCENARIO for _name in _MODULES]
#: id -> scenario, in notebook order (01, 02, …), whatever the order of ``_MODULES``
SCENARIOS: dict[str, Scenario] = {s.id: s for s in sorted(_loaded, key=lambda s: s.notebook)}


def scenario_ids() -> list[str]:
    return list(SCENARIOS)


def get_scenario(scenario_id: str) -> Scenario:
    """The scenario with this id, or a ``KeyError`` that lists the known ones."""
    try:
        return SCENARIOS[scenario_id]
    except KeyError:
        raise KeyError(f"Unknown scenario {scenario_id!r}; known: {', '.join(SCENARIOS)}") from None
