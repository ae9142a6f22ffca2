#!/usr/bin/env bash
# On a GPU: an unmasked store and a mask built from the row's offsets, checked as a learner
# checks them (compiled): the store twice (the second with a warm process, if one started) and
# with --map, the mask once. Usage: OUT=DIR bash lab/probes/check_gpu_walk.sh
set -u
export PYTHONPATH=.
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python -c "import torch, triton, sys, numpy; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)"; } | tee "$OUT/versions.txt"
mkdir -p /tmp/u1 /tmp/u2
python - <<'PY'
from tests.helpers import solution_text
code = solution_text("elementwise").replace("tl.store(out_ptr + offsets, out, mask=mask)", "tl.store(out_ptr + offsets, out)")
open("/tmp/u1/elementwise.py", "w").write(code)
code = solution_text("softmax")
code = code.replace("    offsets = tl.arange(0, BLOCK)\n    mask = offsets < n_cols\n", "    cols = tl.arange(0, BLOCK)\n    offsets = row * input_row_stride + cols\n    mask = offsets < n_cols\n")
code = code.replace("tl.load(input_ptr + row * input_row_stride + offsets,", "tl.load(input_ptr + offsets,")
code = code.replace("tl.store(output_ptr + row * output_row_stride + offsets,", "tl.store(output_ptr + row * output_row_stride + cols,")
open("/tmp/u2/softmax.py", "w").write(code)
PY
for i in 1 2; do
  COLUMNS=80 timeout 150 python -m learning.check elementwise --part triton --root /tmp/u1 > "$OUT/unmasked-store-$i.txt" 2>&1; echo "unmasked store run $i exit $?"
  grep -A6 "likely cause" "$OUT/unmasked-store-$i.txt" | head -8
done
COLUMNS=80 timeout 150 python -m learning.check elementwise --part triton --root /tmp/u1 --map "n = 10" > "$OUT/unmasked-store-map.txt" 2>&1; echo "with --map exit $?"
grep -A6 "likely cause" "$OUT/unmasked-store-map.txt" | head -8
COLUMNS=80 timeout 150 python -m learning.check softmax --part triton --root /tmp/u2 > "$OUT/row-mask.txt" 2>&1; echo "row mask exit $?"
grep -B2 -A8 "likely cause" "$OUT/row-mask.txt" | head -16
