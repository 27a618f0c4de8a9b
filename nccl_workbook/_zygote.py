"""A fork server for engines: import torch and ipyparallel once, then fork every engine from it.

Why: on a small machine a cold cluster is bound by CPU, and most of that CPU went into every engine
importing the same modules (measured on 2 cores, per engine: torch 1.5 s, the ``torch._dynamo``
that the first ``DistributedDataParallel`` pulls in 1.2 s, ipyparallel's engine 0.5 s; ×4 engines
on 2 cores ≈ 6 s of wall time). :class:`~nccl_workbook.cluster.RankCluster` starts this process
next to the controller; it pays the imports once, and each engine is an ``os.fork()`` of it that
shares those pages copy-on-write. The engines are real ipyparallel engines (same code, arguments
and environment as ``python -m ipyparallel.engine``); only the process that starts them differs.

Fork safety: nothing here initialises CUDA, starts a thread or opens a connection before a fork,
which is the same state in which PyTorch's own DataLoader forks its workers.

Protocol: one JSON object per connection on a Unix socket in a private (0700) folder,
``{"argv": [...], "env": {...}, "cwd": "...", "output": "..."}``; the answer is ``{"pid": N}`` or
``{"error": "..."}``. When an engine exits, its exit code is written next to the socket
(``<pid>.exit``), because only this process, its parent, can know it.

Usage: ``python -m nccl_workbook._zygote CLUSTER_ID``
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import tempfile
import time

__all__ = ["zygote_dir", "socket_path", "request_fork", "read_exit_code", "PRELOAD", "main"]

#: modules every engine needs; imported once here instead of once per engine
PRELOAD = (
    "torch",
    "torch.distributed",
    "torch.nn.parallel",
    "torch._dynamo",  # what DistributedDataParallel's constructor imports
    "torch.distributed.algorithms.ddp_comm_hooks.default_hooks",
    "torch.utils.data",
    "ipyparallel.engine.app",
    "nccl_workbook.rank",
    "nccl_workbook.live",
)
#: marker in the command line of the server and (inherited) of every engine forked from it
CMD_MARKER = "nccl_workbook._zygote"
_MAX_REQUEST = 4 << 20


def zygote_dir(cluster_id: str) -> str:
    """Private folder of one cluster's fork server. Short on purpose (a Unix socket path must fit
    in 108 bytes), under the temp folder, one 0700 parent per user."""
    return os.path.join(tempfile.gettempdir(), f"nwb-zygote-{os.getuid()}", cluster_id)


def socket_path(cluster_id: str) -> str:
    return os.path.join(zygote_dir(cluster_id), "sock")


def _private_dir(path: str) -> None:
    parent = os.path.dirname(path)
    os.makedirs(parent, mode=0o700, exist_ok=True)
    st = os.lstat(parent)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"{parent} must be a folder only this user can open")
    os.makedirs(path, mode=0o700, exist_ok=True)


def request_fork(cluster_id: str, *, argv: list[str], env: dict[str, str], cwd: str, output: str,
                 timeout_s: float = 120.0) -> int | None:
    """Ask the cluster's fork server for an engine; its pid, or None when there is no server to ask
    (the caller then starts the engine the ordinary way). Raises ``RuntimeError`` when a server
    answered with an error. The server accepts only once its imports are done, so the first answer
    can take as long as those imports (seconds)."""
    path = socket_path(cluster_id)
    if not os.path.exists(path):
        return None
    req = json.dumps({"argv": argv, "env": env, "cwd": cwd, "output": output}).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect(path)
            s.sendall(req)
            s.shutdown(socket.SHUT_WR)
            answer = _read_all(s)
    except OSError:  # a stale socket of a server that is gone
        return None
    if not answer:
        return None
    reply = json.loads(answer)
    if "error" in reply:
        raise RuntimeError(f"the engine fork server could not start an engine: {reply['error']}")
    return int(reply["pid"])


def read_exit_code(cluster_id: str, pid: int, *, wait_s: float = 1.0) -> int | None:
    """Exit code of an engine forked by the server (written when it reaped the engine)."""
    path = os.path.join(zygote_dir(cluster_id), f"{pid}.exit")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with open(path) as f:
                code = int(f.read().strip())
            os.remove(path)
            return code
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)


def _read_all(s: socket.socket) -> bytes:
    chunks, size = [], 0
    while True:
        b = s.recv(65536)
        if not b:
            return b"".join(chunks)
        chunks.append(b)
        size += len(b)
        if size > _MAX_REQUEST:
            raise OSError("request too large")


# -- the server ------------------------------------------------------------------------------------
def _reap(folder: str) -> None:
    """SIGCHLD: collect every exited engine and leave its exit code for its launcher."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        try:
            tmp = os.path.join(folder, f".{pid}.exit")
            with open(tmp, "w") as f:
                f.write(str(os.waitstatus_to_exitcode(status)))
            os.replace(tmp, os.path.join(folder, f"{pid}.exit"))
        except OSError:
            pass


def _engine(req: dict, listener: socket.socket, conn: socket.socket) -> None:  # pragma: no cover - runs in the child
    """In the forked child: become ``python -m ipyparallel.engine ARGV``; never returns."""
    code = 1
    try:
        listener.close()
        conn.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the engine waits for its own children
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.setsid()  # like ipyparallel's launcher: signals to the client's group don't reach it
        out = os.open(req["output"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        os.close(null)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        import random

        random.seed()  # not the server's state, shared by every engine
        sys.argv = ["ipyparallel.engine", *req["argv"]]
        from ipyparallel.engine.app import IPEngine

        try:
            IPEngine.launch_instance(argv=req["argv"])
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()  # what a normal interpreter exit would run
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(cluster_id: str) -> int:
    folder = zygote_dir(cluster_id)
    _private_dir(folder)
    path = socket_path(cluster_id)
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # bound before the imports, so a launcher that comes early queues instead of failing over
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    t0 = time.perf_counter()
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    print(f"fork server of {cluster_id}: {len(PRELOAD)} modules imported in {time.perf_counter() - t0:.1f} s",
          flush=True)
    signal.signal(signal.SIGCHLD, lambda *_: _reap(folder))
    try:
        while True:
            conn, _ = listener.accept()
            with conn:
                try:
                    conn.settimeout(10)
                    req = json.loads(_read_all(conn))
                    if not isinstance(req, dict) or not {"argv", "env", "cwd", "output"} <= req.keys():
                        raise ValueError("a request needs argv, env, cwd and output")
                    sys.stdout.flush()
                    sys.stderr.flush()
                    pid = os.fork()
                    if pid == 0:
                        _engine(req, listener, conn)
                    reply = {"pid": pid}
                except Exception as e:  # noqa: BLE001 - answer, keep serving
                    reply = {"error": f"{type(e).__name__}: {e}"}
                try:
                    conn.sendall(json.dumps(reply).encode())
                except OSError:
                    pass
    finally:
        listener.close()
        try:
            os.remove(path)
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    return serve(args[0])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
