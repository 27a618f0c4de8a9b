"""ipyparallel engine launchers that fork engines from the cluster's fork server (``_zygote``).

``Cluster(engine_launcher_class=ForkEngineSetLauncher)``: each engine is asked of the server of the
cluster's id; where there is none (not started, gone, or another command than the default engine
command was configured), the engine is started the ordinary way, as ``LocalEngineLauncher`` would.
Everything else (waiting for the exit, signals, stop, output file, reconstructing from the
cluster file in another process) is ``LocalEngineLauncher``'s own code, which works on any local
pid through psutil; only the exit code has to come from the server, the engine's parent.
"""

from __future__ import annotations

import os

import psutil
from traitlets import Bool
from ipyparallel.cluster.launcher import LocalEngineLauncher, LocalEngineSetLauncher, ipengine_cmd_argv

from nccl_workbook import _zygote

__all__ = ["ForkEngineLauncher", "ForkEngineSetLauncher"]


class ForkEngineLauncher(LocalEngineLauncher):
    """One engine, forked from the fork server when there is one."""

    # saved in the cluster file, so that another process that attaches knows it too
    forked = Bool(False).tag(to_dict=True)

    def start(self):  # noqa: ANN201 - ipyparallel's signature
        if self.state != "before" or list(self.engine_cmd) != list(ipengine_cmd_argv) or not self.cluster_id:
            return super().start()
        env = os.environ.copy()
        env.update(self.get_env())
        pid = _zygote.request_fork(
            self.cluster_id,
            argv=[*self.cluster_args, *self.engine_args],
            env=env,
            cwd=self.work_dir,
            output=self.output_file,
        )
        if pid is None:
            return super().start()
        self.log.debug("forked engine %s as pid %d", self.identifier, pid)
        self.forked = True
        self.pid = pid
        self.process = psutil.Process(pid)
        self.notify_start(pid)
        self._start_waiting()
        return pid

    def notify_stop(self, data):  # noqa: ANN001, ANN201
        # psutil cannot know the exit code of another process's child; the server wrote it
        if self.forked and data.get("exit_code") is None and data.get("pid"):
            data = {**data, "exit_code": _zygote.read_exit_code(self.cluster_id, data["pid"])}
        return super().notify_stop(data)


class ForkEngineSetLauncher(LocalEngineSetLauncher):
    """``LocalEngineSetLauncher`` whose engines are :class:`ForkEngineLauncher`\\ s."""

    launcher_class = ForkEngineLauncher
    # how the cluster file names this class, so that ``Cluster.from_file`` in another process (a
    # notebook attaching to a shared cluster) can import it: ipyparallel's default spelling
    # ``module:Class`` is not one its own trait accepts back
    entrypoint_name = "nccl_workbook._launcher.ForkEngineSetLauncher"
