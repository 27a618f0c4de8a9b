#!/usr/bin/env bash
# Everything that needs a GPU, in one go, with a deadline per part; results under OUT (default
# /tmp/nwb-gpu). Run from the repository root on a machine with one NVIDIA GPU and a CUDA torch:
#   bash tests/gpu/run_on_gpu.sh OUT
set -uo pipefail
OUT="${1:-/tmp/nwb-gpu}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
PY="${PYTHON:-python3}"
{ nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > "$OUT/nvidia-smi.txt" 2>&1
"$PY" -c "import torch, sys; print('python', sys.version.split()[0]); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(), 'gpu', torch.cuda.get_device_name(0))" > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"
# 1-3: the watchdog under each setting (logs and dumps kept in $OUT/capture), the CUDA paths
NWB_GPU_CAPTURE="$OUT/capture" timeout 300 "$PY" -m pytest tests/gpu -p no:cacheprovider -v -rA --timeout 240 \
  > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; grep -E "passed|failed|PASSED|FAILED|ERROR" "$OUT/pytest.log" | tail -40
# torch's own analyzer, its command line, on the real dumps
for m in aeh3 aeh3_timing; do
  timeout 60 "$PY" -m torch.distributed.flight_recorder.fr_trace "$OUT/capture/$m" -p nccl_trace_rank_ > "$OUT/capture/fr_trace_$m.txt" 2>&1
  echo "fr_trace $m rc=$?"
done
# 4: the seeds' GPU claims
timeout 180 "$PY" bench/gpu_seed_claims.py --json "$OUT/seed_claims.json" > "$OUT/seed_claims.txt" 2>&1
echo "bench rc=$?"; cat "$OUT/seed_claims.txt"
# every scenario variant on 1-rank NCCL (what runs there)
timeout 200 "$PY" tests/gpu/scenarios_on_nccl.py --json "$OUT/scenarios_on_nccl.json" > "$OUT/scenarios_on_nccl.txt" 2>&1
echo "scenarios rc=$?"; tail -45 "$OUT/scenarios_on_nccl.txt"
