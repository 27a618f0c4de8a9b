"""Triage reads only the records around its keywords (issue 17, part 3: a quiet log near the speed of
reading it). What it skips must change nothing: the events are the same as reading every line."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_workbook.triage import parser

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
QUIET = b"gpu-a100-07:4060:4193 [0] NCCL INFO Channel 03/0 : 0[90000] -> 1[1000] [send] via NET/Socket/3\n"

pytestmark = pytest.mark.skipif(parser._KEYWORD_SCAN is None, reason="google-re2 is not installed")


def _read_every_line(data: bytes) -> parser.ParsedLog:
    scan, parser._KEYWORD_SCAN = parser._KEYWORD_SCAN, None
    try:
        return parser.read_log(data)
    finally:
        parser._KEYWORD_SCAN = scan


def _same(data: bytes) -> None:
    fast, full = parser.read_log(data), _read_every_line(data)
    assert [e.to_json() for e in fast.events] == [e.to_json() for e in full.events]
    assert fast.tally == full.tally


def test_every_log_gives_the_same_events_as_reading_every_line():
    files = sorted(LOGS.glob("*/*.log"))
    assert len(files) > 80
    for path in files:
        _same(path.read_bytes().partition(b"\n")[2])


def test_quiet_lines_between_messages_are_skipped_and_line_numbers_kept():
    watchdog = (b"[rank5]:[E1121 10:10:01.1 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operation "
                b"timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
                b"600061 milliseconds before timing out.\n")
    data = QUIET * 5000 + watchdog + QUIET * 5000 + watchdog + QUIET * 100
    windows = list(parser._windows(data))
    assert len(windows) == 2 and sum(e - s for s, e in windows) < len(data) // 100
    events = parser.read_log(data).events
    assert [e.line_no for e in events] == [5001, 10002]
    _same(data)


def test_a_long_traceback_is_read_whole_between_its_header_and_its_exception():
    """Its frames hold no keyword; they say where the rank was (the DataLoader, 20 frames down)."""
    frames = b"".join(b'[rank3]:   File "/w/lib%d.py", line 1, in f%d\n[rank3]:     f()\n' % (i, i) for i in range(20))
    tb = (b"[rank3]: Traceback (most recent call last):\n" + frames
          + b'[rank3]:   File "/v/site-packages/torch/utils/data/dataloader.py", line 725, in __next__\n'
          + frames + b'[rank3]:   File "/w/data.py", line 12, in __getitem__\n[rank3]: KeyboardInterrupt\n')
    data = QUIET * 2000 + tb + QUIET * 2000
    (event,) = parser.read_log(data).events
    assert (event.kind.value, event.rank, event.site_kind.value, event.site) == ("interrupted", 3, "data",
                                                                                 "data.py:12 in __getitem__")
    _same(data)


def test_an_error_log_is_read_whole():
    data = b"".join((LOGS / "torch213" / n).read_bytes().partition(b"\n")[2]
                    for n in ("gloo_rank3_skips_allgather.log", "gloo_ctrl_c_rank0_in_eval.log")) * 200
    windows = list(parser._windows(data))
    assert sum(e - s for s, e in windows) > 0.95 * len(data)
    _same(data)
