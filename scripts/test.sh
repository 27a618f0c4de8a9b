#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite: unit tests, real 4-rank gloo runs on CPU, and
# every notebook under nbval, and the docstring examples of the package (doctest). Extra arguments go to pytest (e.g. -k triage, -x).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
exec .venv/bin/python -m pytest tests nccl_workbook notebooks --doctest-modules --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg \
  --nbval-cell-timeout=300 -p no:cacheprovider -ra "$@"
