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
