#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite: unit tests, real 4-rank gloo runs on CPU, and
# every notebook under nbval. Extra arguments go to pytest (e.g. -k triage, -x).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
exec .venv/bin/python -m pytest tests notebooks --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg \
  --nbval-cell-timeout=300 -p no:cacheprovider -ra "$@"
