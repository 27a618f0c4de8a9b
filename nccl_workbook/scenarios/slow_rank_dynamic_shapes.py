"""Scenario ``slow-rank-dynamic-shapes`` (seed 003): one rank's batch holds far longer sequences;
its attention-heavy step takes far longer than the others', which wait in DDP's gradient
all-reduce until one such step outlasts the timeout.

What happened: a concept-encoder model trained with DDP on 4 GPUs and dynamic sequence lengths ran
at 800 s per iteration and died after 53 minutes: ``WorkNCCL(SeqNum=14863, OpType=ALLREDUCE,
NumelIn=14845952, …, Timeout(ms)=1800000) ran for 1800048 milliseconds``. ``NumelIn`` of 14.8 M
is a gradient bucket, not a metric: the waiting ranks were in DDP's all-reduce at the end of
backward. The write-up blamed ``.expand()`` in the model ("memory aliasing corrupts gradients,
NCCL waits for gradients that never arrive") and replaced it with ``.repeat()``.

Here: a small concept encoder (token embedding, one multi-head self-attention layer, learned concept
queries, the seed's ``concept_weights[:L]`` softmax ``.expand()``-ed over the batch and ``bmm``-ed
with the concepts), DDP on 4 ranks, batches of 4 sequences of 32-128 tokens, except that the data
holds a block of 1024-token documents, and the naive per-rank split gives all of them to rank 2 at
step 2.

Timing, honestly: the model runs for real at every shape (so gradients and the ``.expand()`` /
``.repeat()`` comparison are real), but on 2 shared CPU cores its real compute is tiny (a 4x1024
batch takes ~50 ms) and noisy. Each step's forward is therefore *paced* to a cost model,
``seconds_per_mtok2 * batch * padded_length**2 / 1e6`` (the attention term): 4x1024 -> 5.0 s,
4x128 -> 0.08 s, as on a GPU where the long step took minutes.

Variants (the batch plan, :mod:`nccl_workbook.fixes.batching`):

``broken``
    ``contiguous_shards``: every rank batches its own contiguous block; rank 2's step 2 costs
    5 s, the others wait 3 s in the gradient ALLREDUCE and time out.
``length-grouped``
    samples sorted by length and dealt so that each step's batches have similar lengths on every
    rank: the long step is long everywhere (5 s) and nobody waits.
``token-budget``
    batches capped at 1024 padded tokens (a long document alone, short ones 8 at a time), batches
    of similar cost in the same step: no step costs more than 1.3 s, the waits stay far below 3 s.
``fixed-length``
    every sequence cut into pieces of at most 256 tokens and padded to 256: all batches cost the
    same (0.3 s); long-range context beyond 256 tokens is lost, short sequences are padded.

:func:`compare_expand_repeat` checks the seed's claim on the same inputs: gradients through
``.expand(B, -1, -1)`` and ``.repeat(B, 1, 1)`` and the time of a step with each.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.fixes.batching import Batch, Plan, contiguous_shards, fixed_length, length_grouped, token_budget
from nccl_workbook.scenarios._common import make_ddp, paced
from nccl_workbook.scenarios.base import Scenario, Variant

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.results import RunResult

__all__ = [
    "Params", "program", "SCENARIO", "make_lengths", "long_rank_of", "plan_for", "make_batch", "ConceptEncoderConfig",
    "build_model", "compare_expand_repeat", "ExpandRepeatComparison", "seed_literal_expand_error",
    "step_breakdown", "plan_summary",
]

_BATCHINGS = {"contiguous", "length-grouped", "token-budget", "fixed-length"}


@dataclass(frozen=True)
class Params:
    """Knobs of the rank program; the defaults are what the notebook and CI run."""

    batch: int = 4
    steps: int = 4
    short_min: int = 32
    short_max: int = 128
    long_len: int = 1024
    #: the naive split gives the block of long documents to this rank (the last rank of a smaller
    #: run), at this step
    long_rank: int = 2
    long_step: int = 2
    #: ``contiguous`` (broken), ``length-grouped``, ``token-budget`` or ``fixed-length``
    batching: str = "contiguous"
    max_tokens: int = 1024
    max_len: int = 256
    #: pacing of each step's forward: seconds per million (batch x padded_length^2)
    seconds_per_mtok2: float = 1.2
    #: ``expand`` (the seed's code, as it must have been meant) or ``repeat`` (the seed's fix)
    expand_mode: str = "expand"
    vocab: int = 256
    dim: int = 32
    heads: int = 2
    concepts: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        if self.batching not in _BATCHINGS:
            raise ValueError(f"batching must be one of {sorted(_BATCHINGS)}, got {self.batching!r}")
        if self.expand_mode not in {"expand", "repeat"}:
            raise ValueError(f"expand_mode must be 'expand' or 'repeat', got {self.expand_mode!r}")
        if not 1 <= self.short_min <= self.short_max <= self.long_len:
            raise ValueError("need 1 <= short_min <= short_max <= long_len")
        if self.long_rank < 0:
            raise ValueError(f"long_rank must be >= 0, got {self.long_rank}")
        if not 0 <= self.long_step < self.steps:
            raise ValueError(f"long_step must be in [0, steps), got {self.long_step} with steps={self.steps}")
        if self.dim % self.heads:
            raise ValueError(f"dim ({self.dim}) must be a multiple of heads ({self.heads})")

    def step_cost_s(self, n_sequences: int, padded_len: int) -> float:
        """The paced duration of a forward over ``n_sequences`` sequences padded to ``padded_len``."""
        return self.seconds_per_mtok2 * n_sequences * padded_len**2 / 1e6


def long_rank_of(params: Params, world_size: int) -> int:
    """The rank that gets the long documents: ``long_rank``, or the last rank of a smaller run."""
    return min(params.long_rank, world_size - 1)


def make_lengths(params: Params, world_size: int) -> list[int]:
    """The data: ``world_size * batch * steps`` sequence lengths between ``short_min`` and
    ``short_max``, with a block of ``batch`` documents of ``long_len`` tokens where the naive split
    puts them into ``long_rank``'s batch at ``long_step``."""
    rng = random.Random(params.seed)
    n = world_size * params.batch * params.steps
    lengths = [rng.randint(params.short_min, params.short_max) for _ in range(n)]
    start = long_rank_of(params, world_size) * params.batch * params.steps + params.long_step * params.batch
    lengths[start:start + params.batch] = [params.long_len] * params.batch
    return lengths


