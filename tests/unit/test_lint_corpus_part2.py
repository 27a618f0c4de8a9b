"""Part 3 of the lint corpus cases (see test_lint_corpus.py, which holds the checks and part 1)."""

from __future__ import annotations

import pytest

from tests.unit.test_lint_corpus import cases_of_part, check_case

CASES = cases_of_part(2)


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_corpus_case(case: dict) -> None:
    check_case(case)
