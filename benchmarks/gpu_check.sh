#!/usr/bin/env bash
# Check a GPU machine (one GPU is enough) in at most 9 minutes: benchmarks/gpu_check.py (5 minutes
# at most; one JSON line per section, on disk as each ends), then the GPU-marked tests (4 minutes
# at most, where pytest is installed: every strategy on 1, 2, 4 and 8 GPUs, as many as there are).
# Smoke test without a GPU: PYTHONPATH=$PWD python3 benchmarks/gpu_check.py --device cpu --quick
#   benchmarks/gpu_check.sh [OUT_DIR] [more gpu_check.py options]
# Writes OUT_DIR/gpu_check.jsonl, gpu_check.md and gpu_tests.txt (default benchmarks/results/gpu_check).
# Needs only a CUDA build of torch, in .venv (make TORCH=torch install), $PYTHON or python3: a
# section that needs a package this Python lacks is reported as not run (gpu_check.py's docstring).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT="${1:-benchmarks/results/gpu_check}"
shift || true
mkdir -p "$OUT"
# The script keeps to a 280 s budget itself; this is the hard stop at 5 minutes (its SIGTERM
# handler writes what is left and ends every process it started).
timeout --signal=TERM --kill-after=15 300 "$PYTHON" benchmarks/gpu_check.py --out "$OUT" "$@"
check=$?
if "$PYTHON" -c "import pytest" 2>/dev/null; then
  timeout --signal=TERM --kill-after=15 240 "$PYTHON" -m pytest -q -rs -m gpu -p no:cacheprovider \
    tests/test_gpu.py tests/precision/test_precision.py 2>&1 | tee "$OUT/gpu_tests.txt"
  tests=${PIPESTATUS[0]}
else
  echo "GPU tests not run: no pytest in $PYTHON" | tee "$OUT/gpu_tests.txt"
  tests=3
fi
echo "gpu_check.py exit $check (3: some sections not run), GPU tests exit $tests (reports in $OUT)"
[ "$check" -eq 0 ] && [ "$tests" -eq 0 ]
