"""timeout-settings: the timeout fixes on a 1-rank gloo group, the settings' apply/restore, params
(no cluster needed)."""

from __future__ import annotations

import datetime
import os

import pytest
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from nccl_workbook import fixes
from nccl_workbook.scenarios import get_scenario
from nccl_workbook.scenarios.timeout_settings import SETTINGS, Params, ProbeParams, _applied


@pytest.fixture
def one_rank_group():  # noqa: ANN201
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=datetime.timedelta(seconds=7))
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_group_timeout_is_read_from_torch(one_rank_group: None) -> None:
    assert fixes.group_timeout_s() == 7.0
    assert fixes.group_timeout_s(dist.new_group(timeout=datetime.timedelta(seconds=11))) == 11.0
    # a new group without timeout= gets torch's built-in default, not the default group's timeout
    assert fixes.group_timeout_s(dist.new_group()) == 1800.0


def test_timeout_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NWB_TEST_TIMEOUT", "0.5")
    assert fixes.timeout_from_env("NWB_TEST_TIMEOUT", 30) == datetime.timedelta(seconds=30)
    assert fixes.timeout_from_env("NWB_TEST_TIMEOUT", 30, unit="hours") == datetime.timedelta(minutes=30)
    monkeypatch.delenv("NWB_TEST_TIMEOUT")
    assert fixes.timeout_from_env("NWB_TEST_TIMEOUT", 2, unit="seconds") == datetime.timedelta(seconds=2)
    monkeypatch.setenv("NWB_TEST_TIMEOUT", "ten")
    with pytest.raises(ValueError, match="not a number of minutes"):
        fixes.timeout_from_env("NWB_TEST_TIMEOUT", 30)
    monkeypatch.setenv("NWB_TEST_TIMEOUT", "-1")
    with pytest.raises(ValueError, match="must be > 0"):
        fixes.timeout_from_env("NWB_TEST_TIMEOUT", 30)
    with pytest.raises(ValueError, match="unit must be one of"):
        fixes.timeout_from_env("NWB_TEST_TIMEOUT", 30, unit="days")


def test_wait_with_timeout_on_one_rank(one_rank_group: None) -> None:
    assert fixes.wait_with_timeout(lambda x: x + 1, 41, timeout_s=60) == 42
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        fixes.wait_with_timeout(lambda: None, timeout_s=0)


def test_settings_are_applied_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NCCL_TIMEOUT", raising=False)
    monkeypatch.setenv("NCCL_BLOCKING_WAIT", "0")
    default_before = c10d.default_pg_timeout
    assert not hasattr(c10d, "_DEFAULT_PG_TIMEOUT")  # the name seed 000 assigns does not exist
    by_name = {s.name: s for s in SETTINGS}
    for s in SETTINGS:
        with _applied(s, 1.0):
            for k, v in s.env:
                assert os.environ[k] == v
            if s.patch:
                assert getattr(c10d, s.patch) == datetime.timedelta(seconds=1)
        if s.patch:
            assert getattr(c10d, s.patch, None) == (default_before if s.patch == "default_pg_timeout" else None)
    assert "NCCL_TIMEOUT" not in os.environ and os.environ["NCCL_BLOCKING_WAIT"] == "0"
    assert not hasattr(c10d, "_DEFAULT_PG_TIMEOUT") and c10d.default_pg_timeout == default_before
    assert len(by_name) == len(SETTINGS)


def test_params_and_variants() -> None:
    with pytest.raises(ValueError, match="wait must be one of"):
        Params(wait="forever")
    with pytest.raises(ValueError, match="short_s < late_s"):
        ProbeParams(short_s=3, late_s=2)
    s = get_scenario("timeout-settings")
    p = s.params_for("init-timeout")
    assert s.timeout_for("init-timeout", 3.0, p) == pytest.approx(3 * p.save_s)
    assert s.timeout_for("barrier-timeout", 3.0, s.params_for("barrier-timeout")) == 3.0
    assert p.save_s >= 1.5 * s.default_timeout_s  # the culprit is late by a clear margin
