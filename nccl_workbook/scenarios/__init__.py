"""The scenario registry: one module per incident, each defining ``SCENARIO``.

To add a scenario: write ``nccl_workbook/scenarios/<your_id>.py`` following
``rank0_work_before_barrier.py`` (a ``Params`` dataclass, a ``program(ctx, params)``, a
``SCENARIO = Scenario(...)`` with a ``broken`` variant, named fixes and its notebook's file name),
add the module to ``_MODULES`` below, and write the notebook. Everything else reads this registry:
the CLI (``scenarios``, ``run``), the widgets, triage's pointers to notebooks, the tests that run
every scenario. :func:`register` adds a scenario defined elsewhere (a user's, or a test's).
"""

from __future__ import annotations

import importlib

from nccl_workbook.scenarios.base import Scenario, Variant

__all__ = ["Scenario", "Variant", "SCENARIOS", "get_scenario", "scenario_ids", "register", "unregister"]

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
    "init_rendezvous_timeout",
)

_loaded = [importlib.import_module(f"{__name__}.{_name}").SCENARIO for _name in _MODULES]
#: id -> scenario, in notebook order (01, 02, …), whatever the order of ``_MODULES``
SCENARIOS: dict[str, Scenario] = {s.id: s for s in sorted(_loaded, key=lambda s: s.notebook)}


def register(scenario: Scenario) -> Scenario:
    """Add a scenario to the registry (kept in notebook order); its id must be new."""
    if not isinstance(scenario, Scenario):
        raise TypeError(f"register() takes a Scenario, got {type(scenario).__name__}")
    if scenario.id in SCENARIOS:
        raise ValueError(f"a scenario with id {scenario.id!r} is already registered")
    merged = sorted([*SCENARIOS.values(), scenario], key=lambda s: s.notebook)
    SCENARIOS.clear()
    SCENARIOS.update((s.id, s) for s in merged)
    return scenario


def unregister(scenario_id: str) -> None:
    """Remove a scenario added with :func:`register` (a ``KeyError`` listing the known ids if absent)."""
    get_scenario(scenario_id)
    del SCENARIOS[scenario_id]


def scenario_ids() -> list[str]:
    return list(SCENARIOS)


def get_scenario(scenario_id: str) -> Scenario:
    """The scenario with this id, or a ``KeyError`` that lists the known ones."""
    try:
        return SCENARIOS[scenario_id]
    except KeyError:
        raise KeyError(f"Unknown scenario {scenario_id!r}; known: {', '.join(SCENARIOS)}") from None
