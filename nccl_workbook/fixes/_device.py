"""The device a fix's own small tensors must be on for a collective of a given group."""

from __future__ import annotations

from typing import Any


def collective_device(group: Any = None) -> Any:
    """``cuda:<current>`` for a group that only NCCL serves, else ``cpu``.

    A process group initialised with ``"nccl"`` (and ``device_id=``) has no CPU backend: an
    ``all_reduce`` of a CPU tensor raises ``No backend type associated with device type cpu``. A
    group that also serves CPU tensors (``"gloo"``, ``"cpu:gloo,cuda:nccl"``) takes them on the
    CPU, which costs no copy to the GPU.
    """
    import torch
    import torch.distributed as dist

    backend = str(dist.get_backend(group)).lower()
    if "gloo" in backend or "cpu:" in backend or "nccl" not in backend or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())
