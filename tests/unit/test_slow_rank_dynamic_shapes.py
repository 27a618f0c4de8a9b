"""slow-rank-dynamic-shapes: the batch plans (coverage, equal step counts, balance), the scenario's
data and params, the seed's .expand()/.repeat() claim on a small model, and the step-time plot."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nccl_workbook import fixes, plots
from nccl_workbook.scenarios import get_scenario
from nccl_workbook.scenarios.slow_rank_dynamic_shapes import (
    Params, compare_expand_repeat, make_batch, make_lengths, padded_len, plan_for, seed_literal_expand_error,
)

lengths_st = st.lists(st.integers(1, 300), min_size=1, max_size=60)


def _tokens_covered(plan: fixes.Plan) -> dict[int, set[int]]:
    covered: dict[int, set[int]] = {}
    for rank in plan:
        for batch in rank:
            for p in batch:
                covered.setdefault(p.index, set()).update(range(p.start, p.start + p.length))
    return covered


@settings(max_examples=60, deadline=None)
@given(lengths_st, st.integers(1, 5), st.integers(1, 400))
def test_token_budget_covers_every_token_within_budget(lengths: list[int], world: int, budget: int) -> None:
    plan = fixes.token_budget(lengths, world, budget)
    assert len({len(rank) for rank in plan}) == 1  # the same number of steps on every rank
    for rank in plan:
        for batch in rank:
            assert len(batch) * max(p.length for p in batch) <= budget
    assert _tokens_covered(plan) == {i: set(range(n)) for i, n in enumerate(lengths)}


@settings(max_examples=60, deadline=None)
@given(lengths_st, st.integers(1, 5), st.integers(1, 6), st.integers(1, 100))
def test_fixed_length_pieces_cover_everything(lengths: list[int], world: int, batch: int, max_len: int) -> None:
    plan = fixes.fixed_length(lengths, world, batch, max_len)
    assert len({len(rank) for rank in plan}) == 1
    assert all(p.length <= max_len for rank in plan for b in rank for p in b)
    assert _tokens_covered(plan) == {i: set(range(n)) for i, n in enumerate(lengths)}


@settings(max_examples=60, deadline=None)
@given(lengths_st, st.integers(1, 5), st.integers(1, 6))
def test_length_grouped_and_contiguous_use_each_sample_once(lengths: list[int], world: int, batch: int) -> None:
    for plan in (fixes.length_grouped(lengths, world, batch), fixes.contiguous_shards(lengths, world, batch)):
        assert len({len(rank) for rank in plan}) == 1
        used = [p.index for rank in plan for b in rank for p in b]
        assert len(used) == len(set(used)) == (len(lengths) // (world * batch)) * world * batch
        assert all(len(b) == batch for rank in plan for b in rank)


def test_plans_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="world_size"):
        fixes.length_grouped([1, 2], 0, 1)
    with pytest.raises(ValueError, match="at least one token"):
        fixes.token_budget([0, 3], 1, 10)
    with pytest.raises(ValueError, match="max_tokens"):
        fixes.token_budget([3], 1, 0)
    with pytest.raises(ValueError, match="max_len"):
        fixes.fixed_length([3], 1, 1, 0)


def _worst_wait_s(variant: str) -> float:
    """The longest a rank waits for the slowest one in any step, by the scenario's cost model."""
    p = get_scenario("slow-rank-dynamic-shapes").params_for(variant)
    plan = plan_for(p, 4)
    return max(max(costs) - min(costs) for costs in (
        [p.step_cost_s(len(plan[r][s]), padded_len(plan[r][s], p)) for r in range(4)] for s in range(len(plan[0]))))


def test_only_the_broken_plan_makes_a_rank_wait_past_the_timeout() -> None:
    s = get_scenario("slow-rank-dynamic-shapes")
    assert _worst_wait_s("broken") > 1.5 * s.default_timeout_s  # the culprit is late by a clear margin
    for fix in s.fix_names:
        assert _worst_wait_s(fix) < 0.5 * s.default_timeout_s, fix


def test_the_long_documents_land_on_the_long_rank() -> None:
    p = Params()
    plan = plan_for(p, 4)
    assert [padded_len(plan[r][p.long_step], p) for r in range(4)] == [106, 125, 1024, 125]
    tokens, mask = make_batch(plan[2][p.long_step], p)
    assert tuple(tokens.shape) == (4, 1024) and not bool(mask.any())
    two = plan_for(p, 2)  # a 2-rank run: the last rank gets the long documents
    assert padded_len(two[1][p.long_step], p) == 1024 and get_scenario("slow-rank-dynamic-shapes").expected_culprits(p, 2) == (1,)
    assert len(make_lengths(p, 2)) == 2 * p.batch * p.steps
    with pytest.raises(ValueError, match="long_rank must be >= 0"):
        Params(long_rank=-1)
    with pytest.raises(ValueError, match="batching must be one of"):
        Params(batching="bucketed")
    with pytest.raises(ValueError, match="expand_mode"):
        Params(expand_mode="view")


def test_seed_claim_expand_vs_repeat_gradients_identical() -> None:
    assert "expanded size" in (seed_literal_expand_error() or "")  # the line as printed cannot run
    c = compare_expand_repeat(batch=2, length=48, reps=1)
    assert c.grads_identical and c.max_abs_grad_diff == 0.0 and c.loss_expand == c.loss_repeat
    assert c.repeat_extra_bytes == 2 * 48 * Params().concepts * 4


def test_step_time_vs_length_plot() -> None:
    df = pd.DataFrame({
        "variant": ["broken"] * 2 + ["fixed"] * 2, "rank": [0, 1, 0, 1], "padded_len": [100, 1024, 256, 256],
        "compute_s": [0.05, 5.0, 0.3, 0.3], "wait_s": [3.0, 0.0, 0.01, 0.02],
        "status": ["timeout", "peer_closed", "ok", "ok"],
    })
    fig = plots.step_time_vs_length(df, timeouts_s={"broken": 3.0, "fixed": 3.0}, title="t")
    assert len([a for a in fig.axes if a.get_visible()]) == 2
    assert "tokens" in fig.axes[0].get_xlabel() or "tokens" in fig.axes[-1].get_xlabel()
    with pytest.raises(ValueError, match="missing"):
        plots.step_time_vs_length(df.drop(columns=["wait_s"]))
    with pytest.raises(ValueError, match="empty"):
        plots.step_time_vs_length(df.iloc[0:0])
