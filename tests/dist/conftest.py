"""The dist tests run on the session's shared 4-rank gloo cluster (see the root conftest.py)."""

from __future__ import annotations

import pytest

from nccl_workbook.cluster import RankCluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/dist/" in str(item.path):
            item.add_marker(pytest.mark.dist)


@pytest.fixture(scope="package")
def cluster(request: pytest.FixtureRequest) -> RankCluster:
    c = RankCluster.start_or_attach(n_ranks=4)  # the session's shared cluster; its own if there is none
    request.addfinalizer(c.stop)
    return c