def plan_for(params: Params, world_size: int) -> Plan:
    """Every rank's batches, step by step, for the variant's batching (identical on every rank)."""
    lengths = make_lengths(params, world_size)
    if params.batching == "contiguous":
        return contiguous_shards(lengths, world_size, params.batch)
    if params.batching == "length-grouped":
        return length_grouped(lengths, world_size, params.batch, seed=params.seed)
    if params.batching == "token-budget":
        return token_budget(lengths, world_size, params.max_tokens, seed=params.seed)
    return fixed_length(lengths, world_size, params.batch, params.max_len, seed=params.seed)


def padded_len(batch: Batch, params: Params) -> int:
    """The length a batch is padded to: its longest piece, or ``max_len`` for ``fixed-length``."""
    return params.max_len if params.batching == "fixed-length" else max(p.length for p in batch)


def make_batch(batch: Batch, params: Params) -> tuple[Any, Any]:
    """(tokens ``[B, L]`` with 0 as padding, padding mask ``[B, L]``) for a planned batch; the
    tokens of a sample are a fixed function of its index."""
    import torch

    L = padded_len(batch, params)
    tokens = torch.zeros(len(batch), L, dtype=torch.long)
    for row, p in enumerate(batch):
        g = torch.Generator().manual_seed(10_007 * params.seed + p.index)
        full = torch.randint(1, params.vocab, (p.start + p.length,), generator=g)
        tokens[row, : p.length] = full[p.start:p.start + p.length]
    return tokens, tokens == 0


@dataclass(frozen=True)
class ConceptEncoderConfig:
    vocab: int = 256
    dim: int = 32
    heads: int = 2
    concepts: int = 16
    max_positions: int = 1024
    expand_mode: str = "expand"


