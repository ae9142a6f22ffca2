# usage: bash gpu_suite.sh NAME COMMIT PYTEST_ARGS...
name=$1; commit=$2; shift 2
H="# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(python3 -c 'import sys,torch,triton,numpy;print(f"Python {sys.version.split()[0]}, torch {torch.__version__}, Triton {triton.__version__}, numpy {numpy.__version__}")'), $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit; command: PYTHONPATH=. python3 -m pytest -n 14 -q -p no:cacheprovider -m 'exhaustive or not exhaustive' $*"
{ echo "$H"; timeout 560 env PYTHONPATH=. python3 -m pytest -n 14 -q -p no:cacheprovider -m 'exhaustive or not exhaustive' "$@" 2>&1 | grep -v "PytestBenchmarkWarning\|warner(PytestBenchmark"; echo "rc ${PIPESTATUS[0]}"; } > "$OUT/$name.log"
tail -25 "$OUT/$name.log"
