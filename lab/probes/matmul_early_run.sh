#!/usr/bin/env bash
# The early launch measured on one GPU in one call: the probe that times each product with
# and without it, the bench over issue 36's products (the figures lab/RESULTS.md reads), how
# the choice's timing of the early products' rows agrees with the bench's, and the GPU tests
# of the early launch.
#
#     OUT=/some/folder bash lab/probes/matmul_early_run.sh
set -u
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}.  # a Triton put first stays first
SIZES=4096,8192,2048,4096x4096x512,4097,1024,1000,8x4096x4096
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} 2>&1 | tee "$OUT/versions.txt"
start=$SECONDS
timeout 250 python lab/probes/matmul_early_probe.py --json "$OUT/matmul_early.json" \
    > "$OUT/matmul_early.txt" 2>&1
echo "## early probe: exit $? after $((SECONDS - start)) s" | tee -a "$OUT/matmul_early.txt"
start=$SECONDS
timeout 280 python -m learning.bench matmul --sizes "$SIZES" --dtypes fp16,bf16 --rounds 5 \
    --no-configs --budget-s 250 --json "$OUT/matmul.json" > "$OUT/bench-matmul.log" 2>&1
echo "## bench: exit $? after $((SECONDS - start)) s" | tee -a "$OUT/bench-matmul.log"
tail -n 40 "$OUT/bench-matmul.log"
tail -n 30 "$OUT/matmul_early.txt"
start=$SECONDS
timeout 200 python lab/probes/matmul_choice_probe.py --sizes 8x4096x4096,1000,1024 \
    --json "$OUT/matmul_choice_early.json" > "$OUT/matmul_choice_early.txt" 2>&1
echo "## choice probe: exit $? after $((SECONDS - start)) s" | tee -a "$OUT/matmul_choice_early.txt"
tail -n 24 "$OUT/matmul_choice_early.txt"
start=$SECONDS
timeout 150 python -m pytest -q tests/test_matmul.py -k "launched_early or every_skinny_row or early_product_is_chosen" \
    > "$OUT/pytest-gpu-matmul-early-chain.log" 2>&1
echo "## early-chain tests: exit $? after $((SECONDS - start)) s; $(tail -n 1 "$OUT/pytest-gpu-matmul-early-chain.log")"
