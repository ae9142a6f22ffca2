#!/usr/bin/env bash
# Issue 36's measurement of the reference matmul on one GPU, in under 9 minutes: the matmul
# GPU tests, four probes, then the bench over the products, its table printed last.
#
#     OUT=/some/folder bash lab/probes/matmul_gpu_run.sh
#
# Everything goes under $OUT: pytest-gpu-matmul.log, matmul_host_probe.{json,txt},
# matmul_edges.{json,txt}, matmul_stream_floor.{json,txt}, matmul_stride.{json,txt},
# bench-matmul.log and matmul.json (the bench's every measurement).
# Each step has a time limit (their sum is 540 s; on an H200 the whole run takes about five
# minutes), and a step that fails or runs out says so and lets the next one run.
set -u
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}.  # a Triton put first stays first
SIZES=4096,8192,2048,4096x4096x512,4097,1024,1000,8x4096x4096

step() {  # step SECONDS LOG COMMAND...: run it with a limit, say how it ended
    local limit=$1 log=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" > "$log" 2>&1
    local status=$?
    echo "## $* -> exit $status after $((SECONDS - start)) s (limit $limit s)" | tee -a "$log"
}

{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} 2>&1 | tee "$OUT/versions.txt"

step 200 "$OUT/pytest-gpu-matmul.log" \
    python -m pytest -n 8 -q tests/test_matmul.py tests/test_device_figures.py
tail -n 25 "$OUT/pytest-gpu-matmul.log"

step 60 "$OUT/matmul_host_probe.txt" \
    python lab/probes/matmul_host_probe.py --json "$OUT/matmul_host_probe.json"
step 40 "$OUT/matmul_edges.txt" \
    python lab/probes/matmul_edges_probe.py --rounds 2 --json "$OUT/matmul_edges.json"
step 40 "$OUT/matmul_stream_floor.txt" \
    python lab/probes/matmul_stream_floor_probe.py --json "$OUT/matmul_stream_floor.json"
step 60 "$OUT/matmul_stride.txt" \
    python lab/probes/matmul_stride_probe.py --rounds 3 --json "$OUT/matmul_stride.json"
step 140 "$OUT/bench-matmul.log" \
    python -m learning.bench matmul --sizes "$SIZES" --dtypes fp16,bf16 --rounds 5 \
    --no-configs --budget-s 130 --json "$OUT/matmul.json"

echo
echo "== host time per call, piece by piece (lab/probes/matmul_host_probe.py)"
tail -n 34 "$OUT/matmul_host_probe.txt"
echo
echo "== off-tile remedies, device time (lab/probes/matmul_edges_probe.py)"
tail -n 20 "$OUT/matmul_edges.txt"
echo
echo "== reading the decoding step's B, and nothing else (lab/probes/matmul_stream_floor_probe.py)"
tail -n 10 "$OUT/matmul_stream_floor.txt"
echo
echo "== 1000 cubed with rows 1000, 1008 and 1024 elements apart (lab/probes/matmul_stride_probe.py)"
tail -n 29 "$OUT/matmul_stride.txt"
echo
echo "== tests: $(grep -E '(passed|failed)' "$OUT/pytest-gpu-matmul.log" | tail -n 1)"
echo "== bench (python -m learning.bench matmul, 5 rounds)"
tail -n 22 "$OUT/bench-matmul.log"
