"""Real torchrun jobs (tests/_torchrun.py): after every test, no process of a job may be left."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests._torchrun import assert_no_job_left


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "jobs: runs real torchrun jobs of the example training script")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/jobs/" in str(item.path):
            item.add_marker(pytest.mark.jobs)


@pytest.fixture(autouse=True)
def _no_job_left() -> Iterator[None]:
    yield
    assert_no_job_left()
