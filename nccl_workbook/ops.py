"""One table of collective names: Python function / flight-recorder name -> NCCL's ``OpType`` spelling.

Four parts of the workbook name collectives: the tracer (which ``torch.distributed`` functions it
wraps), the diagnosis (which collective a Python traceback failed in), the log triage (frames of
``distributed_c10d.py`` in a pasted traceback) and the flight-recorder reader (``profiling_name``
such as ``nccl:all_reduce``). They all read this module, so they agree.

The spelling is torch's ``OpType`` enum, as ``WorkNCCL(..., OpType=ALLREDUCE, ...)`` and the flight
recorder print it. torch has no ``MONITORED_BARRIER`` op type: ``monitored_barrier`` is a gloo-only
barrier built from send/recv and is spelled ``BARRIER`` here, like ``barrier``.

A leaf module: it imports nothing from the package.

Usage::

    op_name("all_gather_object")            # 'ALLGATHER'
    op_name("nccl:_all_gather_base")        # '_ALLGATHER_BASE' (a flight-recorder profiling name)
    op_from_traceback(tb_text)              # the innermost collective of a Python traceback
"""

from __future__ import annotations

import re

__all__ = ["OPS", "TRACED", "op_name", "op_from_traceback", "op_or_none"]

#: function name (``torch.distributed``, ``distributed_c10d``, DDP internals, or the op part of a
#: flight-recorder ``profiling_name``) -> NCCL ``OpType`` spelling
OPS: dict[str, str] = {
    # torch.distributed functions
    "all_reduce": "ALLREDUCE",
    "all_reduce_coalesced": "ALLREDUCE_COALESCED",
    "broadcast": "BROADCAST",
    "broadcast_object_list": "BROADCAST",
    "reduce": "REDUCE",
    "all_gather": "ALLGATHER",
    "all_gather_object": "ALLGATHER",
    "all_gather_coalesced": "ALLGATHER_COALESCED",
    "all_gather_single": "_ALLGATHER_BASE",
    "all_gather_into_tensor": "_ALLGATHER_BASE",
    "_all_gather_base": "_ALLGATHER_BASE",
    "gather": "GATHER",
    "gather_object": "GATHER",
    "scatter": "SCATTER",
    "scatter_object_list": "SCATTER",
    "reduce_scatter": "REDUCE_SCATTER",
    "reduce_scatter_single": "_REDUCE_SCATTER_BASE",
    "reduce_scatter_tensor": "_REDUCE_SCATTER_BASE",
    "_reduce_scatter_base": "_REDUCE_SCATTER_BASE",
    "all_to_all": "ALLTOALL",
    "all_to_all_single": "ALLTOALL_BASE",
    "barrier": "BARRIER",
    "monitored_barrier": "BARRIER",
    "send": "SEND",
    "isend": "SEND",
    "recv": "RECV",
    "irecv": "RECV",
    "batch_isend_irecv": "SEND",
    # flight-recorder profiling names that are not Python function names
    "allreduce_coalesced": "ALLREDUCE_COALESCED",
    "all_reduce_barrier": "BARRIER",
    "_broadcast_oop": "BROADCAST",
    "_reduce_oop": "REDUCE",
    "all_gather_v": "ALLGATHER",
    "all_gather_into_tensor_coalesced": "ALLGATHER_COALESCED",
    "ALLGATHER_coalesced": "ALLGATHER_COALESCED",
    "reduce_scatter_v": "REDUCE_SCATTER",
    "reduce_scatter_tensor_coalesced": "REDUCE_SCATTER_COALESCED",
    "REDUCE_SCATTER_coalesced": "REDUCE_SCATTER_COALESCED",
    "all_to_all_v_single": "ALLTOALL_BASE",
    "coalesced": "COALESCED",
    # DDP: loss.backward() all-reduces gradient buckets (C++ reducer); construction and forward
    # sync parameters and buffers by broadcast, after checking shapes with an all-gather
    "backward": "ALLREDUCE",
    "_sync_buffers": "BROADCAST",
    "_sync_params": "BROADCAST",
    "_sync_module_states": "BROADCAST",
    "_distributed_broadcast_coalesced": "BROADCAST",
    "_verify_param_shape_across_processes": "ALLGATHER",
    "_verify_params_across_processes": "ALLGATHER",
}

#: the ``torch.distributed`` functions the tracer wraps (helpers such as ``all_gather_object`` call
#: one of these, so they are seen through it)
TRACED: tuple[str, ...] = (
    "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_single", "all_gather_into_tensor",
    "gather", "scatter", "reduce_scatter", "reduce_scatter_single", "reduce_scatter_tensor",
    "all_to_all", "all_to_all_single", "barrier", "monitored_barrier", "send", "recv",
)


def op_or_none(name: str | None) -> str | None:
    """The op for a function name, or None when it is not a collective.

    >>> op_or_none("all_gather_object"), op_or_none("train_step")
    ('ALLGATHER', None)
    """
    return OPS.get(name or "")


def op_name(name: str) -> str:
    """A function name or a flight-recorder ``profiling_name`` -> NCCL's spelling; unknown names
    are upper-cased.

    >>> op_name("gloo:all_reduce"), op_name("nccl:_all_gather_base"), op_name("nccl:recv 1<-0")
    ('ALLREDUCE', '_ALLGATHER_BASE', 'RECV')
    >>> op_name("monitored_barrier")
    'BARRIER'
    """
    op = name.split(":", 1)[-1].split(" ", 1)[0]
    return OPS.get(op, op.upper())


# "in <function>" of a Python traceback frame; ".backward()" in a source line (DDP's all-reduce)
_TB_FRAME = re.compile(r"\bin (\w{1,60})\b|\.(backward)\(\)")


def op_from_traceback(tb: str | None) -> str | None:
    """The collective a Python traceback failed in: its innermost frame that is a collective
    (gloo's timeout text names no op, the traceback does).

    >>> op_from_traceback('File "t.py", line 3, in main\\n    dist.barrier()\\n  File "c10d.py", line 9, in barrier')
    'BARRIER'
    >>> op_from_traceback('File "t.py", line 7, in step\\n    loss.backward()\\n')
    'ALLREDUCE'
    """
    if not tb:
        return None
    found: str | None = None
    for m in _TB_FRAME.finditer(tb):
        op = OPS.get(m.group(1) or m.group(2))
        if op is not None:
            found = op  # the innermost (last) frame wins
    return found
