#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite: unit tests, real 4-rank gloo runs on CPU, and
# every notebook under nbval, and the docstring examples of the package (doctest). Extra arguments go to pytest (e.g. -k triage, -x).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
OPTS=(--doctest-modules --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=300
      -p no:cacheprovider -ra)
DAEMONS=(tests/slurm tests/mpi tests/multihost)
# on three pytest-xdist workers by default (a file's tests stay on one worker: a notebook's cells share its
# kernel, a module its fixtures). Most of the time is spent waiting for ranks and timeouts, so on a 2-core machine
# three workers take 11.4 min where one process takes 20 (README, Measured). NCCL_WORKBOOK_TEST_WORKERS=0 runs it
# in one process.
rc=0
.venv/bin/python -m pytest tests nccl_workbook notebooks "${OPTS[@]}" -n "${NCCL_WORKBOOK_TEST_WORKERS:-3}" --dist loadfile \
  "${DAEMONS[@]/#/--ignore=}" "$@" || { r=$?; [ "$r" -eq 5 ] || rc=$r; }
# then, one after another, the tests of machine-wide daemons (Slurm, munge, mpirun, network namespaces): each
# checks that none of its own is left, so they must not run beside each other. (Exit 5: -k selected nothing there.)
.venv/bin/python -m pytest "${DAEMONS[@]}" "${OPTS[@]}" "$@" || { r=$?; [ "$r" -eq 5 ] || rc=$r; }
exit "$rc"
