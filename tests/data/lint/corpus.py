"""The lint's real-code corpus: rebuild the files from their repositories, and measure recall and false reports.

``corpus.json`` (next to this file) lists every case: where the file comes from (repository, path,
commit, or an issue's own code), the URL that confirms the hang, and the findings expected at which
lines. The third-party files themselves are not kept in this repository; they live in a cache
folder (``$NCCL_WORKBOOK_LINT_CORPUS``, default ``~/.cache/nccl-workbook/lint-corpus``), checked
against the sha256 recorded for each.

Usage::

    python tests/data/lint/corpus.py build --mirrors DIR   # git show COMMIT:PATH from DIR/owner+name/repo
    python tests/data/lint/corpus.py build --clone         # or clone each repository (needs network)
    python tests/data/lint/corpus.py measure               # recall per rule, false reports per clean script
    python tests/data/lint/corpus.py sources               # the case table of SOURCES.md
    python tests/data/lint/corpus.py full --mirrors DIR    # lint each case in its whole checkout: what differs

``build`` cannot fetch the cases whose source is an issue's text or an excerpt: it names them, with
the URL to copy them from.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parents[2]) not in sys.path:  # this checkout's package, whatever is installed
    sys.path.insert(0, str(HERE.parents[2]))
MANIFEST = HERE / "corpus.json"
RULES = ("collective-in-rank-branch", "rank0-long-work-before-collective", "uneven-collective-count",
         "exception-on-one-rank", "noop-timeout-setting", "dataloader-timeout-ge-pg-timeout")


def cache_dir() -> Path:
    return Path(os.environ.get("NCCL_WORKBOOK_LINT_CORPUS", "~/.cache/nccl-workbook/lint-corpus")).expanduser()


_LOADED: dict[tuple[int, int], list[dict]] = {}


def load_cases() -> list[dict]:
    """The manifest's cases, parsed once per version of the file (2 MB: read again for each of a case's
    project files it cost the suite minutes). Read only: the tools that change the manifest load it apart."""
    st = MANIFEST.stat()
    key = (st.st_mtime_ns, st.st_size)
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = json.loads(MANIFEST.read_text())["cases"]
    return _LOADED[key]


def available(case: dict, cache: Path | None = None) -> Path | None:
    """The cached file of a case when it is there and matches its sha256 (and so do the files of its
    ``project``), else None."""
    p = (cache or cache_dir()) / case["file"]
    if not p.is_file() or hashlib.sha256(p.read_bytes()).hexdigest() != case["sha256"]:
        return None
    by_name = {c["file"]: c for c in load_cases()}
    if any(available(by_name[name], cache) is None for name in case.get("project", [])):
        return None
    return p


def counted(case: dict) -> bool:
    """A case of its own: not a file kept only as another case's ``project`` (read for its functions)."""
    return not case.get("context_for")


@dataclass(frozen=True)
class Outcome:
    case: dict
    found: list[tuple[str, int]]
    missing: list[tuple[str, int]]
    unexpected: list[tuple[str, int]]
    #: false reports already known and recorded in the manifest (``"false"``): counted, not failed
    known_false: list[tuple[str, int]]
    #: known false reports the lint no longer makes: to be moved to ``"blind_false"`` (fixed since)
    stale_false: list[tuple[str, int]]
    #: of ``found``, the lint's notes (not counted as hazards: a rank-0 save of a model nothing says is large)
    noted: list[tuple[str, int]]
    #: the notes the manifest records (``"notes"`` of the case's files: at the blind run, and ``"notes_later"``:
    #: made since, by a change to another rule, judged here; ``"notes_gone"`` are notes of the blind run no longer
    #: made, since the collective they named is no longer reached there)
    wanted_notes: list[tuple[str, int]]


def _key(c: dict, rule: str, line: int) -> tuple[str, int]:
    """A finding of the case's own file is (rule, line); one of a file of its project, which the lint
    reports as an import of the script, is ("rule in repo/path.py", line)."""
    return (rule, line) if not c.get("context_for") else (f"{rule} in {c['path']}", line)


def _known_false(c: dict) -> list[list]:
    """The false reports recorded as still made: at the blind run (``false``) and since (``false_later``)."""
    return c.get("false", []) + c.get("false_later", [])


def _recorded(c: dict) -> list[list]:
    """Every finding the manifest expects or knows in a case's file: real, also, and known false."""
    return c["expect"] + c["also"] + _known_false(c)


