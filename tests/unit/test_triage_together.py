"""Reading the ranks together (issue 17, part 2): the op in each rank's traceback, ranks that left
early, and torchrun's "Root Cause" when it names a victim. Logs recorded with torch 2.13
(``tests/data/logs/torch213``, made by its ``make_logs.py``)."""

from __future__ import annotations

from pathlib import Path

from nccl_workbook.triage import EventKind, example_log_text, triage_log

DATA = Path(__file__).resolve().parents[1] / "data" / "logs" / "torch213"


def body(name: str) -> bytes:
    return (DATA / name).read_bytes().partition(b"\n")[2]


def test_rank_in_another_collective_than_the_others_is_named():
    """Ranks 0-2 time out in all_gather, rank 3 in the barrier after it: rank 3 skipped the all_gather."""
    report = triage_log(body("gloo_rank3_skips_allgather.log"))
    s = report.summary
    assert s.ranks_elsewhere == (3,) and "rank 3 in BARRIER while ranks 0-2 waited in ALLGATHER" in s.elsewhere_reason
    first, second = report.findings[:2]
    assert (first.scenario, first.culprit_ranks) == ("uneven-eval-allgather", (3,)) and first.confidence.value == "high"
    assert (second.scenario, second.culprit_ranks) == ("collective-mismatch", (3,))


def test_two_sides_or_numbered_timeouts_name_no_rank_elsewhere():
    line = ("[rank{r}]: File \"/x/distributed_c10d.py\", line 1, in {fn}\n"
            "[rank{r}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
            "waiting 3000ms for recv operation to complete\n")
    two = line.format(r=0, fn="all_gather") + line.format(r=1, fn="barrier")
    assert triage_log(two).summary.ranks_elsewhere == ()
    tie = "".join(line.format(r=r, fn=fn) for r, fn in ((0, "all_gather"), (1, "all_gather"), (2, "barrier"),
                                                      (3, "barrier")))
    assert triage_log(tie).summary.ranks_elsewhere == ()


def test_rank_that_left_early_is_named():
    report = triage_log(body("gloo_rank2_finishes_early.log"))
    top = report.top
    assert (top.title, top.scenario, top.culprit_ranks) == ("A rank left the collectives early", "uneven-eval-allgather",
                                                            (2,))
    assert "SIGTERM" in top.reason


def test_root_cause_naming_a_victim_is_said():
    report = triage_log(example_log_text())  # torchrun names rank 1 (SIGABRT); rank 0 was the late one
    note = next(f for f in report.findings if f.title == "torchrun's root cause is a victim")
    assert note.culprit_ranks == (0,) and "names rank 1" in note.reason and note.confidence.value == "low"
    assert report.top.culprit_ranks == (0,)
    exits = [e for e in report.events if e.kind is EventKind.PROCESS_EXIT and "root cause" in e.detail]
    assert [e.rank for e in exits] == [1]
    skipped = triage_log(body("gloo_rank3_skips_allgather.log"))
    assert any(f.title == "torchrun's root cause is a victim" and "names rank 0" in f.reason for f in skipped.findings)


def test_ctrl_c_on_a_hung_job_names_the_rank_loading_data():
    """Ctrl-C on a hung torchrun job: every rank prints its traceback. Ranks 0-2 are inside all_reduce,
    rank 3 in its dataset's __getitem__ under the DataLoader: rank 3 is the late one."""
    report = triage_log(body("gloo_ctrl_c_rank3_in_dataloader.log"))
    s = report.summary
    assert (s.ranks_elsewhere, s.elsewhere_kind) == ((3,), "data")
    assert "rank 3 loading data (<tmp>:11 in __getitem__) while ranks 0-2 were inside ALLREDUCE" in s.elsewhere_reason
    assert (report.top.scenario, report.top.culprit_ranks, report.top.confidence.value) == ("dataloader-stall", (3,),
                                                                                            "high")
    rows = {row.rank: row for row in s.per_rank}
    assert rows[3].status.value == "interrupted" and rows[3].site == "data: <tmp>:11 in __getitem__"
    assert {rows[r].site.split(":")[0] for r in (0, 1, 2)} == {"collective"}
    assert s.unranked_failures == 0  # the launcher's own SignalException is not a rank's failure
    kinds = [e.kind for e in report.events if e.rank == 3]
    assert kinds == [EventKind.INTERRUPTED]


def test_ctrl_c_on_a_hung_job_names_the_rank_in_its_own_code():
    """Rank 0 evaluates alone while ranks 1-3 wait in the next all_reduce."""
    report = triage_log(body("gloo_ctrl_c_rank0_in_eval.log"))
    assert (report.summary.ranks_elsewhere, report.summary.elsewhere_kind) == ((0,), "code")
    top, second = report.findings[:2]
    assert (top.scenario, top.culprit_ranks) == ("rank0-work-before-barrier", (0,))
    assert "rank 0 in its own code (<tmp>:7 in evaluate) while ranks 1-3 were inside ALLREDUCE" in top.reason
    assert "stopped from outside" in top.reason
    assert (second.scenario, second.culprit_ranks) == ("slow-rank-dynamic-shapes", (0,))


def test_site_needs_ranks_on_both_sides():
    """Every rank in data loading (a slow file system for all): no rank is singled out."""
    tb = ("[rank{r}]: Traceback (most recent call last):\n"
          "[rank{r}]:   File \"/w/train.py\", line 40, in main\n"
          "[rank{r}]:   File \"/v/site-packages/torch/utils/data/dataloader.py\", line 725, in __next__\n"
          "[rank{r}]:   File \"/w/data.py\", line 12, in __getitem__\n"
          "[rank{r}]: KeyboardInterrupt\n")
    report = triage_log("".join(tb.format(r=r) for r in range(4)))
    assert report.summary.ranks_elsewhere == ()
    assert {row.site for row in report.summary.per_rank} == {"data: data.py:12 in __getitem__"}


def test_report_says_where_each_traceback_puts_the_ranks():
    text = triage_log(body("gloo_ctrl_c_rank0_in_eval.log")).render()
    flat = " ".join(text.split())
    assert "Their tracebacks put rank 0 in user code (<tmp>:7 in evaluate); ranks 1-3 in a collective" in flat


def test_readme_example_is_what_triage_prints():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## After it failed: `nccl-workbook triage`", 1)[1]
    block = section.split("```", 2)[1]
    rendered = triage_log((DATA / "gloo_ctrl_c_rank0_in_eval.log").read_bytes()).render().splitlines()  # as the CLI reads it
    shown = [line for line in block.strip("\n").splitlines() if line.strip() != "..."]
    assert shown and all(line in rendered for line in shown), [line for line in shown if line not in rendered]
