"""A tiny FSDP2 (fully_shard) training loop and a torch.distributed.checkpoint save, for the test that
``watch`` sees the collectives FSDP and DCP issue (no DDP here). Usage: torchrun ... fsdp2_dcp.py OUT_DIR"""

import sys


def main(out_dir: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.ones(2, 8)).sum().backward()
        opt.step()
        opt.zero_grad()
    dcp.save({"m": model.state_dict()}, checkpoint_id=out_dir)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
