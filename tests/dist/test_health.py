from __future__ import annotations

import pytest

from nccl_workbook import health
from nccl_workbook.cluster import RankCluster


def test_health_check(cluster: RankCluster) -> None:
    r = health.check(cluster)
    assert r.ok and r.failed_ranks == () and len(r.ranks) == 4
    assert all(x.allreduce_ok and x.torch.startswith("2.") and x.backend == "gloo" for x in r.ranks)
    assert "healthy" in r.summary() and "healthy" in r._repr_html_()


def test_small_sweep(cluster: RankCluster) -> None:
    res = health.sweep(cluster, sizes=(4, 4096, 2**20))
    f = res.frame
    assert set(f["op"]) == set(health.OPS)
    assert res.host_copy_gbps > 0.05
    assert (f["time_us"] > 0).all()
    ar = f[f["op"] == "all_reduce"].set_index("bytes")
    assert ar.loc[2**20, "busbw_gbps"] == pytest.approx(ar.loc[2**20, "algbw_gbps"] * 1.5)
    assert ar.loc[2**20, "algbw_gbps"] > ar.loc[4, "algbw_gbps"]
    with pytest.raises(ValueError, match="unknown op"):
        health.sweep(cluster, ops=("all_to_all",))
