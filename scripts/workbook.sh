#!/usr/bin/env bash
# Set up (if needed) and open the workbook in JupyterLab.
#   scripts/workbook.sh               # opens a browser
#   scripts/workbook.sh --no-browser  # headless: prints the URL (with its token) to open yourself
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
exec .venv/bin/nccl-workbook lab "$@"
