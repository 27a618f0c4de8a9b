NOTEBOOK = "notebooks/92_debug_your_own_script.ipynb"
CELLS = [
("md", """
# 92 · Debug your own script

The other notebooks run the workbook's own scenarios. This one runs **your training script**, unchanged,
on the workbook's cluster, the way `torchrun` would: every engine becomes a rank with `RANK`, `WORLD_SIZE`,
`LOCAL_RANK`, `MASTER_ADDR` and `MASTER_PORT` set, the script runs as `__main__`, and its own
`init_process_group()` joins the run. Meanwhile the workbook traces every collective (DDP's gradient
all-reduce too, through a comm hook installed at the model's first forward), marks a step at every
`optimizer.step()`, and watches the ranks live: a wait in a collective that some rank has not entered is
named within about a second, with every rank's stack. You get the same result as a scenario: per-rank
outcomes, the live stall, the diagnosis, the plots.

If the script gives `init_process_group` no `timeout=`, the group timeout you choose here is used
(torch's default is 30 minutes on gloo; the workbook scales incidents down to seconds).

The same watching works without a notebook around a real launcher:
`nccl-workbook watch -- torchrun --nproc_per_node=4 train.py ...` (see the README).
"""),
("code", """
from nccl_workbook.cluster import RankCluster
from nccl_workbook.watch.script import run_script, example_script
from nccl_workbook.watch.panel import ScriptPanel
from nccl_workbook.runner import combined_trace
from nccl_workbook import plots

import os

cluster = RankCluster.start_or_attach(n_ranks=4)
script = os.path.relpath(example_script())  # or the path of your own script
print(script)
"""),
("md", """
## The script

`examples/train_ddp.py` is written the way many training scripts are (nanoGPT's shape): a
`DistributedSampler`, a small language model under DDP, AdamW, and every `--eval-interval` steps
**rank 0 alone** evaluates and saves a checkpoint while the other ranks go on into the next step,
where DDP's gradient all-reduce waits for rank 0. Its flags plant faults; here
`--fault rank0-eval --stall-s 5` makes the evaluation take 5 s, longer than a 3 s group timeout,
as a validation set that grew would.

Before running it, lint it (`nccl-workbook lint train.py` does the same from a shell): the checker
reads the source for the hang hazards of the workbook's scenarios. Here it finds the planted
`skip-step` fault (a `loss.backward()` that one rank skips); rank 0's evaluation is followed by a
barrier that `--eval-sync side-group` uses, so the checker gives it the benefit of the doubt: only
running it shows the wait.
"""),
("code", """
from nccl_workbook.lint import lint_paths

report = lint_paths([script])
for f in report.findings:
    print(f"train_ddp.py:{f.line}: {f.rule.value}: {f.message.split(':')[0]}")
print("exit code", report.exit_code)
""", True),
("md", """
First a healthy run:
"""),
("code", """
healthy = run_script(cluster, script, "--steps 12 --eval-interval 5", pg_timeout_s=3)
print(healthy.verdict_text())
print([p.steps for p in healthy.per_rank], "steps per rank, marked at optimizer.step()")
""", True),
("md", """
## The hazard, live

Now the evaluation takes 5 s. The panel below runs it (change the arguments or the world size and
press Run to try your own); the status line names the late rank while the others still wait.
"""),
("code", """
panel = ScriptPanel(cluster, script, "--steps 12 --eval-interval 5 --fault rank0-eval --stall-s 5", pg_timeout_s=3)
broken = panel.run()
panel
"""),
("code", """
print(broken.verdict_text())
h = broken.hang
print("named live:", h.kind, "rank(s)", list(h.culprit_ranks), "in", h.op, "| before the timeout:",
      h.detected_after_s < broken.pg_timeout_s, "| still waiting when the run ended:", not h.resolved)
""", True),
("code", """
print(broken.detection_line())
"""),
("md", """
The live detector named rank 0 about a second into the wait, two seconds before the group timeout,
and the stack it took of every rank shows where: rank 0 inside `estimate_loss`, the others inside
`loss.backward()` (DDP's gradient all-reduce). After the run, the diagnosis of the trace names the same
rank and the same collective.
"""),
("code", """
broken.hang
"""),
("code", """
plots.timeline(combined_trace([healthy, broken]), timeouts_s={r.variant: r.pg_timeout_s for r in (healthy, broken)},
               title="the example script: healthy, then rank 0's long evaluation")
"""),
("md", """
## The fix

A longer group timeout would make this run pass, and delay the detection of every real hang by as
much. The fix is to wait for rank 0's evaluation somewhere else: `--eval-sync side-group` makes every
rank wait for it in a barrier on a gloo group of its own with a long timeout
(`nccl_workbook.fixes.wait_for_main` is the same as a function). The training group's 3 s timeout stays.
The wait is still there, and the live detector still reports it, now as a stall that **resolved**:
the waiting ranks got through by themselves after about 5 s.
"""),
("code", """
fixed = run_script(cluster, script, "--steps 12 --eval-interval 5 --fault rank0-eval --stall-s 5 --eval-sync side-group",
                   pg_timeout_s=3)
print(fixed.verdict_text())
print("live:", "resolved" if fixed.hang is not None and fixed.hang.resolved else fixed.hang,
      "| the others waited for rank", list(fixed.hang.culprit_ranks) if fixed.hang else None,
      "on a", "side group" if fixed.hang is not None and fixed.hang.pg != "0" else "main group")
""", True),
("code", """
cluster.stop()
"""),
]
