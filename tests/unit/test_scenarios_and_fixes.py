from __future__ import annotations

import pytest
import torch.distributed as dist
from hypothesis import given
from hypothesis import strategies as st

from nccl_workbook import fixes
from nccl_workbook.scenarios import SCENARIOS, Scenario, Variant, get_scenario
from nccl_workbook.scenarios.rank0_work_before_barrier import Params


def test_registry_and_unknown_id() -> None:
    assert "rank0-work-before-barrier" in SCENARIOS
    with pytest.raises(KeyError, match="known: rank0-work-before-barrier"):
        get_scenario("nope")


def test_every_scenario_is_well_formed() -> None:
    for s in SCENARIOS.values():
        assert s.variant_names[0] == "broken" and s.fix_names
        assert s.variant("broken").expect_ok is False
        for v in s.fix_names:
            assert s.variant(v).expect_ok
            s.params_for(v)  # defaults construct
        assert s.notebook.startswith(("0", "1", "2")) and s.notebook.endswith(".ipynb")


def test_variant_params_and_timeouts() -> None:
    s = get_scenario("rank0-work-before-barrier")
    p = s.params_for("shard-work", seconds_per_sample=0.1)
    assert p.mode == "shard" and p.seconds_per_sample == 0.1
    assert s.timeout_for("broken", 3.0, p) == 3.0
    assert s.timeout_for("longer-timeout", 3.0, s.params_for("longer-timeout")) == pytest.approx(3 * 4.8)
    with pytest.raises(KeyError, match="known: broken, longer-timeout"):
        s.variant("faster")
    with pytest.raises(ValueError, match="unknown parameter"):
        s.params_for("broken", bogus=1)
    with pytest.raises(ValueError, match="mode must be"):
        Params(mode="other")


def test_scenario_definition_is_checked() -> None:
    kw = dict(title="t", symptom="s", seed="0", program=lambda c, p: {}, params_type=Params,
              expected_culprits=lambda p, w: (0,), expected_op="BARRIER", notebook="x.ipynb")
    with pytest.raises(ValueError, match="kebab-case"):
        Scenario(id="Bad_Id", variants=(Variant("broken", ""),), **kw)
    with pytest.raises(ValueError, match="needs a 'broken' variant"):
        Scenario(id="ok-id", variants=(Variant("fix", ""),), **kw)
    with pytest.raises(ValueError, match="unknown params"):
        Scenario(id="ok-id", variants=(Variant("broken", "", params={"nope": 1}),), **kw)


@given(st.integers(0, 500), st.integers(1, 16))
def test_shard_indices_partition(n: int, world: int) -> None:
    parts = [fixes.shard_indices(n, r, world) for r in range(world)]
    flat = [i for p in parts for i in p]
    assert flat == list(range(n))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_shard_indices_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        fixes.shard_indices(10, 4, 4)
    with pytest.raises(ValueError):
        fixes.shard_indices(-1, 0, 1)


def test_fixes_on_a_one_rank_group() -> None:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        side = fixes.new_side_group(timeout_s=30)
        assert fixes.wait_for_main(lambda x: x * 2, 21, group=side) == 42
        assert fixes.sharded(lambda i: i * i, 5) == [0, 1, 4, 9, 16]
        with pytest.raises(ValueError):
            fixes.new_side_group(timeout_s=0)
    finally:
        dist.destroy_process_group()


def test_triage_points_at_the_registered_notebooks() -> None:
    from pathlib import Path

    from nccl_workbook.triage.findings import notebook_for

    root = Path(__file__).resolve().parents[2]
    for sid, s in SCENARIOS.items():
        assert notebook_for(sid) == s.notebook
        assert (root / "notebooks" / s.notebook).exists(), s.notebook


def _throwaway_program(ctx, params):  # noqa: ANN001, ANN202 - a module-level rank program
    return {}


def test_a_registered_scenario_is_seen_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    """Adding a scenario is its module plus its notebook: the CLI, the widget and triage's pointer to
    the notebook all read the registry, nothing else needs editing."""
    import json

    from nccl_workbook import cli
    from nccl_workbook.scenarios import register, unregister
    from nccl_workbook.triage.findings import notebook_for

    throwaway = Scenario(
        id="throwaway-test", title="t", symptom="a test's scenario", seed="none", program=_throwaway_program,
        params_type=Params, variants=(Variant("broken", "b", expect_ok=False), Variant("fixed", "f")),
        expected_culprits=lambda p, w: (0,), expected_op="BARRIER", notebook="99_throwaway.ipynb")
    register(throwaway)
    try:
        with pytest.raises(ValueError, match="already registered"):
            register(throwaway)
        assert list(SCENARIOS)[-1] == "throwaway-test"  # notebook order
        assert cli.main(["scenarios", "--json"]) == 0
        listed = {s["id"]: s for s in json.loads(capsys.readouterr().out)}
        assert listed["throwaway-test"]["variants"] == ["broken", "fixed"]
        assert notebook_for("throwaway-test") == "99_throwaway.ipynb"
        pytest.importorskip("ipywidgets")
        from nccl_workbook.cluster import RankCluster
        from nccl_workbook.widgets import ScenarioPanel

        panel = ScenarioPanel(RankCluster(n_ranks=2), "throwaway-test")
        assert set(panel.variant_boxes) == {"broken", "fixed"}
    finally:
        unregister("throwaway-test")
    assert "throwaway-test" not in SCENARIOS
    with pytest.raises(KeyError, match="known: rank0-work-before-barrier"):
        unregister("throwaway-test")
