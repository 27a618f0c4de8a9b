"""Triage on a partial paste: which ranks the log covers, confidence lowered once when it covers
fewer ranks than the job had, one wording for the ranks not in it, the scalar cause only for a
scalar reduction, the report wrapped at word boundaries, notebook paths as links in HTML."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from nccl_workbook.triage import Confidence, example_log_text, parse_log, rank_causes, summarize, triage_log
from nccl_workbook.triage import findings as findings_module
from nccl_workbook.triage.report import WIDTH, render_text

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
#: rank 5's watchdog line (wrapped before "milliseconds"), all-gather NumelIn=32834048, NumelOut=262672384
ONE_RANK = DATA / "real" / "pytorch_135352_wrapped_milliseconds.log"
NOT_IN_LOG = "ranks 0-4, 6, 7 are not in the log (not pasted, or printed nothing)"


def body(path: Path) -> bytes:
    """The log without its ``# source:`` line."""
    return path.read_bytes().partition(b"\n")[2]


def allgather_4096(rank: int) -> str:
    """rank's watchdog line for an 8-rank all-gather of 4096 elements per rank (real format)."""
    return (f"[rank{rank}]:[E1121 10:10:01.{100000000 + rank} ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=17, OpType=ALLGATHER, NumelIn=4096, NumelOut=32768, "
            "Timeout(ms)=600000) ran for 600017 milliseconds before timing out.")


