"""Without root or without Slurm these tests skip with the reason; under CI=true they fail instead."""

from __future__ import annotations

import os

import pytest

from tests.slurm.daemons import require


@pytest.mark.parametrize("ci, outcome", [("", pytest.skip.Exception), ("true", pytest.fail.Exception)])
def test_not_root(monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="needs root"):
        require(binaries=("sbatch",), what="the Slurm tests")


@pytest.mark.parametrize("ci, outcome", [("0", pytest.skip.Exception), ("1", pytest.fail.Exception)])
def test_missing_binaries(monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match=r"needs no-such-slurmd on PATH.*WITH_SLURM=1 scripts/setup.sh"):
        require(binaries=("no-such-slurmd",), what="the Slurm tests")
