"""Fixes and pure parts of the fd-exhaustion, uneven-eval-allgather and unused-parameters
scenarios, on CPU, without a cluster (1-rank gloo groups on an in-memory store where a group is
needed; a real DataLoader with forked workers for the open-file limit)."""

from __future__ import annotations

import gc
import multiprocessing
import os
import resource
import tempfile
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as tmp
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.distributed.algorithms.join import Join
from torch.utils.data import DataLoader

from nccl_workbook import fixes
from nccl_workbook.fixes.dataloader import shutdown_workers
from nccl_workbook.scenarios import SCENARIOS
from nccl_workbook.scenarios import fd_exhaustion as fde
from nccl_workbook.scenarios import uneven_eval_allgather as uea
from nccl_workbook.scenarios import unused_parameters as up


@pytest.fixture
def one_rank_group() -> Iterator[None]:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@pytest.fixture
def restore_nofile() -> Iterator[tuple[int, int]]:
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        yield before
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)


def test_registered_with_their_ground_truth() -> None:
    assert SCENARIOS["fd-exhaustion"].expected_culprits(fde.Params(), 4) == (1,)
    assert SCENARIOS["uneven-eval-allgather"].expected_culprits(uea.Params(), 4) == (2, 3)
    assert SCENARIOS["unused-parameters"].expected_culprits(up.Params(), 4) == (2,)
    assert SCENARIOS["fd-exhaustion"].expected_op == SCENARIOS["unused-parameters"].expected_op == "ALLREDUCE"
    assert SCENARIOS["uneven-eval-allgather"].expected_op == "ALLGATHER"
    for name in ("use_all_parameters", "parameters_not_in_graph", "raise_open_file_limit", "open_fd_count",
                 "use_file_system_sharing", "max_across_ranks", "unique_by_index", "UnevenAllGather"):
        assert name in fixes.__all__ and callable(getattr(fixes, name))


# -- fd-exhaustion --------------------------------------------------------------------------------

def test_open_fd_count_follows_open_files() -> None:
    before = fixes.open_fd_count()
    with tempfile.TemporaryFile() as a, tempfile.TemporaryFile() as b:  # noqa: F841
        assert fixes.open_fd_count() == before + 2
    assert fixes.open_fd_count() == before


def test_raise_open_file_limit(restore_nofile: tuple[int, int]) -> None:
    soft, hard = restore_nofile
    low = fixes.open_fd_count() + 50
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    limit = fixes.raise_open_file_limit(target=low + 10)
    assert limit.soft_before == low and limit.soft == low + 10 and limit.raised
    assert fixes.raise_open_file_limit(target=low).soft == low + 10  # never lowers it
    full = fixes.raise_open_file_limit()
    assert full.soft == (hard if hard != resource.RLIM_INFINITY else 1 << 20) and full.hard == hard
    with pytest.raises(ValueError, match="positive"):
        fixes.raise_open_file_limit(target=0)


def test_sharing_strategy_is_restored() -> None:
    before = tmp.get_sharing_strategy()
    with fixes.sharing_strategy("file_system", start_manager=False):
        assert tmp.get_sharing_strategy() == "file_system"
    assert tmp.get_sharing_strategy() == before
    with pytest.raises(ValueError, match="unknown sharing strategy"):
        with fixes.sharing_strategy("bogus"):
            pass