def evaluate(case: dict, path: Path) -> Outcome:
    """Lint a case's file on its own or, when it names a ``project`` (the other files of its repository
    that it imports, kept as cases marked ``context_for``), laid out with them at their repository paths,
    as a user linting their checkout would have it."""
    from nccl_workbook.lint import lint_paths, lint_source

    files = [case]
    if case.get("project"):
        by_name = {c["file"]: c for c in load_cases()}
        files += [by_name[name] for name in case["project"]]
        with tempfile.TemporaryDirectory() as tmp:
            where: dict[Path, dict] = {}
            for c in files:
                dest = Path(tmp, c["path"])
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes((path.parent / c["file"]).read_bytes())
                where[dest.resolve()] = c
            # as `nccl-workbook lint SCRIPT` runs: the local files it imports are reported too; `entry`: the
            # script a user runs the lint on, when the case's file is one it imports (open_clip's train.py, whose
            # evaluate() is handed the DDP model by main.py)
            report = lint_paths([Path(tmp, case.get("entry", case["path"]))])
            assert not report.errors, report.errors
            found = [_key(where[Path(f.path).resolve()], f.rule.value, f.line) for f in report.with_notes]
            noted = [_key(where[Path(f.path).resolve()], f.rule.value, f.line) for f in report.notes]
    else:
        all_ = lint_source(path.read_text(errors="replace"), str(path), notes=True)
        found = [(f.rule.value, f.line) for f in all_]
        noted = [(f.rule.value, f.line) for f in all_ if f.note]
    wanted = [_key(c, *x) for c in files for x in c["expect"]]
    known = {_key(c, *x) for c in files for x in _known_false(c)}
    # a recorded note is allowed as a note (the test compares the notes apart): since round 22 a note the
    # held-out reader judged fine is recorded only there, not as a false report
    allowed = {_key(c, *x) for c in files for x in _recorded(c) + c.get("notes", []) + c.get("notes_later", [])}
    return Outcome(case, found, [w for w in wanted if w not in found], [f for f in found if f not in allowed],
                   [f for f in found if f in known], sorted(k for k in known if k not in found), sorted(noted),
                   sorted(_key(c, *x) for c in files for x in c.get("notes", []) + c.get("notes_later", [])))


