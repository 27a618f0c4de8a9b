"""How long `nccl-workbook lint` takes on real training scripts: every script of the lint corpus, laid out
with the files of its checkout that it imports (as a user's lint reads them), linted as the command does.

    python bench/lint_speed.py [--top 10]

Needs the corpus cache (``python tests/data/lint/corpus.py build``). Prints one markdown table: the time
per script (CPU seconds of the lint in this process, so another process's load on a shared machine is not
counted), the median and the slowest, with the lines read. The target (issue 14): a 2,000-line script in
under a second, fast enough for a pre-commit hook.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nccl_workbook.lint import lint_paths  # noqa: E402

_spec = importlib.util.spec_from_file_location("lint_corpus", ROOT / "tests" / "data" / "lint" / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
sys.modules["lint_corpus"] = corpus
assert _spec.loader is not None
_spec.loader.exec_module(corpus)


def time_case(case: dict, by_name: dict[str, dict], path: Path) -> tuple[float, int, int]:
    """(CPU seconds, lines, files) of one case's lint, laid out with its project."""
    files = [case] + [by_name[n] for n in case.get("project", [])]
    with tempfile.TemporaryDirectory() as tmp:
        lines = 0
        for c in files:
            dest = Path(tmp, c["path"])
            dest.parent.mkdir(parents=True, exist_ok=True)
            data = (path.parent / c["file"]).read_bytes()
            dest.write_bytes(data)
            lines += data.count(b"\n")
        t0 = time.process_time()
        lint_paths([Path(tmp, case.get("entry", case["path"]))])
        return time.process_time() - t0, lines, len(files)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--top", type=int, default=10, help="how many of the slowest scripts to list")
    args = ap.parse_args(argv)
    cases = corpus.load_cases()
    by_name = {c["file"]: c for c in cases}
    todo = [(c, p) for c in cases if not c.get("context_for") and corpus.counted(c)
            and (p := corpus.available(c)) is not None]
    if not todo:
        print("no corpus cache: run `python tests/data/lint/corpus.py build` first", file=sys.stderr)
        return 2
    rows = []
    for i, (case, path) in enumerate(todo, 1):
        seconds, lines, files = time_case(case, by_name, path)
        rows.append((seconds, lines, files, case["file"]))
        if i % 50 == 0:
            print(f"  {i}/{len(todo)} scripts", file=sys.stderr, flush=True)
    rows.sort(reverse=True)
    times = [r[0] for r in rows]
    single = [r for r in rows if r[2] == 1]
    print(f"`nccl-workbook lint` on {len(rows)} real scripts of the corpus ({platform.machine()} "
          f"{platform.system()}, {platform.python_version()}; CPU seconds of the lint, without start-up)\n")
    print("| what | seconds |\n|---|---|")
    print(f"| median, every script with the files it imports | {statistics.median(times):.2f} |")
    print(f"| 95th percentile | {times[len(times) // 20]:.2f} |")
    if single:
        big = max(single, key=lambda r: r[1])
        print(f"| the longest single-file script ({big[1]:,} lines, {big[3]}) | {big[0]:.2f} |")
    print(f"| all {len(rows)} | {sum(times):.1f} |\n")
    print("| slowest | seconds | lines | files |\n|---|---|---|---|")
    for seconds, lines, files, name in rows[:args.top]:
        print(f"| {name} | {seconds:.2f} | {lines:,} | {files} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
