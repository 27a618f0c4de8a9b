"""timeout-settings on 4 real gloo ranks: what each of the seeds' settings does to the timeout a
group really gets (read from torch, and measured live where it is short), and the fix variants'
timeouts as the rank programs saw them."""

from __future__ import annotations

from nccl_workbook.cluster import RankCluster
from nccl_workbook.scenarios.timeout_settings import settings_table


def test_settings_table(cluster: RankCluster) -> None:
    df = settings_table(cluster)
    assert df.attrs["had__DEFAULT_PG_TIMEOUT"] is False and df.attrs["default_s"] == 1800.0
    changes = df["changes the timeout"].to_dict()
    assert [name for name, yes in changes.items() if yes] == [
        "NCCL_TIMEOUT_MINUTES=0.02, the script passes it to timeout=",
        "new_group(timeout=1 s) / init_process_group(timeout=1 s)",
        "distributed_c10d.default_pg_timeout = 1 s (private, the name torch reads)",
        "dist.barrier(timeout=1 s) on a group with the default timeout",
    ]
    waited = df["measured: the others waited (s)"].dropna()
    assert ((waited > 0.9) & (waited < 2.0)).all()  # short timeouts fire when they say (1-1.2 s)
    assert df.loc["NCCL_TIMEOUT=1", "timeout of the group (s)"] == 1800.0