def measure(cache: Path | None = None) -> str:
    # per rule: confirmed lines, found; hazard-only lines, found; blind (linted before any rule change) lines, found
    rows = {r: [0, 0, 0, 0, 0, 0] for r in RULES}
    hazard_false = 0
    blind_hazard = sum(len(c.get("blind_false", [])) for c in load_cases() if c["rule"])
    blind_clean = [c for c in load_cases() if not c["rule"] and c.get("blind")]
    clean_files = clean_false = famous = false_noted = real_noted = later_noted = 0
    held = [0, 0, 0]   # held-out clean files, their false reports, their real-hazard findings
    by_name = {c["file"]: c for c in load_cases()}
    lines = []
    for case in filter(counted, load_cases()):
        p = available(case, cache)
        if p is None:
            lines.append(f"  (not in cache) {case['file']}")
            continue
        out = evaluate(case, p)
        if case["rule"]:
            hazard_false += len(out.known_false) + len(out.unexpected)
            for rule, line in case["expect"]:
                col = 2 if case.get("hazard_only") else 0
                # a note is pointed at but not counted as a hazard: not found, for recall
                hit = (rule, line) not in out.missing and (rule, line) not in out.noted
                rows[rule][col] += 1
                rows[rule][col + 1] += hit
                if case.get("blind") and not case.get("hazard_only"):
                    # what the blind run found: a line it missed (``blind_missed``) found since is development
                    rows[rule][4] += 1
                    rows[rule][5] += hit and [rule, line] not in case.get("blind_missed", [])
        else:
            clean_files += 1
            false_now = [f for f in out.unexpected + out.known_false if f not in out.noted]
            clean_false += len(false_now)
            # the real hazards found in the script and in the files it imports (checked with it)
            expected = [_key(c, *x) for c in [case] + [by_name[n] for n in case.get("project", [])] for x in c["expect"]]
            # notes of a save its reader judged no hazard (a false report before notes existed, or a note judged fine)
            # (notes made since the blind run are judged here, not by a reader: counted apart)
            later = {_key(c, *x) for c in [case] + [by_name[n] for n in case.get("project", [])]
                     for x in c.get("notes_later", [])}
            false_noted += sum(1 for x in out.noted if x not in expected and x not in later)
            later_noted += sum(1 for x in out.noted if x in later)
            real = sum(1 for x in expected if x not in out.noted)
            real_noted += len(expected) - real
            famous += real
            if case.get("held_out"):
                held[0] += 1
                held[1] += len(false_now)
                held[2] += real
        if out.noted != out.wanted_notes:
            lines.append(f"  {case['file']}: notes {out.noted}, recorded {out.wanted_notes}")
        if out.missing or out.unexpected:
            lines.append(f"  {case['file']}: missing {out.missing} unexpected {out.unexpected}")
    table = ["rule                                 found / confirmed   (blind)   hazard only"]
    table += [f"{r:<36} {f:>5} / {n:<9} ({bf} / {bn})   {hf} / {hn}" for r, (n, f, hn, hf, bn, bf) in rows.items()]
    table.append(f"false reports in the hazard files (known, recorded in the manifest): {hazard_false}")
    table.append(f"false reports when the blind hazard cases were first linted (blind_false, fixed since): "
                 f"{blind_hazard}")
    for rnd in sorted({c["round"] for c in blind_clean}):
        cases = [c for c in blind_clean if c["round"] == rnd]
        # the script and the files of its checkout, whose findings the first run reported too (since round 11)
        files = cases + [by_name[name] for c in cases for name in c.get("project", [])]
        first = sum(len(c.get("blind_false", [])) + len(c.get("false", [])) for c in files)
        left = sum(1 for c in files for x in c.get("false", []) if x not in c.get("notes", []))
        noted = sum(1 for c in files for x in c.get("false", []) if x in c.get("notes", []))
        later = sum(len(c.get("false_later", [])) for c in files)
        # notes the lint already made at the blind run, judged fine by the reader (rounds since notes exist)
        fine = sum(1 for c in files for x in c.get("notes", []) + c.get("notes_gone", [])
                   if x not in c.get("false", []) + c["expect"])
        table.append(f"held-out round {rnd}: {len(cases)} correct scripts linted once blind, {first} false reports at that "
                     f"run ({first / len(cases):.2f} per script); {left} of them still reported (recorded as known)"
                     + (f", {noted} now notes" if noted else "")
                     + (f"; {fine} notes at that run, judged fine" if fine else "")
                     + (f"; {later} made since (known: false_later)" if later else ""))
    table.append(f"clean scripts: {clean_files}, false reports: {clean_false} "
                 f"({clean_false / max(clean_files, 1):.2f} per script), real hazards found in them: {famous}")
    table.append(f"  notes (rank-0 saves where nothing says the model is large, or of the trained tensors only, or a "
                 f"W&B run started on rank 0 only; not "
                 f"counted above): {false_noted} "
                 f"judged false by their readers, {real_noted} judged real, {later_noted} made since the blind run "
                 f"(judged fine here)")
    table.append(f"  of which held out (linted once, never tuned on): {held[0]}, false reports: {held[1]}, "
                 f"real hazards found: {held[2]}")
    # (``unreached``: real hazards once reported in an imported file, in code the linted script does not reach;
    # since stop 53 only what a script reaches in the files it imports is reported)
    unreached = sum(len(c.get("unreached", [])) for c in load_cases())
    table.append(f"real hazards in imported code the linted scripts do not reach (not reported since stop 53): {unreached}")
    return "\n".join(table + lines)


def build(mirrors: Path | None, clone: bool) -> int:
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    missing = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in load_cases():
            own = cache / case["file"]
            if own.is_file() and hashlib.sha256(own.read_bytes()).hexdigest() == case["sha256"]:
                continue
            if case["source"] != "repository":
                print(f"copy by hand: {case['file']} ({case['source']}: {case['confirms']})")
                missing += 1
                continue
            if mirrors is not None:
                git_dir = mirrors / case["repo"].replace("/", "+") / "repo"
            else:
                git_dir = Path(tmp) / case["repo"].replace("/", "+")
                if clone and not git_dir.exists():
                    subprocess.run(["git", "clone", "--bare", "--filter=blob:none", "-q",
                                    f"https://github.com/{case['repo']}.git", str(git_dir)], check=False)
            # `repo_path`: the file's path in its own repository, when the checkout has it elsewhere (DUSt3R's
            # croco/ is a git submodule of naver/croco)
            path = case.get("repo_path", case["path"])
            tree = subprocess.run(["git", "-C", str(git_dir), "ls-tree", case["commit"], "--", path],
                                  capture_output=True, text=True).stdout
            result = subprocess.run(["git", "-C", str(git_dir), "show", f"{case['commit']}:{path}"], capture_output=True)
            if tree.startswith("120000") and result.returncode == 0:   # a symbolic link: read the file it names
                target = os.path.normpath(os.path.join(os.path.dirname(path), result.stdout.decode()))
                result = subprocess.run(["git", "-C", str(git_dir), "show", f"{case['commit']}:{target}"],
                                        capture_output=True)
            if result.returncode != 0:
                print(f"cannot read {case['repo']}@{case['commit'][:10]}:{case['path']}", file=sys.stderr)
                missing += 1
                continue
            own.write_bytes(result.stdout)
            if hashlib.sha256(result.stdout).hexdigest() != case["sha256"]:   # (its project files may come later)
                print(f"sha256 differs: {case['file']}", file=sys.stderr)
                missing += 1
    print(f"cache: {cache} ({missing} missing)")
    return 1 if missing else 0