def scalar_allreduce(rank: int) -> str:
    return allgather_4096(rank).replace("OpType=ALLGATHER, NumelIn=4096, NumelOut=32768",
                                        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1")


# --- which ranks the log covers ---------------------------------------------------------------


def test_one_pasted_rank_says_which_rank_of_how_many_and_what_is_not_in_it():
    report = triage_log(body(ONE_RANK))
    s = report.summary
    assert (s.ranks_covered, s.world_size, s.world_size_basis, s.partial) == ((5,), 8, "collective sizes", True)
    assert s.ranks_absent == (0, 1, 2, 3, 4, 6, 7)
    assert s.coverage == ("This log covers rank 5 of 8 (the group's size from the timed-out collective's NumelIn "
                          f"and NumelOut); {NOT_IN_LOG}.")
    summary = report.to_json()["summary"]
    assert (summary["partial"], summary["ranks_covered"], summary["ranks_absent"]) == (True, [5], [0, 1, 2, 3, 4, 6, 7])
    assert summary["coverage"] == s.coverage


def test_one_pasted_rank_names_the_others_as_not_in_the_log_at_low_confidence():
    report = triage_log(body(ONE_RANK))
    assert [f.confidence for f in report.findings] == [Confidence.LOW] * len(report.findings)
    assert "slow-metrics-on-rank0" not in [f.scenario for f in report.findings]  # an all-gather of 32M elements
    uneven = next(f for f in report.findings if f.scenario == "uneven-eval-allgather")
    assert uneven.reason.startswith(f"Rank 5 timed out in _ALLGATHER_BASE; {NOT_IN_LOG}: one of them is likely "
                                    "the late rank.")
    assert "did not join" not in uneven.reason
    # every finding that speaks of ranks not in the log uses the same words and the same list
    speaking = [f for f in report.findings if "not in the log" in f.reason]
    assert len(speaking) == 3 and all(NOT_IN_LOG in f.reason for f in speaking)
    text = report.render()
    # rank 0 is one of seven ranks the paste lacks: the reading that covers them all leads
    assert report.top.scenario == "uneven-eval-allgather"
    assert "Most likely: one of ranks 0-4, 6, 7, which are not in the log [low]." in text
    assert "Most likely: rank(s)" not in text and "silent:" not in text


def test_one_rank_of_a_job_whose_size_the_log_does_not_state():
    report = triage_log(body(DATA / "real" / "lmdeploy_3258_cuda_illegal_memory.log"))
    s = report.summary
    assert (s.ranks_covered, s.world_size_basis, s.partial) == ((2,), "highest rank + 1", True)
    assert s.coverage == ("This log covers rank 2; the log does not state the world size (at least 3): "
                          "ranks 0, 1 are not in the log (not pasted, or printed nothing).")
    top = report.top
    assert (top.scenario, top.culprit_ranks, top.confidence) == ("exception-on-one-rank", (2,), Confidence.LOW)
    assert top.reason.endswith("Confidence lowered: the log covers only rank 2 and does not state the world size.")
    assert "Most likely: rank 2 [low]." in report.render()


def test_rank_0_alone_with_no_world_size_is_partial_too():
    s = triage_log(body(DATA / "real" / "diffusionpipe_10_unhandled_cuda_999.log")).summary
    assert (s.ranks_covered, s.ranks_absent, s.partial) == ((0,), (), True)
    assert s.coverage == "This log covers rank 0; the log does not state the world size."


def test_a_log_without_ranks_is_not_partial_and_says_so():
    s = triage_log(b"OSError: [Errno 24] Too many open files\n").summary
    assert (s.ranks_covered, s.partial) == ((), False)
    assert s.coverage == "No line of this log says which rank printed it; the log does not state the world size."


# --- a full log keeps its confidence ----------------------------------------------------------


@pytest.mark.parametrize(("log", "scenario", "confidence", "score"), [
    (DATA / "torch213" / "gloo_rank3_skips_allgather.log", "uneven-eval-allgather", Confidence.HIGH, 0.85),
    (DATA / "torch213" / "gloo_exception_on_one_rank.log", "exception-on-one-rank", Confidence.HIGH, 0.9),
])
def test_a_full_multi_rank_log_is_not_partial_and_keeps_its_confidence(log, scenario, confidence, score):
    report = triage_log(body(log))
    s = report.summary
    assert not s.partial and s.ranks_absent == () and s.ranks_covered == tuple(range(s.world_size))
    assert s.coverage == f"This log covers all {s.world_size} ranks (world size from the launcher's per-rank summary)."
    assert (report.top.scenario, report.top.confidence, report.top.score) == (scenario, confidence, score)
    assert not any("Confidence lowered" in f.reason for f in report.findings)


def test_the_bundled_example_covers_all_four_ranks():
    report = triage_log(example_log_text())
    assert (report.summary.ranks_covered, report.summary.partial) == ((0, 1, 2, 3), False)
    assert (report.top.scenario, report.top.confidence) == ("rank0-work-before-barrier", Confidence.MEDIUM)


def test_the_same_log_cut_to_one_rank_is_lowered_one_level_in_one_place():
    full = body(DATA / "torch213" / "gloo_exception_on_one_rank.log").decode()
    rank1 = "\n".join(line for line in full.splitlines() if line.startswith("[rank1]")) + "\n"
    events = parse_log(rank1)
    summary = summarize(events)
    assert (summary.ranks_covered, summary.partial) == ((1,), True)
    lowered = rank_causes(events, summary)
    kept = rank_causes(events, summarize(events).__class__(**{**summary.__dict__, "partial": False}))
    assert [f.scenario for f in lowered] == [f.scenario for f in kept]
    for low, high in zip(lowered, kept):
        assert low.score == pytest.approx(max(high.score - 0.3, 0.05))
        changed = low.confidence is not high.confidence
        assert changed == low.reason.endswith("Confidence lowered: the log covers only rank 1 and does not state "
                                              "the world size.")
    assert (kept[0].confidence, lowered[0].confidence) == (Confidence.MEDIUM, Confidence.LOW)


def test_the_penalty_lowers_every_score_exactly_one_level_with_a_floor():
    lower = {Confidence.HIGH: Confidence.MEDIUM, Confidence.MEDIUM: Confidence.LOW, Confidence.LOW: Confidence.LOW}
    scores = {name: v for name, v in vars(findings_module).items()
              if re.fullmatch(r"_[A-Z0-9_]+", name) and isinstance(v, float) and 0 < v <= 1}
    assert len(scores) > 30
    for name, score in scores.items():
        lowered = max(score - findings_module._PARTIAL_PENALTY, findings_module._SCORE_FLOOR)
        assert Confidence.from_score(lowered) is lower[Confidence.from_score(score)], name


# --- the scalar all-reduce cause needs a scalar reduction -------------------------------------


def test_a_4096_element_allgather_gets_no_scalar_all_reduce_cause():
    report = triage_log(allgather_4096(3) + "\n")
    s = report.summary
    assert (s.failed_op, s.failed_numel, s.world_size, s.ranks_covered) == ("ALLGATHER", 4096, 8, (3,))
    assert s.coverage.startswith("This log covers rank 3 of 8 ")
    assert "slow-metrics-on-rank0" not in [f.scenario for f in report.findings]
    assert not any("scalar" in f.reason for f in report.findings)
    top = report.top
    assert (top.scenario, top.culprit_ranks, top.confidence) == ("uneven-eval-allgather", (0, 1, 2, 4, 5, 6, 7),
                                                                 Confidence.LOW)
    assert "ranks 0-2, 4-7 are not in the log (not pasted, or printed nothing): one of them is likely the late rank" \
        in top.reason
    assert "Most likely: one of ranks 0-2, 4-7, which are not in the log [low]." in report.render()


def test_the_allgather_from_seven_ranks_names_rank_0_but_still_no_scalar_cause():
    report = triage_log("\n".join(allgather_4096(r) for r in range(1, 8)) + "\n")
    assert report.summary.ranks_absent == (0,)
    scenarios = [f.scenario for f in report.findings]
    assert "rank0-work-before-barrier" in scenarios and "slow-metrics-on-rank0" not in scenarios


def test_a_one_element_allreduce_keeps_the_scalar_cause():
    report = triage_log("\n".join(scalar_allreduce(r) for r in range(1, 4)) + "\n")
    metric = next(f for f in report.findings if f.scenario == "slow-metrics-on-rank0")
    assert metric.culprit_ranks == (0,) and "A scalar all-reduce" in metric.reason


# --- wrapping ---------------------------------------------------------------------------------


def reports() -> list[Any]:
    logs = [body(p) for p in sorted((DATA / "real").glob("*.log"))] + [example_log_text(), allgather_4096(3)]
    return [triage_log(log) for log in logs]


def test_the_text_is_wrapped_at_word_boundaries_and_long_tokens_stay_whole():
    for report in reports():
        text = report.render()
        for line in text.splitlines():
            assert len(line) <= WIDTH or " " not in line.strip(), line
        # the same words as the report unwrapped: no word was cut
        assert text.split() == render_text(report, width=1_000_000).split()
    text = triage_log(allgather_4096(3)).render()
    assert "\n     notebook: notebooks/06_uneven_eval_allgather.ipynb\n" in text


# --- notebook links ---------------------------------------------------------------------------


def test_notebook_paths_are_links_in_html_and_plain_in_text():
    report = triage_log(allgather_4096(3))
    html = report._repr_html_()
    assert 'notebook: <a href="06_uneven_eval_allgather.ipynb">06_uneven_eval_allgather.ipynb</a>\n' in html
    assert '<a href="01_rank0_work_before_barrier.ipynb">01_rank0_work_before_barrier.ipynb</a>' in html
    assert "notebooks/" not in html
    assert "<a " not in report.render() and "notebooks/06_uneven_eval_allgather.ipynb" in report.render()


def test_the_triage_panel_snapshot_has_the_links(monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("ipywidgets")
    import IPython.display as ipd

    from nccl_workbook.triage.widget import triage_panel

    shown: list[dict[str, Any]] = []
    monkeypatch.setattr(ipd, "display", lambda data, raw: shown.append(data))
    panel = triage_panel(allgather_4096(3))
    panel.report = triage_log(allgather_4096(3))
    panel._ipython_display_()
    (data,) = shown
    assert '<a href="06_uneven_eval_allgather.ipynb">06_uneven_eval_allgather.ipynb</a>' in data["text/html"]


def test_one_silent_rank_among_many_is_evidence_not_a_partial_log():
    """Ranks 1-7 time out in the same all-reduce and rank 0 prints nothing: the log is the whole job's
    output (silence is what the late rank does), so nothing is lowered and rank 0 is named."""
    line = ("[rank{r}]:[E1206 18:44:12.7 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
            "600061 milliseconds before timing out.\n")
    report = triage_log("".join(line.format(r=r) for r in range(1, 8)))
    s = report.summary
    assert (s.ranks_covered, s.ranks_absent, s.partial) == (tuple(range(1, 8)), (0,), False)
    assert report.top.culprit_ranks == (0,)
    assert "lowered" not in report.top.reason.lower()
    half = triage_log("".join(line.format(r=r) for r in (4, 7)))
    assert half.summary.partial  # 2 ranks of at least 8: a part of the job's output
