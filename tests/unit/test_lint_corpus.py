"""The lint on public training scripts with confirmed hangs, and on well-known correct ones.

The cases, their sources and the expected findings are in ``tests/data/lint/corpus.json`` (see
``tests/data/lint/SOURCES.md``). The third-party files are not in this repository: a case runs when
its file is in the corpus cache with the recorded sha256 (``python tests/data/lint/corpus.py build``),
and is skipped otherwise. The manifest itself is always checked.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from nccl_workbook.lint import Rule

_spec = importlib.util.spec_from_file_location(
    "lint_corpus", Path(__file__).resolve().parents[1] / "data" / "lint" / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
sys.modules["lint_corpus"] = corpus  # dataclasses look their module up there
assert _spec.loader is not None
_spec.loader.exec_module(corpus)

CASES = corpus.load_cases()


def test_manifest_names_sources_and_known_rules() -> None:
    rules = {r.value for r in Rule}
    assert set(corpus.RULES) == rules
    for case in CASES:
        # a script is Python; a file beside it may also be a configuration the lint reads for the modules it
        # names (bio-diffusion's Hydra `_target_:` files, stop 46) or for how it is launched (an accelerate or
        # DeepSpeed configuration, YAML or JSON: InternVLA-M1's, stop 50)
        kinds = (".py", ".yaml", ".yml", ".json") if case.get("context_for") else (".py",)
        assert case["file"].endswith(kinds) and len(case["sha256"]) == 64, case["file"]
        assert case["source"] in ("repository", "issue-snippet", "excerpt"), case["file"]
        if case["source"] == "repository":
            assert case["repo"].count("/") == 1 and len(case["commit"]) == 40 and case["path"], case["file"]
        if case["rule"]:
            # a hazard without a thread that confirms a hang is recorded as such, and counted apart
            assert case["confirms"] or (case.get("hazard_only") and "HAZARD ONLY" in case["note"]), \
                f"{case['file']}: a hazard case needs the URL or source that confirms it"
        for rule, line in (case["expect"] + case["also"] + case.get("false", []) + case.get("blind_false", [])
                           + case.get("false_later", []) + case.get("unreached", [])):
            assert rule in rules and line > 0, case["file"]


def test_project_files_are_cases_kept_for_one_case() -> None:
    by_name = {c["file"]: c for c in CASES}
    for case in CASES:
        for name in case.get("project", []):
            assert by_name[name]["context_for"] == case["file"]
            if "repo_path" in by_name[name]:
                continue   # a git submodule's file, from its own repository (DUSt3R's croco/)
            assert by_name[name]["repo"] == case["repo"]
            assert by_name[name]["commit"] == case["commit"], f"{name}: not the checkout of {case['file']}"
        if case.get("context_for"):
            # its `expect`: the findings in it when its script is linted (the local files a script imports are
            # checked with it)
            assert not case["rule"] and case["file"] in by_name[case["context_for"]]["project"]


#: the cases are checked in PARTS files (this one and test_lint_corpus_part*.py): the suite runs each file on one
#: pytest-xdist worker (``--dist loadfile``), and one file of 800 cases was the longest wait of the whole run
PARTS = 3


def cases_of_part(part: int) -> list[dict]:
    """Every PARTS-th counted case, from ``part`` (dealt in turn, so that each part gets large and small ones)."""
    return [c for c in CASES if corpus.counted(c)][part::PARTS]


def check_case(case: dict) -> None:
    """The lint's findings on one case are the manifest's: expected, noted, known false (nothing else)."""
    path = corpus.available(case)
    if path is None:
        pytest.skip(f"{case['file']} is not in the corpus cache ({corpus.cache_dir()}); see tests/data/lint/corpus.py")
    out = corpus.evaluate(case, path)
    if "MISSED" in case["note"]:
        assert out.missing, f"{case['file']} is now found: move it out of the known misses"
    else:
        assert out.missing == [], f"{case['file']}: expected findings not reported"
    assert out.noted == out.wanted_notes, f"{case['file']}: the notes (not counted as hazards) differ from the recorded"
    assert out.unexpected == [], f"{case['file']}: false reports"
    assert out.stale_false == [], f"{case['file']}: known false reports no longer made: move them to blind_false"


@pytest.mark.parametrize("case", cases_of_part(0), ids=[c["file"] for c in cases_of_part(0)])
def test_corpus_case(case: dict) -> None:
    check_case(case)


def test_the_parts_cover_every_case_once() -> None:
    parts = sorted(Path(__file__).parent.glob("test_lint_corpus_part*.py"))
    assert len(parts) == PARTS - 1
    dealt = [c["file"] for part in range(PARTS) for c in cases_of_part(part)]
    assert sorted(dealt) == sorted(c["file"] for c in CASES if corpus.counted(c))


def test_open_clip_linted_as_a_project(tmp_path: Path) -> None:
    """open_clip's main.py and train.py in their package layout, linted together: the rank-0 evaluation
    in train.py (missed file by file: its barrier is in main.py) is found, with nothing more."""
    by_name = {c["file"]: c for c in CASES}
    files = {"main.py": by_name["r3_openclip_main.py"], "train.py": by_name["r3_openclip_train.py"]}
    pkg = tmp_path / "src" / "open_clip_train"
    pkg.mkdir(parents=True)
    for name, case in files.items():
        path = corpus.available(case)
        if path is None:
            pytest.skip(f"{case['file']} is not in the corpus cache; see tests/data/lint/corpus.py")
        (pkg / name).write_bytes(path.read_bytes())
    from nccl_workbook.lint import lint_paths
    report = lint_paths([tmp_path / "src"])
    # (and, since stop 36, the two error exits of main() on the master only: `return -1` when the experiment exists
    # or the remote sync test fails, while the others go on to the broadcast and DDP's constructor)
    assert [(Path(f.path).name, f.line, f.rule.value) for f in report.with_notes] == [
        ("main.py", 139, "uneven-collective-count"), ("main.py", 224, "uneven-collective-count"),
        ("main.py", 725, "rank0-long-work-before-collective"), ("train.py", 551, "rank0-long-work-before-collective")]
    assert "main.py:659" in report.with_notes[3].message   # the barrier the others wait in
