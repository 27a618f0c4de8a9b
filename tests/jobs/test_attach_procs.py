"""attach's process side on real processes: progress counters, py-spy errors, job discovery."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from nccl_workbook.attach.procs import find_jobs, main_thread_counters, py_spy_dump, uses_cuda


def test_counters_do_not_move_while_sleeping_and_py_spy_reads_it() -> None:
    child = subprocess.Popen(["timeout", "30", sys.executable, "-c", "import time; time.sleep(20)"],
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while True:
            kids = [int(x) for x in open(f"/proc/{child.pid}/task/{child.pid}/children").read().split()]
            if kids or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        pid = kids[0]
        time.sleep(1.0)  # past the interpreter's start
        a = main_thread_counters(pid)
        time.sleep(0.3)
        b = main_thread_counters(pid)
        assert a is not None and a == b
        text, err = py_spy_dump(pid)
        assert err is None and 'Thread' in text and "<module> (<string>:1)" in text
        assert not uses_cuda(pid)
        # the py-spy dump made the paused thread switch context: that is why counters are read first
        assert main_thread_counters(pid) != b
    finally:
        os.killpg(child.pid, 9)
        child.wait()


def test_py_spy_on_a_gone_process_says_why() -> None:
    text, err = py_spy_dump(2**22 + 12345)
    assert text == "" and err is not None and err.startswith("py-spy failed")
    assert main_thread_counters(2**22 + 12345) is None


def test_find_jobs_ignores_processes_without_rank_env() -> None:
    jobs, _ = find_jobs()
    assert all(r.pid != os.getpid() for j in jobs for r in j.ranks)


def test_a_dump_that_ran_out_of_time_is_asked_again_alone(monkeypatch) -> None:  # noqa: ANN001
    """On a loaded machine four native dumps at once can run out of time: those ranks are dumped again, one at a
    time, instead of being reported unreadable."""
    from nccl_workbook.attach import procs

    busy = {"now": 0, "most": 0}
    calls: dict[int, int] = {}

    def dump(pid: int, *, native: bool = False, timeout_s: float = 10.0) -> tuple[str, str | None]:
        busy["now"] += 1
        busy["most"] = max(busy["most"], busy["now"])
        time.sleep(0.05)
        busy["now"] -= 1
        calls[pid] = calls.get(pid, 0) + 1
        if pid in (101, 103) and calls[pid] == 1:
            return "", f"{procs.TIMED_OUT} {timeout_s:g} s"
        if pid == 102:
            return "", "py-spy failed: no such process"   # a failure is not tried again
        return f"Thread {pid} (idle)", None

    monkeypatch.setattr(procs, "py_spy_dump", dump)
    monkeypatch.setattr(procs, "uses_cuda", lambda pid: False)
    monkeypatch.setattr(procs, "main_thread_counters", lambda pid: (1, 1))
    job = procs.Job(key="j", ranks=tuple(procs.RankProcess(rank=i, pid=100 + i, world_size=4, local_rank=i)
                                         for i in range(4)), launcher_pid=None, launcher="torchrun",
                   all_pids=frozenset(range(100, 104)))
    snaps = procs.observe(job, interval_s=0.0)
    assert calls == {100: 1, 101: 2, 102: 1, 103: 2}
    assert [s.error for s in snaps] == [None, None, "py-spy failed: no such process", None]
    assert busy["most"] >= 2   # the first dumps ran side by side
