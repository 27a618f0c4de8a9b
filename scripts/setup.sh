#!/usr/bin/env bash
# Set up the workbook's Python environment in .venv (idempotent; a second run takes seconds).
#
# torch: if the Python you run this with can already import torch (a CUDA build on a GPU
# machine, say), the venv sees it (--system-site-packages) and it is left alone. Otherwise the
# pinned CPU-capable build torch==${TORCH_VERSION:-2.13.0} is installed. An unpinned "torch"
# would pull several GB of CUDA wheels, so it is never asked for.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
VENV="${VENV:-.venv}"
EXTRAS="${1:-test}"

if [ ! -x "$VENV/bin/python" ]; then
  if "$PYTHON" -c "import torch" 2>/dev/null; then
    echo "setup: using the torch that $PYTHON already has ($("$PYTHON" -c 'import torch; print(torch.__version__)'))"
    "$PYTHON" -m venv --system-site-packages "$VENV"
  else
    "$PYTHON" -m venv "$VENV"
  fi
fi
PY="$VENV/bin/python"

# The browser end-to-end test (tests/e2e) drives Debian's chromium; WITH_CHROMIUM=1 installs it
# (apt-get, as root or with sudo). .ci/run sets it; without it that test is skipped locally.
if [ "${WITH_CHROMIUM:-0}" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "setup: installing Debian's chromium for the browser test"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  command -v chromium >/dev/null || { echo "setup: chromium could not be installed" >&2; exit 1; }
fi
# The Slurm, MPI and two-host tests (tests/slurm, tests/mpi, tests/multihost) start Debian's Slurm,
# munge and Open MPI as root and make network namespaces; WITH_SLURM=1 installs them (apt-get, as root
# or with sudo). .ci/run sets it; without them those tests are skipped locally, with the reason.
if [ "${WITH_SLURM:-0}" = 1 ]; then
  need=""
  for tool in sbatch slurmctld slurmd munged mpiexec ip nsenter unshare; do command -v "$tool" >/dev/null 2>&1 || need=1; done
  if [ -n "$need" ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    echo "setup: installing Debian's slurm-wlm, munge, openmpi-bin and iproute2 for the Slurm/MPI/two-host tests"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq slurm-wlm munge openmpi-bin iproute2 util-linux >/dev/null
    for tool in sbatch slurmctld slurmd munged mpiexec ip nsenter unshare; do
      command -v "$tool" >/dev/null || { echo "setup: $tool could not be installed" >&2; exit 1; }
    done
  fi
fi
"$PY" -m pip install -q --upgrade pip 2>&1 | grep -v "is ignored" || true
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "setup: installing torch==$TORCH_VERSION"
  "$PY" -m pip install -q "torch==$TORCH_VERSION" 2>&1 | grep -v "is ignored" || true
fi
# quietly: torch warns "Failed to initialize NumPy" when imported before NumPy is installed (it
# comes with the package below); that is harmless here. On a real failure, show torch's own error.
"$PY" -c "import torch" 2>/dev/null || { "$PY" -c "import torch"; echo "setup: torch could not be installed" >&2; exit 1; }
echo "setup: installing nccl-workbook[$EXTRAS]"
"$PY" -m pip install -q -e ".[$EXTRAS]" 2>&1 | grep -v -e "is ignored" -e "WheelFile" -e "!!" || true
"$PY" -c "import nccl_workbook, ipyparallel, jupyterlab; print('setup: ok, torch', __import__('torch').__version__)"
if [ "${WITH_CHROMIUM:-0}" = 1 ]; then
  "$PY" -c "import playwright.sync_api" || { echo "setup: the browser test needs playwright (extra 'test')" >&2; exit 1; }
fi