def _drain(workers: int, headroom: int | None) -> str | None:
    """Iterate the scenario's dataset with forked workers under a soft open-file limit of ``headroom`` more
    descriptors than are open now; the error text, or None. A stalled worker ends it (the loader's timeout), and
    the limit is restored and the workers are joined before returning."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    loader = DataLoader(fde.FieldsDataset(160, 8, 16), batch_size=8, num_workers=workers, prefetch_factor=2,
                        multiprocessing_context=multiprocessing.get_context("fork"), timeout=60)
    it = None
    try:
        if headroom is not None:
            gc.collect()   # the descriptors a previous loader's batches still hold are let go first
            resource.setrlimit(resource.RLIMIT_NOFILE, (fixes.open_fd_count() + headroom, hard))
        it = iter(loader)
        for _ in it:
            pass
        return None
    except RuntimeError as e:
        return str(e)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        if it is not None:
            shutdown_workers(it)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_low_limit_many_workers_runs_out_and_the_fixes_work(restore_nofile: tuple[int, int]) -> None:
    # 40 descriptors above those open: eight workers' batches in flight need about 150, one worker's about 20
    err = _drain(8, 40)
    assert err is not None and ("Too many open files" in err or "ancdata" in err), err
    assert _drain(1, 40) is None                          # fewer workers
    with fixes.sharing_strategy("file_system"):           # descriptors no longer travel
        assert _drain(8, 40) is None
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == restore_nofile


def test_fd_params_and_helpers() -> None:
    p = fde.Params(workers_by_rank=(8, 4, 2, 1))
    assert [fde.workers_for(p, r) for r in range(6)] == [8, 4, 2, 1, 8, 4]
    assert fde.workers_for(fde.Params(), 3) == 8
    assert fde.limited_rank(fde.Params(), 4) == 1 and fde.limited_rank(fde.Params(limited_rank=7), 2) == 1
    sample = fde.FieldsDataset(10, 3, 4)[7]
    assert sorted(sample) == ["f0", "f1", "f2", "id"] and int(sample["id"]) == 7
    assert torch.equal(sample["f1"], fde.FieldsDataset(10, 3, 4)[7]["f1"])  # seeded
    for bad in ({"sharing": "mmap"}, {"workers": 0}, {"fd_headroom": -1}, {"workers_by_rank": (2, -1)}):
        with pytest.raises(ValueError):
            fde.Params(**bad)


# -- uneven-eval-allgather ------------------------------------------------------------------------

def test_batch_counts_and_early_ranks() -> None:
    p = uea.Params()
    assert uea.samples_per_rank(p, 4) == [13, 13, 12, 12]
    assert uea.batches_per_rank(p, 4) == [4, 4, 3, 3] and uea.early_ranks(p, 4) == (2, 3)
    assert uea.batches_per_rank(uea.Params(batch_size=2), 4) == [7, 7, 6, 6]  # the seed's smaller batches
    assert uea.early_ranks(p, 2) == ()  # 25 + 25: even by chance
    padded = uea.Params(sampler="padded")
    assert uea.batches_per_rank(padded, 4) == [4, 4, 4, 4] and uea.early_ranks(padded, 4) == ()
    for bad in ({"sampler": "x"}, {"mode": "x"}, {"side_timeout_factor": 1.0}, {"classes": 1}):
        with pytest.raises(ValueError):
            uea.Params(**bad)


def test_reference_accuracy_is_deterministic() -> None:
    a, b = uea.reference_accuracy(uea.Params()), uea.reference_accuracy(uea.Params())
    assert a == b and a[1] == 50 and 0 <= a[0] <= 50


@given(st.lists(st.integers(-1, 30), max_size=80))
@settings(max_examples=60, deadline=None)
def test_unique_by_index(indices: list[int]) -> None:
    rows = torch.tensor([[i, 2 * i] for i in indices], dtype=torch.int64).reshape(-1, 2)
    out = fixes.unique_by_index(rows)
    want = sorted({i for i in indices if i != fixes.PAD_INDEX})
    assert out[:, 0].tolist() == want
    assert out[:, 1].tolist() == [2 * i for i in want]


def test_unique_by_index_rejects_1d() -> None:
    with pytest.raises(ValueError, match="2-D"):
        fixes.unique_by_index(torch.arange(3))


def test_max_across_ranks_and_uneven_all_gather_on_one_rank(one_rank_group: None) -> None:
    assert fixes.max_across_ranks(7) == 7
    gather = fixes.UnevenAllGather((2, 3))
    with Join([gather]):
        for k in range(3):
            out = gather(torch.full((2, 3), k))
            assert len(out) == 1 and out[0].eq(k).all()
    assert len(gather.gathered) == 3 and gather.shadow_calls == 0
    with pytest.raises(ValueError, match="built for shape"):
        gather(torch.zeros(3, 3))


# -- unused-parameters ----------------------------------------------------------------------------

def test_parameters_not_in_graph_and_use_all_parameters() -> None:
    net = up.make_multitask_net(8, 16)
    x = torch.randn(4, 3, 8)
    main, aux = net(x, torch.zeros(4, dtype=torch.bool))
    assert aux is None
    missing = fixes.parameters_not_in_graph((main, aux), net)
    assert missing == ["aux_head.0.weight", "aux_head.0.bias", "aux_head.2.weight", "aux_head.2.bias"]
    loss = main.pow(2).mean()
    fixed = fixes.use_all_parameters(loss, net)
    assert fixes.parameters_not_in_graph(fixed, net) == []
    assert torch.equal(fixed.detach(), loss.detach())  # the value is unchanged
    fixed.backward()
    assert all(p.grad is not None for p in net.parameters())
    assert all(p.grad.abs().sum() == 0 for n, p in net.named_parameters() if n.startswith("aux_head"))
    with pytest.raises(ValueError, match="at least one module"):
        fixes.use_all_parameters(loss)


def _ddp_steps(use_all: bool, skip_at: int = 1, steps: int = 3) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(up.make_multitask_net(8, 16))
    for i in range(steps):
        has_aux = torch.zeros(4, dtype=torch.bool) if i == skip_at else torch.ones(4, dtype=torch.bool)
        main, aux = ddp(torch.randn(4, 3, 8), has_aux)
        loss = main.pow(2).mean() + (aux.pow(2).mean() if aux is not None else 0)
        if use_all:
            loss = fixes.use_all_parameters(loss, ddp.module)
        loss.backward()


def test_ddp_skipped_branch_fails_at_the_next_forward_and_the_fix_works(one_rank_group: None) -> None:
    with pytest.raises(RuntimeError, match="Expected to have finished reduction in the prior iteration"):
        _ddp_steps(use_all=False)


def test_ddp_use_all_parameters_fix(one_rank_group: None) -> None:
    _ddp_steps(use_all=True)


def test_unused_helpers() -> None:
    p = up.Params()
    assert up.skipping_ranks(p, 4) == (2,) and up.skipping_ranks(p, 2) == (1,)
    x, has_aux, _ = up.batch_for(p, 2, 2, 4)
    assert not has_aux.any() and up.batch_for(p, 1, 2, 4)[1].any() and up.batch_for(p, 2, 3, 4)[1].any()
    assert not up.batch_for(up.Params(skip_every_step=True), 2, 5, 4)[1].any()
    text = "boom\n In addition, you can set TORCH_DISTRIBUTED_DEBUG to print which did not receive gradient\nParameters which did not receive grad for rank 2: aux.b, aux.w\nParameter indices which did not receive grad for rank 2: 4 5\n"
    assert up.unused_parameter_lines(text) == [
        "Parameters which did not receive grad for rank 2: aux.b, aux.w",
        "Parameter indices which did not receive grad for rank 2: 4 5",
    ]
    assert up.unused_parameter_lines(None) == []
    for bad in ({"ddp": "x"}, {"skip_step": 5}, {"aux_fraction": 0}, {"hidden": 30}):
        with pytest.raises(ValueError):
            up.Params(**bad)
    with pytest.raises(ValueError, match="OFF, INFO or DETAIL"):
        up.ddp_debug_check("LOUD")
    with pytest.raises(ValueError, match="before-init"):
        up.ddp_debug_check("INFO", when="later")
    assert os.environ.get("TORCH_DISTRIBUTED_DEBUG") in (None, "", "OFF")