def build_model(cfg: ConceptEncoderConfig, *, seed: int = 0) -> Any:
    """The concept encoder (see the module docstring), with the seed's position-weights code."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class ConceptEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(cfg.vocab, cfg.dim, padding_idx=0)
            self.attn = nn.MultiheadAttention(cfg.dim, cfg.heads, batch_first=True)
            self.norm = nn.LayerNorm(cfg.dim)
            self.concept_queries = nn.Parameter(0.1 * torch.randn(cfg.concepts, cfg.dim))
            self.concept_weights = nn.Parameter(0.1 * torch.randn(cfg.max_positions, cfg.concepts))
            self.head = nn.Linear(cfg.dim, cfg.vocab)
            self.expand_mode = cfg.expand_mode

        def forward(self, tokens: Any, pad_mask: Any) -> Any:
            batch_size, seq_length = tokens.shape
            h = self.emb(tokens)
            a, _ = self.attn(h, h, h, key_padding_mask=pad_mask, need_weights=False)
            h = self.norm(h + a)
            scores = torch.einsum("cd,bld->bcl", self.concept_queries, h).masked_fill(pad_mask[:, None, :], float("-inf"))
            concept_repr = torch.bmm(torch.softmax(scores, dim=-1), h)  # [B, C, D]
            # the seed's code (ConceptEncoderForMaskedLMWeighted.forward)
            position_weights = self.concept_weights[:seq_length, :]
            position_weights = F.softmax(position_weights, dim=-1)
            if self.expand_mode == "expand":  # a view, no copy (the seed wrote .expand(batch_size, 1, 1))
                position_weights_expanded = position_weights.unsqueeze(0).expand(batch_size, -1, -1)
            else:  # the seed's fix: a real copy per sequence
                position_weights_expanded = position_weights.unsqueeze(0).repeat(batch_size, 1, 1)
            sequence_repr = torch.bmm(position_weights_expanded, concept_repr)  # [B, L, D]
            return self.head(sequence_repr + h)

    torch.manual_seed(seed)
    return ConceptEncoder()


def _config(params: Params, expand_mode: str | None = None) -> ConceptEncoderConfig:
    return ConceptEncoderConfig(params.vocab, params.dim, params.heads, params.concepts,
                                max(params.long_len, params.max_len), expand_mode or params.expand_mode)


def _loss(model: Any, tokens: Any, pad_mask: Any) -> Any:
    import torch.nn.functional as F

    logits = model(tokens, pad_mask)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1), ignore_index=0)


def program(ctx: Any, params: Params) -> dict[str, Any]:
    """The training loop of the incident, one rank of it, on the variant's batch plan."""
    import torch

    plan = plan_for(params, ctx.world_size)
    ddp = make_ddp(ctx, build_model(_config(params), seed=params.seed))
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    longest = 0
    loss = torch.tensor(float("nan"))
    for step, batch in enumerate(plan[ctx.rank]):
        with ctx.tracer.step(step):
            tokens, pad_mask = make_batch(batch, params)
            longest = max(longest, tokens.shape[1])
            cost = params.step_cost_s(tokens.shape[0], tokens.shape[1])
            loss = paced(cost, lambda t=tokens, m=pad_mask: _loss(ddp, t.to(ctx.device), m.to(ctx.device)))
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP's gradient ALLREDUCE: the fast ranks wait here for the slow one
            opt.step()
    return {"steps": len(plan[ctx.rank]), "longest_padded_len": longest, "final_loss": float(loss.detach())}


SCENARIO = Scenario(
    id="slow-rank-dynamic-shapes",
    title="One rank gets the long sequences; the others wait in the gradient all-reduce",
    symptom="ALLREDUCE timeout (large NumelIn: a gradient bucket) on every rank but one; very slow iterations",
    seed="003",
    program=program,
    params_type=Params,
    variants=(
        Variant("broken", "each rank batches its own contiguous shard: rank 2's step 2 holds four 1024-token documents",
                expect_ok=False),
        Variant("length-grouped", "samples sorted by length and dealt across ranks: every step is equally long on every rank",
                params={"batching": "length-grouped"}),
        Variant("token-budget", "batches capped at 1024 padded tokens, batches of similar cost in the same step",
                params={"batching": "token-budget"}),
        Variant("fixed-length", "every sequence cut into pieces of <= 256 tokens, padded to 256: identical batches",
                params={"batching": "fixed-length"}),
    ),
    expected_culprits=lambda p, ws: (long_rank_of(p, ws),),
    expected_op="ALLREDUCE",
    notebook="09_slow_rank_dynamic_shapes.ipynb",
    deadline_s=lambda p, t: p.step_cost_s(p.batch, p.long_len) * 2 + 4 * t + 30,
)


# -- the seed's claim: .expand() vs .repeat() -------------------------------------------------------
@dataclass(frozen=True)
class ExpandRepeatComparison:
    """Gradients and step times of the same model and inputs with ``.expand`` and ``.repeat``."""

    batch: int
    length: int
    #: largest absolute difference over every gradient element
    max_abs_grad_diff: float
    #: every gradient tensor bitwise equal
    grads_identical: bool
    loss_expand: float
    loss_repeat: float
    #: median forward+backward time over ``reps`` runs (ms)
    expand_ms: float
    repeat_ms: float
    #: memory ``.repeat`` allocates for the copies (bytes)
    repeat_extra_bytes: int


