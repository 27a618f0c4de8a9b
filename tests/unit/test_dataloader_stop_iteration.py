"""The mechanism behind the lint's `raise StopIteration` in `__getitem__` (InternVL, held-out round 30): on torch
2.13 a DataLoader lets a StopIteration from the data set through, in the main process and from its workers, and
the loop over it ends there, silently, on that rank only."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, Dataset


class FailsAtFive(Dataset):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == 5:
            raise StopIteration   # InternVL's `if try_cnt > max_try: raise StopIteration`
        return torch.tensor(i)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 2])
def test_a_stop_iteration_from_getitem_ends_the_epoch_early(workers: int) -> None:
    it = iter(DataLoader(FailsAtFive(), batch_size=1, num_workers=workers))
    try:
        seen = [int(b) for b in it]
    finally:
        # the workers of an iterator ended this way are left to the garbage collector, which waits 10 s for them
        getattr(it, "_shutdown_workers", lambda: None)()
    assert seen == [0, 1, 2, 3, 4]   # no error: half the epoch is gone, and only on the rank that failed


def test_the_lint_reports_it_and_not_a_stop_iteration_of_an_iterator() -> None:
    from nccl_workbook.lint import lint_source
    src = ("import torch\nclass D(torch.utils.data.Dataset):\n    def __getitem__(self, i):\n"
           "        for _ in range(10):\n            try:\n                return load(i)\n"
           "            except OSError:\n                pass\n        raise StopIteration\n")
    assert [(f.line, f.rule.value) for f in lint_source(src)] == [(9, "uneven-collective-count")]
    # an iterator's own end is what StopIteration is for
    assert lint_source(src.replace("__getitem__(self, i)", "__next__(self)").replace("load(i)", "load(0)")) == []
    # an error the job stops on
    assert lint_source(src.replace("raise StopIteration", "raise RuntimeError(i)")) == []
