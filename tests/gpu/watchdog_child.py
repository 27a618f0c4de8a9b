"""One rank of a 1-rank NCCL group whose all-reduce cannot finish in time: run by ``capture.py``.

A 1-rank group needs no peer to be late: a long kernel (``torch.cuda._sleep``) is enqueued on the
current stream just before the all-reduce, so NCCL's stream waits behind it for ``--sleep-s`` while
the group's timeout is ``--timeout-s``. ProcessGroupNCCL's watchdog then sees the work overdue, as it
would on a real job whose peer never arrived. Everything this process does is printed as one marker
line ``@@ NAME t=SECONDS [detail]`` (seconds since the all-reduce was enqueued), so that the parent
can tell what happened from the output alone, also when the process is killed.

Usage: ``python watchdog_child.py --port P --timeout-s 2 --sleep-s 6 --out DIR``
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

T0 = [time.monotonic()]


def mark(name: str, detail: str = "") -> None:
    print(f"@@ {name} t={time.monotonic() - T0[0]:.3f} {detail}".rstrip(), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--timeout-s", type=float, default=2.0)
    ap.add_argument("--sleep-s", type=float, default=6.0)
    ap.add_argument("--linger-s", type=float, default=4.0, help="stay alive this long after the kernel ends")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.gpu.programs import keep_gpu_busy

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{a.port}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=a.timeout_s), device_id=dev)
    x = torch.ones(1 << 20, device=dev)
    out = torch.empty(1 << 20, device=dev)
    # a few collectives that finish, so that the flight recorder holds completed entries too
    dist.all_reduce(x)
    dist.broadcast(x, 0)
    dist.all_gather_into_tensor(out, x)
    dist.reduce_scatter_tensor(out, x)
    dist.barrier()
    torch.cuda.synchronize()
    mark("good_collectives_done")
    c10d = torch._C._distributed_c10d
    for name in ("_dump_nccl_trace", "_dump_fr_trace"):  # which recorder holds the NCCL entries?
        fn = getattr(c10d, name, None)
        if fn is None:
            mark("ondemand_missing", name)
            continue
        try:
            data = bytes(fn())
            with open(os.path.join(a.out, f"ondemand{name}.pkl"), "wb") as f:
                f.write(data)
            mark("ondemand", f"{name} {len(data)}")
        except Exception as e:  # noqa: BLE001
            mark("ondemand_failed", f"{name} {type(e).__name__}: {e}")

    hz = keep_gpu_busy(a.sleep_s)  # the kernel the all-reduce waits behind
    mark("calibrated", f"{hz / 1e9:.3f} GHz")
    T0[0] = time.monotonic()
    work = dist.all_reduce(x, async_op=True)
    mark("enqueued", f"epoch={time.time():.3f}")
    try:
        work.wait()
        mark("wait_returned")
    except Exception as e:  # noqa: BLE001 - the point of the experiment
        mark("wait_raised", f"{type(e).__name__}: {str(e)[:300]!r}")
    try:
        torch.cuda.synchronize()
        mark("synchronized")
    except Exception as e:  # noqa: BLE001
        mark("synchronize_raised", f"{type(e).__name__}: {str(e)[:300]!r}")
    while time.monotonic() - T0[0] < a.sleep_s + a.linger_s:
        time.sleep(0.25)
    mark("alive_after_kernel")
    try:  # can the group still be used?
        dist.all_reduce(x)
        torch.cuda.synchronize()
        mark("next_collective_ok")
    except Exception as e:  # noqa: BLE001
        mark("next_collective_raised", f"{type(e).__name__}: {str(e)[:300]!r}")
    try:
        dist.destroy_process_group()
        mark("destroyed")
    except Exception as e:  # noqa: BLE001
        mark("destroy_raised", f"{type(e).__name__}: {str(e)[:200]!r}")
    mark("exit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