def compare_expand_repeat(params: Params | None = None, *, batch: int = 4, length: int = 512,
                          reps: int = 5) -> ExpandRepeatComparison:
    """Run the concept encoder with ``.expand(B, -1, -1)`` and with ``.repeat(B, 1, 1)`` on the same
    weights and the same input; compare every parameter's gradient and time forward+backward
    (interleaved, median of ``reps``). Local, no process group needed."""
    import torch

    params = params or Params()
    models = {m: build_model(_config(params, m), seed=params.seed) for m in ("expand", "repeat")}
    models["repeat"].load_state_dict(models["expand"].state_dict())
    g = torch.Generator().manual_seed(1234)
    tokens = torch.randint(1, params.vocab, (batch, length), generator=g)
    tokens[1:, length // 2:] = 0  # some padding, as in real batches
    mask = tokens == 0
    grads: dict[str, list[Any]] = {}
    losses: dict[str, float] = {}
    times: dict[str, list[float]] = {"expand": [], "repeat": []}
    for i in range(reps + 1):
        for mode, model in models.items():
            t0 = time.perf_counter()
            loss = _loss(model, tokens, mask)
            gs = torch.autograd.grad(loss, list(model.parameters()))
            dt = time.perf_counter() - t0
            if i:  # the first round warms up
                times[mode].append(dt)
            grads[mode], losses[mode] = list(gs), float(loss.detach())
    diffs = [float((a - b).abs().max()) for a, b in zip(grads["expand"], grads["repeat"])]
    return ExpandRepeatComparison(
        batch=batch, length=length, max_abs_grad_diff=max(diffs),
        grads_identical=all(torch.equal(a, b) for a, b in zip(grads["expand"], grads["repeat"])),
        loss_expand=losses["expand"], loss_repeat=losses["repeat"],
        expand_ms=statistics.median(times["expand"]) * 1e3, repeat_ms=statistics.median(times["repeat"]) * 1e3,
        repeat_extra_bytes=batch * length * params.concepts * 4,
    )


def seed_literal_expand_error(length: int = 16, concepts: int = 16, batch_size: int = 4) -> str | None:
    """What the seed's line as printed does, ``position_weights.unsqueeze(0).expand(batch_size, 1, 1)``
    on ``[length, concepts]`` weights: the error text, or None if it ran."""
    import torch

    position_weights = torch.softmax(torch.randn(length, concepts), dim=-1)
    try:
        position_weights.unsqueeze(0).expand(batch_size, 1, 1)
    except RuntimeError as e:
        return str(e)
    return None


def plan_summary(variant: str, world_size: int = 4, **param_overrides: Any) -> dict[str, float]:
    """What a variant's batch plan costs, from the plan and the cost model alone (no run): steps
    per rank, the longest step and the longest wait for the slowest rank in any step (s), the share
    of computed tokens that are padding, and the share of the data's tokens trained on."""
    params = SCENARIO.params_for(variant, **param_overrides)
    plan = plan_for(params, world_size)
    steps = len(plan[0])
    costs = [[params.step_cost_s(len(plan[r][s]), padded_len(plan[r][s], params)) for r in range(world_size)]
             for s in range(steps)]
    computed = sum(len(b) * padded_len(b, params) for rank in plan for b in rank)
    real = sum(p.length for rank in plan for b in rank for p in b)
    covered = {(p.index, t) for rank in plan for b in rank for p in b for t in range(p.start, p.start + p.length)}
    return {
        "steps per rank": float(steps),
        "longest step (s)": round(max(max(c) for c in costs), 2),
        "longest wait for the slowest rank (s)": round(max(max(c) - min(c) for c in costs), 2),
        "padding (% of computed tokens)": round(100 * (1 - real / computed), 1),
        "data trained on (% of tokens)": round(100 * len(covered) / sum(make_lengths(params, world_size)), 1),
    }


# -- per-step table for the plots -------------------------------------------------------------------
def step_breakdown(results: list[RunResult], **param_overrides: Any) -> pd.DataFrame:
    """One row per (variant, rank, step): the padded length of the rank's batch (tokens), its cost
    units, the step's time outside collectives (compute, s) and inside them (waiting, s), and how
    the step ended. ``param_overrides`` are the settings the runs used (e.g. ``panel.settings()``)."""
    import pandas as pd

    overrides = {k: v for k, v in param_overrides.items() if k not in {"world_size", "timeout_s"}}
    rows = []
    for r in results:
        params = SCENARIO.params_for(r.variant, **overrides)
        plan = plan_for(params, r.world_size)
        t = r.trace
        steps = t[t["kind"] == "step"]
        coll = t[(t["kind"] == "collective") & t["step"].notna()]
        for _, s in steps.iterrows():
            rank, step = int(s["rank"]), int(s["step"])
            end = s["t_end_ns"]
            if pd.isna(end):
                continue
            c = coll[(coll["rank"] == rank) & (coll["step"] == step)]
            c_end = c["t_end_ns"].fillna(end).astype("int64")
            in_coll = float((c_end - c["t_enqueue_ns"].astype("int64")).sum()) / 1e9
            total = (int(end) - int(s["t_enqueue_ns"])) / 1e9
            batch = plan[rank][step]
            rows.append({
                "variant": r.variant, "rank": rank, "step": step,
                "padded_len": padded_len(batch, params), "sequences": len(batch),
                "compute_s": max(total - in_coll, 0.0), "wait_s": in_coll, "step_s": total,
                "status": str(s["status"]),
            })
    return pd.DataFrame(rows)
