#!/usr/bin/env bash
# 1000 cubed on a GPU: matmul_counters_probe.py's timings, then the same kernels under Nsight
# Compute (counters as CSV). Run from the repository root with OUT set to a folder:
#     OUT=/tmp/out COMMIT=abc1234 bash lab/probes/matmul_counters_probe.sh
set -u
out=${OUT:-.}
header="# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(python3 -c 'import sys,torch,triton;print(f"Python {sys.version.split()[0]}, torch {torch.__version__}, Triton {triton.__version__}")'), $(date -u '+%Y-%m-%d %H:%M UTC'), commit ${COMMIT:-unknown}"
# Ask only for the counters this Nsight Compute knows (an unknown name stops the whole run).
known=$(ncu --query-metrics 2>/dev/null | awk '{print $1}')
metrics=""
for m in gpu__time_duration.sum dram__bytes_read.sum dram__bytes_write.sum \
         lts__t_sectors_op_read.sum lts__t_requests_op_read.sum \
         lts__t_sectors_srcunit_tex_op_read.sum lts__t_requests_srcunit_tex_op_read.sum \
         lts__throughput.avg.pct_of_peak_sustained_elapsed \
         dram__throughput.avg.pct_of_peak_sustained_elapsed \
         sm__throughput.avg.pct_of_peak_sustained_elapsed \
         sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
         launch__grid_size launch__block_size launch__registers_per_thread \
         launch__cluster_dim_x launch__cluster_dim_y launch__shared_mem_per_block_dynamic; do
  if echo "$known" | grep -qx "${m%%.*}"; then metrics="$metrics,$m"; fi
done
metrics=${metrics#,}
{ echo "$header"; echo "# counters asked for: $metrics"
  timeout 240 ncu --clock-control none --profile-from-start off --csv --metrics "$metrics" \
    python3 lab/probes/matmul_counters_probe.py profile; echo "rc $?"; } > "$out/matmul_counters_ncu.csv" 2>&1
{ echo "$header"; echo "# command: python3 lab/probes/matmul_counters_probe.py time --rounds 5"
  timeout 200 python3 lab/probes/matmul_counters_probe.py time --rounds 5 --json "$out/matmul_counters.json"
  echo "rc $?"; } > "$out/matmul_counters.txt" 2>&1
tail -30 "$out/matmul_counters.txt"
grep -c '"' "$out/matmul_counters_ncu.csv"; grep -E '^(profiled|rc|==ERR|==WARN)' "$out/matmul_counters_ncu.csv" | head -30
