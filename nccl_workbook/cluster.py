"""RankCluster: an ipyparallel cluster with one engine per rank: its lifecycle and its health.

Ranks are positions in the sorted engine ids (a replacement engine gets a new id, so engine id 2
is not rank 2 after a restart). The cluster starts the controller and the engines (forked from a
fork server that has torch imported), sets each engine up, keeps them healthy (a dead or stuck
engine is replaced before the next run), chooses the backend, estimates clock offsets between
hosts, and stops everything. Running a program on the ranks is :mod:`nccl_workbook.cluster_run`
(:meth:`RankCluster.run` calls it); watching the ranks while they run is
:mod:`nccl_workbook.observer`, which knows nothing of ipyparallel.

Three ways to get one, each visible where it is called:

- ``RankCluster(n_ranks=4).start()``: start a cluster of this process's own; ``stop()`` ends it.
- ``RankCluster(n_ranks=8, engines=SlurmEngines(partition="gpu", nodes=2, gpus_per_node=4)).start()``:
  the engines are one Slurm job (or ``MPIEngines(...)``: an ``mpiexec``) started through
  ipyparallel's own launchers (:mod:`nccl_workbook.launchers`); ranks in (host, local rank) order,
  the controller, rendezvous and hub on an address the other hosts reach; ``stop()`` (or the reaper,
  if this process dies) cancels the job.
- ``RankCluster.attach(profile="slurm")``: use an ipyparallel cluster you started yourself (e.g.
  with ``ipcluster``); it is used, never stopped.
- ``RankCluster.start_or_attach(n_ranks=4)``: use the cluster named by
  ``$NCCL_WORKBOOK_SHARED_CLUSTER`` if it is running (the test suite starts one and every notebook
  and dist test uses it; ``stop()`` then leaves it running), else start one of its own.

The cluster's state lives in a folder the project owns (``$NCCL_WORKBOOK_HOME``, default
``~/.cache/nccl-workbook``), not in ``~/.ipython``. Engines and controller never outlive the
process that started them: a reaper process (:mod:`nccl_workbook._reaper`) kills them if that
process dies without calling :meth:`stop`.

Start-up on Linux: engines are forked from a fork server that has torch and ipyparallel imported
(:mod:`nccl_workbook._zygote`), instead of each engine importing them again. On 2 cores that takes
a 4-rank cold start from about 8 s to about 4.6 s and a replacement engine to 1.4 s, and halves
each engine's private memory (``bench/run.py``, README). ``fork_engines=False`` or
``$NCCL_WORKBOOK_FORK_ENGINES=0`` start every engine as its own ``python -m ipyparallel.engine``.

Usage::

    with RankCluster(n_ranks=4) as cluster:          # local engines, gloo on CPU
        run = cluster.run(my_program, params, pg_timeout_s=3)
        [r.status for r in run.reports]

Limits: replacing dead engines and the reaper need a cluster this object started; an attached
cluster is only used, never stopped. A hung engine on another host is killed through its nanny
(ipyparallel's per-engine watcher process). A dead Slurm engine is replaced by a new job of its own,
which on a GPU partition waits for a free GPU (the first job holds its node's).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from nccl_workbook._state import package_pythonpath, state_dir, this_host
from nccl_workbook.cluster_run import ClusterRun, run_program
from nccl_workbook.launchers import (
    ClusterError, EngineLaunch, LocalEngines, Placement, SlurmEngines, engine_placement, host_address,
    slurm_job_name,
)
from nccl_workbook.observer import ProgressHub
from nccl_workbook.rank import EngineInfo, engine_clock, engine_setup

__all__ = ["RankCluster", "ClusterError", "SHARED_ENV"]

#: ``PROFILE_DIR::CLUSTER_ID`` of a running cluster that ``RankCluster.start()`` attaches to instead of
#: starting its own (the test suite sets it so that every notebook reuses one cluster)
SHARED_ENV = "NCCL_WORKBOOK_SHARED_CLUSTER"
#: set to 0 to start engines as separate interpreters instead of forks of a preloaded one
FORK_ENV = "NCCL_WORKBOOK_FORK_ENGINES"
#: heartbeat period of the controller, in ms (see ``RankCluster.start``)
HEARTBEAT_MS = 500

log = logging.getLogger(__name__)


class _EngineOutputFilter(logging.Filter):
    """ipyparallel logs the output of an engine that exits with an error (for a crash: the abort
    message, then the faulthandler stack dump of every thread, ~100 lines with the machine's paths)
    as a warning, which lands in the notebook cell that happens to run. Keep it here instead
    (:attr:`RankCluster.engine_exit_output`)."""

    def __init__(self) -> None:
        super().__init__()
        self.outputs: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("Output for %s") and len(record.args or ()) == 2:
            ident, text = record.args  # type: ignore[misc]
            self.outputs.append(f"engine process {ident}:\n{text}")
            return False
        if isinstance(record.msg, str) and record.msg.startswith("engine set stopped"):
            # "engine set stopped 1795337106: {'engines': {'0': {'exit_code': -6, ...}}}": a
            # one-engine replacement set whose engine died; the run reports that rank as crashed
            self.outputs.append(record.msg)
            return False
        return True


class RankCluster:
    """One ipyparallel engine per rank; see the module docstring."""

    def __init__(
        self,
        n_ranks: int = 4,
        *,
        backend: str = "gloo",
        engine_timeout_s: float = 90.0,
        engine_env: dict[str, str] | None = None,
        fork_engines: bool | None = None,
        engines: EngineLaunch | None = None,
        host_address: str | None = None,
    ) -> None:
        if n_ranks < 1:
            raise ValueError(f"n_ranks must be >= 1, got {n_ranks}")
        if backend not in {"gloo", "nccl", "auto"}:
            raise ValueError(f"backend must be 'gloo', 'nccl' or 'auto', got {backend!r}")
        self.n_ranks = n_ranks
        self.requested_backend = backend
        self.engine_timeout_s = engine_timeout_s
        self._engine_env = dict(engine_env or {})
        if fork_engines is None:
            fork_engines = sys.platform.startswith("linux") and os.environ.get(FORK_ENV, "1") != "0"
        #: where the engines come from (:mod:`nccl_workbook.launchers`): this host, Slurm, mpiexec
        self.launch = engines if engines is not None else LocalEngines()
        if self.launch.remote:
            fork_engines = False  # the fork server runs on this host only
        self.fork_engines = fork_engines
        self._host_address = host_address
        self._placement: dict[int, Placement] = {}
        #: Slurm jobs this object submitted (cancelled by stop(), and by the reaper)
        self.job_ids: list[str] = []
        self._engine_set_options: dict[str, Any] = {}
        self._zygote: subprocess.Popen[bytes] | None = None
        self._ipp_cluster: Any = None  # ipyparallel.Cluster when we own or know it
        self._client: Any = None
        self._owned = False
        self._shared = False
        self._reaper: subprocess.Popen[bytes] | None = None
        self._info: dict[int, EngineInfo] = {}
        self._backend: str | None = None
        self._notes: list[str] = []
        self._hub: ProgressHub | None = None
        self.start_s: float | None = None
        #: seconds per phase of the last cold start: "controller" (launched), "engines registered"
        #: (with fork_engines this includes the fork server's torch import), "engine setup" (torch
        #: import, when not forked, and the 1-rank warm-up)
        self.start_phases: dict[str, float] = {}
        self._output_filter = _EngineOutputFilter()

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def attach(
        cls,
        *,
        profile: str | None = None,
        profile_dir: str | None = None,
        cluster_id: str = "",
        client: Any = None,
        backend: str = "auto",
    ) -> RankCluster:
        """Use an ipyparallel cluster that is already running (one engine per rank), e.g. one
        started with ``ipcluster start --engines=slurm``. Every engine becomes a rank."""
        import ipyparallel as ipp

        if client is None:
            try:
                cluster = ipp.Cluster.from_file(profile=profile, profile_dir=profile_dir, cluster_id=cluster_id)
                client = cluster.connect_client_sync()
            except Exception as e:  # noqa: BLE001
                try:
                    client = ipp.Client(profile=profile, profile_dir=profile_dir, cluster_id=cluster_id or None, timeout=10)
                except Exception as e2:  # noqa: BLE001
                    raise ClusterError(
                        f"could not attach to an ipyparallel cluster (profile={profile!r}, "
                        f"profile_dir={profile_dir!r}, cluster_id={cluster_id!r}): {e2}; "
                        f"start one with `ipcluster start -n N` first"
                    ) from e
                cluster = None
        else:
            cluster = getattr(client, "cluster", None)
        n = len(client.ids)
        if n < 1:
            raise ClusterError("the attached cluster has no engines; start at least 2")
        self = cls(n_ranks=n, backend=backend)
        self._client, self._ipp_cluster, self._owned = client, cluster, False
        self._setup_engines(sorted(client.ids))
        return self

    @classmethod
    def start_or_attach(cls, n_ranks: int = 4, **options: Any) -> RankCluster:
        """The cluster named by ``$NCCL_WORKBOOK_SHARED_CLUSTER`` if it runs with at least
        ``n_ranks`` engines (used, never stopped, by this object: ``stop()`` leaves it running),
        else a cluster of its own, started now (``options`` as for the constructor)."""
        self = cls(n_ranks=n_ranks, **options)
        shared = os.environ.get(SHARED_ENV)
        if shared and self._attach_shared(shared):
            return self
        return self.start()

    def start(self) -> RankCluster:
        """Start the controller and ``n_ranks`` engines, import torch on them. Idempotent."""
        if self._client is not None:
            return self
        import ipyparallel as ipp

        t0 = time.perf_counter()
        home = state_dir()
        profile_dir = home / "profile_nccl_workbook"
        profile_dir.mkdir(parents=True, exist_ok=True)
        cluster_id = f"nwb-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        extra: dict[str, Any] = {}
        self.launch.check(self.n_ranks)
        if self.launch.remote:
            extra["engine_launcher_class"] = self.launch.launcher_class()
            # engines on other hosts must reach the controller
            extra["controller_ip"] = self.host_address(local=False)
        elif self.fork_engines:
            from nccl_workbook._launcher import ForkEngineSetLauncher

            extra["engine_launcher_class"] = ForkEngineSetLauncher
        self._ipp_cluster = ipp.Cluster(
            profile_dir=str(profile_dir),
            cluster_id=cluster_id,
            n=self.n_ranks,
            **extra,
            delay=0,
            engine_timeout=int(self.engine_timeout_s),
            log_level=logging.WARNING,
            load_profile=False,
            controller_args=[
                # schedulers as threads of one controller process instead of ~8 processes: less
                # to start on a small machine (measured in bench/run.py)
                "--usethreads",
                # The hub finishes an engine's registration only on the heartbeat after the
                # engine's first pong. At ipyparallel's 3 s period that left the engines idle for
                # 3-6 s of every cold start (measured: no CPU used between 2.7 s and 6.7 s).
                # 0.5 s makes it 0.5-1 s; 60 misses keep the default tolerance of 30 s before a
                # silent engine is dropped (a crash is reported sooner by the engine's nanny).
                f"--HeartMonitor.period={HEARTBEAT_MS}",
                f"--HeartMonitor.max_heartmonitor_misses={30_000 // HEARTBEAT_MS}",
            ],
        )
        self._ipp_cluster.log.addFilter(self._output_filter)
        self._owned = True
        self._engine_set_options = self.launch.engine_set_options(cluster_id, str(profile_dir))
        self._start_reaper(cluster_id, str(profile_dir))
        try:
            phases: dict[str, float] = {}
            t = time.perf_counter()
            if self.fork_engines:
                self._start_zygote(cluster_id, str(profile_dir))
            self._ipp_cluster.start_controller_sync(environment=self._env())
            phases["controller"], t = time.perf_counter() - t, time.perf_counter()
            self._client = self._ipp_cluster.connect_client_sync()
            self._start_engine_set(self.n_ranks)
            self._wait_for_engines(self.n_ranks)
            phases["engines registered"], t = time.perf_counter() - t, time.perf_counter()
            self._setup_engines(sorted(self._client.ids))
            phases["engine setup"] = time.perf_counter() - t
            self.start_phases = phases
        except BaseException as e:
            self.stop()
            if isinstance(e, ClusterError):
                raise
            raise ClusterError(f"could not start a {self.n_ranks}-engine cluster ({self.launch.describe()}): {e}") from e
        self.start_s = time.perf_counter() - t0
        log.info("cluster of %d engines ready in %.1f s", self.n_ranks, self.start_s)
        return self

    def _start_engine_set(self, n: int) -> None:
        """Start ``n`` engines with the cluster's launcher; remember the Slurm job it submitted."""
        import subprocess as sp

        try:
            set_id = self._ipp_cluster.start_engines_sync(n=n, environment=self._env(), **self._engine_set_options)
        except sp.CalledProcessError as e:
            # ipyparallel captures only the submit command's stdout; its reason is on stderr.
            # `sbatch --test-only` on the same script says it again, without submitting anything.
            why = (e.output or b"").decode(errors="replace") if isinstance(e.output, bytes) else str(e.output or "")
            script = e.cmd[-1] if isinstance(self.launch, SlurmEngines) and e.cmd else None
            if script and os.path.exists(str(script)):
                test = sp.run(["sbatch", "--test-only", str(script)], capture_output=True, text=True, timeout=30)
                why = (test.stderr or test.stdout or why).strip()
            raise ClusterError(
                f"{self.launch.describe()}: `{' '.join(map(str, e.cmd))}` failed with exit code {e.returncode}"
                f"{': ' + ' '.join(why.split())[:500] if why.strip() else ''}"
            ) from e
        job_id = getattr(self._ipp_cluster.engines.get(set_id), "job_id", "")
        if job_id:
            self.job_ids.append(job_id)
            log.info("submitted Slurm job %s for %d engine(s)", job_id, n)

    def _wait_for_engines(self, n: int) -> None:
        """Wait until ``n`` engines are registered. For a Slurm job, watch the job too: one that
        ends (or fails) first, or is still pending at ``start_timeout_s``, is an error that says
        why, and a pending job is cancelled."""
        if not isinstance(self.launch, SlurmEngines):
            if self.launch.remote:
                self._wait_for_launcher_process(n)
            else:
                # interactive=False: in a kernel, ipyparallel would draw a tqdm bar (`0/4 engine/s`) that
                # stays in the notebook's stored output long after the engines registered
                self._client.wait_for_engines(n, timeout=self.engine_timeout_s, interactive=False)
            return
        spec = self.launch
        t0 = time.monotonic()
        job = self.job_ids[-1]
        state: tuple[str, str] | None = ("PENDING", "")
        last_check = 0.0
        while len(self._client.ids) < n:
            now = time.monotonic()
            if now - last_check > 1.0:
                last_check = now
                state = spec.job_state(job)
                if state is None or state[0] in {"FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                                                  "BOOT_FAIL", "DEADLINE", "PREEMPTED", "COMPLETED"}:
                    what = "left the queue" if state is None else f"is {state[0]}"
                    raise ClusterError(
                        f"Slurm job {job} {what} before {n} engines registered ({len(self._client.ids)} did); "
                        f"its output: {self._job_output_tail()}"
                    )
            if now - t0 > spec.start_timeout_s:
                SlurmEngines.cancel([job])
                if state is not None and state[0] == "PENDING":
                    raise ClusterError(
                        f"Slurm job {job} did not start within start_timeout_s={spec.start_timeout_s:g} s "
                        f"(pending, reason: {state[1] or '?'}); it was cancelled. Ask for fewer resources, "
                        f"another partition, or a longer start_timeout_s"
                    )
                raise ClusterError(
                    f"{n} engines of Slurm job {job} did not register within {spec.start_timeout_s:g} s "
                    f"({len(self._client.ids)} did); it was cancelled. Its output: {self._job_output_tail()}"
                )
            time.sleep(0.05)

    def _wait_for_launcher_process(self, n: int) -> None:
        """Wait until ``n`` engines are registered while the launcher's process (``mpiexec``) runs;
        one that exits first is an error with its output, at once. ipyparallel learns of that exit
        only when its event loop next runs, which it does not while this waits, so the process is
        asked directly."""
        deadline = time.monotonic() + self.engine_timeout_s
        while len(self._client.ids) < n:
            for es in self._ipp_cluster.engines.values():
                proc = getattr(es, "_popen_process", None)
                if proc is not None and proc.poll() is not None:
                    # its exit code: ipyparallel's wait thread may have reaped it first (Popen then
                    # says 0), and its own record arrives with the event loop; said only when known
                    code = (getattr(es, "stop_data", None) or {}).get("exit_code")
                    how = f" with code {code}" if code is not None else ""
                    raise ClusterError(
                        f"{self.launch.describe()} exited{how} before {n} engines registered "
                        f"({len(self._client.ids)} did); its output: {self._launcher_output(es)}"
                    )
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{n} engines of {self.launch.describe()} did not register within {self.engine_timeout_s:g} s "
                    f"({len(self._client.ids)} did); its output: {self._job_output_tail()}"
                )
            time.sleep(0.05)

    @staticmethod
    def _launcher_output(es: Any, n_chars: int = 800) -> str:
        try:
            text = es.get_output(remove=False) or ""  # cached once ipyparallel has read (and removed) the file
        except Exception:  # noqa: BLE001
            text = ""
        text = " ".join(text.replace("-" * 20, " ").split())
        return (text[:n_chars] + (" ..." if len(text) > n_chars else "")) or "(empty)"

    def _job_output_tail(self, n_chars: int = 800) -> str:
        for es in self._ipp_cluster.engines.values():
            path = getattr(es, "output_file", "")
            if path and os.path.exists(path):
                with open(path, errors="replace") as f:
                    text = f.read()
                return text[-n_chars:].strip() or "(empty)"
        return "(no output file)"

    def _attach_shared(self, spec: str) -> bool:
        import ipyparallel as ipp

        t0 = time.perf_counter()
        try:
            profile_dir, cluster_id = spec.split("::", 1)
            # log_level CRITICAL while loading: ipyparallel logs "Engine 3 not running: Process …" to
            # the cell's stdout for an engine of the shared cluster that died and was replaced
            # earlier (harmless here, alarming in a notebook); WARNING again below
            cluster = ipp.Cluster.from_file(profile_dir=profile_dir, cluster_id=cluster_id, log_level=logging.CRITICAL)
            client = cluster.connect_client_sync()
            client.wait_for_engines(self.n_ranks, timeout=15, interactive=False)
        except Exception as e:  # noqa: BLE001 - fall back to a cluster of our own
            log.warning("could not attach to the shared cluster %s (%s); starting a new one", spec, e)
            return False
        self._ipp_cluster, self._client, self._owned, self._shared = cluster, client, False, True
        cluster.log.addFilter(self._output_filter)  # for replacement engines this process starts
        cluster.log.setLevel(logging.WARNING)  # as an owned one: no "Starting 1 engines with …" in cells
        self._setup_engines(sorted(client.ids))
        self.start_s = time.perf_counter() - t0
        return True

    @property
    def engine_exit_output(self) -> list[str]:
        """Output of engines started by this object that exited with an error, oldest first, as
        ipyparallel reports it: when this process next runs the cluster's event loop, e.g. while a
        replacement engine starts. For a crash it holds the reason (gloo's ``terminate called after
        throwing an instance of 'gloo::EnforceNotMet'``) before the stack dump. Empty for engines
        another process started."""
        return list(self._output_filter.outputs)

    @property
    def share_spec(self) -> str:
        """The value of ``$NCCL_WORKBOOK_SHARED_CLUSTER`` that lets other processes attach here."""
        self._require_running()
        return f"{self._ipp_cluster.profile_dir}::{self._ipp_cluster.cluster_id}"

    def _env(self) -> dict[str, str]:
        home = state_dir()
        env = {
            "IPYTHONDIR": str(home / "ipython"),
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            # engines must import this package even when it is run from a source tree
            "PYTHONPATH": package_pythonpath(),
        }
        env.update(self._engine_env)
        return env

    def _start_reaper(self, cluster_id: str, profile_dir: str) -> None:
        import psutil

        me = psutil.Process()
        # a Slurm job's engines run on other hosts: the reaper cancels the job by its name
        extra = [f"scancel-name={slurm_job_name(cluster_id)}"] if isinstance(self.launch, SlurmEngines) else []
        self._reaper = subprocess.Popen(
            [sys.executable, "-m", "nccl_workbook._reaper", str(me.pid), repr(me.create_time()), cluster_id, profile_dir,
             *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": package_pythonpath()},
        )

    def _start_zygote(self, cluster_id: str, profile_dir: str) -> None:
        """Start the fork server (it imports torch while the controller starts) and wait until its
        socket exists; engines asked of it before its imports are done queue there."""
        from nccl_workbook import _zygote

        env = {**os.environ, "IPP_CLUSTER_ID": cluster_id, "IPP_PROFILE_DIR": profile_dir, **self._env()}
        log_path = os.path.join(profile_dir, "log", f"zygote-{cluster_id}.log")
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        with open(log_path, "ab") as out:
            self._zygote = subprocess.Popen(
                [sys.executable, "-m", _zygote.CMD_MARKER, cluster_id],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + 10
        while not os.path.exists(_zygote.socket_path(cluster_id)):
            if self._zygote.poll() is not None or time.monotonic() > deadline:
                # engines will be started the ordinary way; say why once
                log.warning("the engine fork server did not start (see %s); starting engines without it", log_path)
                self._zygote.kill()
                self._zygote.wait()
                self._zygote = None
                return
            time.sleep(0.01)

    def _setup_engines(self, ids: list[int]) -> None:
        """Import torch on the given engines and record who they are."""
        missing = [i for i in ids if i not in self._info]
        if not missing:
            return
        ar = self._client[missing].apply_async(engine_setup)
        if not ar.wait(self.engine_timeout_s):
            raise ClusterError(f"engines {missing} did not finish importing torch in {self.engine_timeout_s:.0f} s")
        for eid, info in zip(missing, ar.get()):
            self._info[eid] = info
        for eid, place in zip(missing, self._client[missing].apply_sync(engine_placement)):
            self._placement[eid] = place

    # -- teardown ------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop engines and controller (if this object started them) and the reaper. Fast even
        when engines are stuck: they get SIGKILL, there is nothing to save on them."""
        if self._client is not None:
            try:
                self._client.close(linger=0)
            except Exception:  # noqa: BLE001
                pass
            self._client = None
        if self._owned and self._ipp_cluster is not None:
            from nccl_workbook._reaper import kill_cluster_processes, remove_cluster_files

            cluster = self._ipp_cluster
            if self.job_ids:  # cancel the Slurm job first: its engines may run on other hosts
                try:
                    SlurmEngines.cancel(self.job_ids)
                except ClusterError as e:
                    log.warning("could not cancel Slurm job(s) %s: %s", self.job_ids, e)
                self.job_ids = []
            if self.launch.remote:
                # cancelled above (Slurm) or killed below (mpiexec); ipyparallel's own stop would run
                # `scancel ''` for a set whose sbatch failed, now or at exit
                cluster.engines.clear()
            # silence ipyparallel's dump of the killed processes' logs into the notebook (it logs
            # them as warnings from its wait threads as soon as the processes exit)
            cluster.log.setLevel(logging.CRITICAL)
            try:
                kill_cluster_processes(cluster.cluster_id, cluster.profile_dir)
            finally:
                try:
                    # processes are gone: this only lets ipyparallel tidy its state and files
                    cluster.stop_cluster_sync()
                except Exception:  # noqa: BLE001
                    pass
                remove_cluster_files(cluster.cluster_id, cluster.profile_dir)
        self._ipp_cluster = None
        if self._zygote is not None:  # killed above with the cluster's processes; collect it
            self._zygote.kill()
            self._zygote.wait()
            self._zygote = None
        if self._reaper is not None:
            self._reaper.terminate()
            try:
                self._reaper.wait(5)
            except subprocess.TimeoutExpired:
                self._reaper.kill()
            self._reaper = None
        self._info.clear()
        self._placement.clear()

    def __enter__(self) -> RankCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:
        try:
            if self._owned and self._client is not None:
                self.stop()
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        if self._client is None:
            state = "stopped"
        else:
            state = f"running, engines={self.engine_ids}"
        cid = getattr(self._ipp_cluster, "cluster_id", None)
        owner = "owned" if self._owned else "shared" if self._shared else "attached"
        engines = "" if isinstance(self.launch, LocalEngines) else f", engines={self.launch.describe()}"
        return (f"<RankCluster(n_ranks={self.n_ranks}, backend={self.backend!r}, {owner}{engines}, "
                f"cluster_id={cid!r}, {state})>")

    # -- introspection -------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._client is not None

    @property
    def engine_ids(self) -> list[int]:
        """Engine ids in rank order (rank i runs on ``engine_ids[i]``): by host, then the local
        rank the launcher (Slurm, mpiexec) gave the engine, then engine id, so the order does not
        depend on which engine registered first. Local engines: engine id order."""
        self._require_running()

        def key(eid: int) -> tuple[int, str, int, int]:
            p = self._placement.get(eid)
            if p is None:
                return (1, "", 0, eid)  # not set up yet: after the others
            return (0, p.host, p.local_rank if p.local_rank is not None else eid, eid)

        return sorted(self._client.ids, key=key)

    @property
    def placement(self) -> dict[int, Placement]:
        """rank -> where its engine runs and the local rank its launcher gave it."""
        return {rank: self._placement[eid] for rank, eid in enumerate(self.engine_ids) if eid in self._placement}

    def local_ranks(self, ids: list[int]) -> list[int]:
        """Each engine's local rank (its GPU index): the launcher's, else its position among the
        given engines on its host."""
        hosts = [self._info[eid].host if eid in self._info else "?" for eid in ids]
        position = [hosts[:i].count(hosts[i]) for i in range(len(ids))]
        given = [p.local_rank if (p := self._placement.get(eid)) is not None else None for eid in ids]
        if any(g is None for g in given):
            return position
        # a replacement engine comes from a job of its own and has local rank 0 there: where two
        # engines of a host would share one, fall back to positions (distinct, in rank order)
        per_host = [(h, g) for h, g in zip(hosts, given)]
        return position if len(set(per_host)) < len(per_host) else [int(g) for g in given]  # type: ignore[arg-type]

    def host_address(self, local: bool) -> str:
        """The address the controller, rendezvous and hub use: loopback when every rank runs on
        this host, else ``host_address`` given to the constructor or :func:`~nccl_workbook.launchers.host_address`."""
        if local:
            return "127.0.0.1"
        return self._host_address or host_address()

    @property
    def engine_info(self) -> dict[int, EngineInfo]:
        """engine id -> what the engine reported about itself when it was set up."""
        return dict(self._info)

    def view(self, engine_id: int) -> Any:
        """ipyparallel's direct view of one engine (``.apply_async(f, *args)``), for
        :mod:`nccl_workbook.cluster_run`."""
        self._require_running()
        return self._client[engine_id]

    @property
    def engines(self) -> dict[int, EngineInfo]:
        """rank -> what its engine reported (pid, host, torch version, GPUs)."""
        return {rank: self._info[eid] for rank, eid in enumerate(self.engine_ids) if eid in self._info}

    @property
    def backend(self) -> str:
        """The backend runs use: ``gloo``, or ``nccl`` when asked for (or ``auto`` and every rank
        can have a GPU of its own on its host)."""
        if self._backend is None:
            if self.requested_backend != "auto" or not self._info:
                self._backend = "gloo" if self.requested_backend == "auto" else self.requested_backend
            else:
                per_host: dict[str, int] = {}
                for info in self._info.values():
                    per_host[info.host] = per_host.get(info.host, 0) + 1
                enough = all(
                    info.cuda_devices >= per_host[info.host] for info in self._info.values()
                )
                self._backend = "nccl" if enough else "gloo"
        return self._backend

    @property
    def max_world_size(self) -> int:
        """The most ranks a run can have. Engines that died are replaced at the start of the next
        run (:meth:`ensure_healthy`), so a cluster that can start engines still counts them."""
        if self._client is None:
            return self.n_ranks
        alive = len(self._client.ids)
        return max(alive, self.n_ranks) if self._ipp_cluster is not None else alive

    def _require_running(self) -> None:
        if self._client is None:
            raise ClusterError("the cluster is not running; call start() or use `with RankCluster(...)`")

    # -- health --------------------------------------------------------------------------------
    def ensure_healthy(self, *, ping_timeout_s: float = 5.0) -> list[str]:
        """Make sure ``n_ranks`` engines answer; replace dead or stuck ones. Returns notes on what
        was done (empty when nothing was needed)."""
        self._require_running()
        notes: list[str] = []
        ids = sorted(self._client.ids)
        if ids:
            ar = self._client[ids].apply_async(os.getpid)
            ar.wait(ping_timeout_s)
            stuck = [eid for eid, sub in zip(ids, ar._children) if not sub.done()]  # noqa: SLF001
            for eid in stuck:
                notes.append(self.kill_engine(eid, f"engine {eid} did not answer a ping in {ping_timeout_s:g} s"))
        for eid in list(self._info):
            if eid not in self._client.ids:
                info = self._info.pop(eid)
                notes.append(f"engine {eid} (pid {info.pid}) is gone")
        missing = self.n_ranks - len(self._client.ids)
        if missing > 0:
            if self._ipp_cluster is None:
                raise ClusterError(
                    f"{missing} engine(s) of the attached cluster died; restart them "
                    f"(e.g. `ipcluster engines -n {missing}`) and attach again"
                )
            t0 = time.perf_counter()
            before = set(self._client.ids)
            if self._owned:
                self._start_engine_set(missing)
            else:  # a shared cluster: its engine sets are the local kind
                self._ipp_cluster.start_engines_sync(n=missing, environment=self._env())
            self._wait_for_registered(self.engine_timeout_s)
            self._setup_engines(sorted(set(self._client.ids) - before))
            notes.append(f"started {missing} replacement engine(s) in {time.perf_counter() - t0:.1f} s")
        # engines another process of a shared cluster started (it replaced a dead one) are new here
        self._setup_engines(sorted(self._client.ids))
        for n in notes:
            log.info(n)
        return notes

    def _wait_for_registered(self, timeout_s: float) -> None:
        """Wait until ``n_ranks`` engines are registered. Not ``Client.wait_for_engines``: that
        raises ``EngineError: Engine set stopped`` as soon as any engine set the cluster file lists
        reports a stop, including a one-engine replacement set whose engine died in an earlier run
        (measured: the second crash of a replaced rank, in a cluster shared by several processes)."""
        deadline = time.monotonic() + timeout_s
        while len(self._client.ids) < self.n_ranks:
            if time.monotonic() > deadline:
                raise ClusterError(f"{self.n_ranks} engines not registered within {timeout_s:g} s "
                                   f"({len(self._client.ids)} are); see the engine logs under {state_dir()}")
            time.sleep(0.05)

    def kill_engine(self, eid: int, why: str, *, wait_s: float = 20.0) -> str:
        """SIGKILL a (local) engine and wait until the controller has unregistered it."""
        info = self._info.get(eid)
        if info is None:
            return f"{why}; its pid is unknown, so it was left alone"
        if info.host != this_host():
            # not a pid of this host: ask the engine's nanny (on its host) to SIGKILL it
            try:
                self._client.send_signal(int(signal.SIGKILL), targets=[eid], block=False)
            except Exception as e:  # noqa: BLE001
                return f"{why}; could not signal it on {info.host}: {e}"
            deadline = time.monotonic() + wait_s
            while eid in self._client.ids and time.monotonic() < deadline:
                time.sleep(0.05)
            return f"{why}; killed it on {info.host} (pid {info.pid}) through its nanny"
        try:
            os.kill(info.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        except PermissionError as e:
            raise ClusterError(f"{why}; could not kill pid {info.pid}: {e}") from e
        deadline = time.monotonic() + wait_s
        while eid in self._client.ids and time.monotonic() < deadline:
            time.sleep(0.05)
        return f"{why}; killed it (pid {info.pid})"

    def clock_offsets_ns(self, world_size: int | None = None) -> dict[int, int]:
        """rank -> estimated lead of that engine's clock over this process's (ns), from one
        round trip each (midpoint method). Zero for engines on this host."""
        ids = self.engine_ids[: world_size or self.n_ranks]
        me = this_host()
        offsets: dict[int, int] = {}
        for rank, eid in enumerate(ids):
            info = self._info.get(eid)
            if info is not None and info.host == me:
                offsets[rank] = 0
                continue
            t0 = time.time_ns()
            remote = self._client[eid].apply_sync(engine_clock)
            t1 = time.time_ns()
            offsets[rank] = remote - (t0 + t1) // 2
        return offsets

    # -- runs ----------------------------------------------------------------------------------
    def run(self, program: Callable[..., dict[str, Any] | None], params: Any, *, pg_timeout_s: float,
            **options: Any) -> ClusterRun:
        """Run ``program(ctx, params)`` on the ranks with a fresh process group: see
        :func:`nccl_workbook.cluster_run.run_program` for the options (``world_size``,
        ``deadline_s``, ``debug_level``, ``progress``, ``flight_recorder``, ``live``, ``trace``,
        ``min_wait_s``, ``on_hang``)."""
        self._require_running()
        return run_program(self, program, params, pg_timeout_s=pg_timeout_s, **options)

    def progress_hub(self, local: bool) -> ProgressHub | None:
        """The hub the ranks publish their progress to (one per cluster, reused by every run), bound
        to loopback for local ranks, else to this host's address; None if it cannot start (then
        runs go on without live detection)."""
        try:
            host = self.host_address(local)
        except ClusterError as e:
            log.warning("live hang detection is off: %s", e)
            return None
        if self._hub is None or self._hub.host != host:
            try:
                self._hub = ProgressHub(host)
            except Exception as e:  # noqa: BLE001 - no live detection, the run itself is unaffected
                log.warning("live hang detection is off: could not start the progress hub (%s)", e)
                return None
        return self._hub
