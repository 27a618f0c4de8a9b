"""The lint's rules: id, why the pattern can hang, the fix, and the scenario that reproduces it.

One row per rule id (the ids are a contract: ``--json`` output and tests use them). The notebook
that reproduces a rule is not written here: it is looked up in the scenario registry
(:data:`nccl_workbook.scenarios.SCENARIOS`), so renaming a notebook needs no change here.

A leaf module apart from that lookup; the checks live in :mod:`nccl_workbook.lint.checks`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Rule", "RuleInfo", "RULES", "notebook_for"]


class Rule(str, enum.Enum):
    """The hazards the lint knows; the value is the rule id."""

    COLLECTIVE_IN_RANK_BRANCH = "collective-in-rank-branch"
    RANK0_LONG_WORK = "rank0-long-work-before-collective"
    UNEVEN_COLLECTIVE_COUNT = "uneven-collective-count"
    EXCEPTION_ON_ONE_RANK = "exception-on-one-rank"
    NOOP_TIMEOUT_SETTING = "noop-timeout-setting"
    DATALOADER_TIMEOUT = "dataloader-timeout-ge-pg-timeout"


@dataclass(frozen=True)
class RuleInfo:
    """What every finding of one rule says: why it hangs, the fix, where to see it happen."""

    rule: Rule
    #: the workbook scenario that reproduces the pattern (its notebook comes from the registry)
    scenario: str
    #: one sentence: why this can hang or time out
    why: str
    #: the fix, naming the ``nccl_workbook.fixes`` helper where there is one
    fix: str


RULES: dict[Rule, RuleInfo] = {
    info.rule: info
    for info in (
        RuleInfo(
            rule=Rule.COLLECTIVE_IN_RANK_BRANCH,
            scenario="collective-mismatch",
            why=("a collective that only some ranks reach waits for the others until the process-group "
                 "timeout, or pairs with a different collective on them (a desync)"),
            fix=("call it on every rank (move it out of the `if`); when ranks must decide together, decide with "
                 "`nccl_workbook.fixes.all_ranks(flag)` / `any_rank(flag)` so that every rank takes the same branch"),
        ),
        RuleInfo(
            rule=Rule.RANK0_LONG_WORK,
            scenario="rank0-work-before-barrier",
            why=("they wait there, with the process-group timeout running (10 min by default for NCCL), for as "
                 "long as this work takes"),
            fix=("let the others wait on a side group with its own long timeout: "
                 "`nccl_workbook.fixes.wait_for_main(fn)` (or split the work over all ranks with "
                 "`nccl_workbook.fixes.sharded`)"),
        ),
        RuleInfo(
            rule=Rule.UNEVEN_COLLECTIVE_COUNT,
            scenario="uneven-eval-allgather",
            why=("ranks that run the loop fewer times (or leave it early) stop calling the collective while "
                 "the others still wait in it"),
            fix=("make every rank call it the same number of times: agree on the count with "
                 "`nccl_workbook.fixes.max_across_ranks(n)` and pad, or use `nccl_workbook.fixes.UnevenAllGather`"),
        ),
        RuleInfo(
            rule=Rule.EXCEPTION_ON_ONE_RANK,
            scenario="exception-on-one-rank",
            why=("if the rank leaves, they wait until the process-group timeout; if it goes on, its next "
                 "collectives pair with the wrong ones of theirs (a desync, or a hang later)"),
            fix=("let every rank learn of the failure at once: wrap the step in `with nccl_workbook.fixes.FailFast(...)`, "
                 "or decide to skip the batch together with `nccl_workbook.fixes.any_rank(failed)`"),
        ),
        RuleInfo(
            rule=Rule.NOOP_TIMEOUT_SETTING,
            scenario="timeout-settings",
            why="the job keeps the default timeout (10 min for NCCL) while you believe it changed",
            fix=("pass the timeout in code: `dist.init_process_group(backend, timeout=timedelta(minutes=30))`, "
                 "reading your own variable with `nccl_workbook.fixes.timeout_from_env`"),
        ),
        RuleInfo(
            rule=Rule.DATALOADER_TIMEOUT,
            scenario="dataloader-stall",
            why=("a stalled loader on one rank is then reported as a collective timeout on the other ranks "
                 "(naming no data) before its own DataLoader timeout fires"),
            fix="set the loader timeout well below the group's: `timeout=nccl_workbook.fixes.loader_timeout_for(pg_timeout_s)`",
        ),
    )
}


def notebook_for(scenario: str) -> str:
    """The notebook of a scenario, from the registry (``''`` when the scenario is unknown)."""
    from nccl_workbook.scenarios import SCENARIOS

    s = SCENARIOS.get(scenario)
    return s.notebook if s is not None else ""