def full_checkouts(mirrors: Path, out: Path) -> int:
    """Lint each case that has a project in its whole checkout (the ``.py`` files of its commit, from the
    mirrors), as a user would, and print the findings that differ from the manifest's (expected, also and
    known false, over the case's files). Returns the number of cases that differ."""
    from nccl_workbook.lint import lint_paths

    cases = load_cases()
    by_name = {c["file"]: c for c in cases}
    differ = 0
    for case in cases:
        if not counted(case) or not case.get("project") or case["source"] != "repository":
            continue
        root = out / f"{case['repo'].replace('/', '+')}@{case['commit'][:10]}"
        if not root.exists():
            git = str(mirrors / case["repo"].replace("/", "+") / "repo")
            names = subprocess.run(["git", "-C", git, "ls-tree", "-r", "--name-only", case["commit"]],
                                   capture_output=True, text=True, check=True).stdout.split("\n")
            root.mkdir(parents=True)
            archive = subprocess.run(["git", "-C", git, "archive", case["commit"], "--",
                                      *[n for n in names if n.endswith(".py")]], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
        known = {(by_name[n]["path"], rule, line) for n in [case["file"], *case["project"]]
                 for rule, line in _recorded(by_name[n])}
        cwd = os.getcwd()
        os.chdir(root)
        try:
            got = {(str(Path(f.path)), f.rule.value, f.line) for f in lint_paths([Path(case["path"])]).findings}
        finally:
            os.chdir(cwd)
        if got != known:
            differ += 1
            print(f"{case['file']}: more {sorted(got - known)} fewer {sorted(known - got)}", flush=True)
    return differ


def sources_table() -> str:
    """The case table of SOURCES.md, from the manifest."""
    rows = ["| file | rule | source | expected | confirms | note |", "|---|---|---|---|---|---|"]
    for c in load_cases():
        src = f"{c['repo']} `{c['path']}` @ {c['commit'][:10]}" if c.get("repo") else ""
        src = src if c["source"] == "repository" else (f"{c['source']} of {src}" if src else c["source"])
        exp = ", ".join(f"{r}:{line}" for r, line in c["expect"]) or "none"
        if c.get("false"):
            exp += "; known false: " + ", ".join(f"{r}:{line}" for r, line in c["false"])
        if c.get("false_later"):
            exp += "; known false, made since the blind run: " + ", ".join(f"{r}:{line}" for r, line in c["false_later"])
        if c.get("notes_gone"):
            exp += "; notes of the blind run no longer made: " + ", ".join(f"{r}:{line}" for r, line in c["notes_gone"])
        if c.get("notes_later"):
            exp += "; notes made since the blind run, judged fine: " + ", ".join(
                f"{r}:{line}" for r, line in c["notes_later"])
        if c.get("unreached"):
            exp += "; real, in code the script does not reach (not reported since stop 53): " + ", ".join(
                f"{r}:{line}" for r, line in c["unreached"])
        if c.get("blind_false"):
            exp += "; false when first linted (fixed since): " + ", ".join(f"{r}:{line}" for r, line in c["blind_false"])
        confirms = c["confirms"] or ("none: hazard only" if c.get("hazard_only") else "-")
        rows.append(f"| `{c['file']}` | {c['rule'] or 'clean'} | {src} | {exp} | {confirms} | "
                    f"{c['note'].replace('|', '/')} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--mirrors", type=Path, default=None, help="folder of bare clones named owner+name/repo")
    b.add_argument("--clone", action="store_true", help="clone each repository from GitHub")
    sub.add_parser("measure")
    fl = sub.add_parser("full", help="lint each case with a project in its whole checkout; print the differences")
    fl.add_argument("--mirrors", type=Path, required=True, help="folder of bare clones named owner+name/repo")
    fl.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "lint-corpus-checkouts")
    sub.add_parser("sources", help="print the case table of SOURCES.md")
    args = p.parse_args(argv)
    if args.cmd == "build":
        return build(args.mirrors, args.clone)
    if args.cmd == "full":
        print(f"{full_checkouts(args.mirrors, args.out)} cases differ")
        return 0
    print(measure() if args.cmd == "measure" else sources_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
