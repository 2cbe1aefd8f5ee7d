#!/usr/bin/env bash
# Check a GPU machine (one GPU is enough) in at most 9 minutes: benchmarks/gpu_check.py (5 minutes
# at most; its report says for each section what passing means), then the GPU-marked tests (4
# minutes at most: every strategy on 1, 2, 4 and 8 GPUs, as many as this machine has).
# Smoke test without a GPU: python benchmarks/gpu_check.py --device cpu --quick --no-lessons
#   benchmarks/gpu_check.sh [OUT_DIR] [more gpu_check.py options]
# Writes OUT_DIR/gpu_check.json, gpu_check.md and gpu_tests.txt (default benchmarks/results/gpu_check).
# Needs a CUDA build of torch in .venv (make TORCH=torch install) or in $PYTHON.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
OUT="${1:-benchmarks/results/gpu_check}"
shift || true
mkdir -p "$OUT"
# The script keeps to a 280 s budget itself; this is the hard stop at 5 minutes.
timeout --signal=TERM --kill-after=15 300 "$PYTHON" benchmarks/gpu_check.py --out "$OUT" "$@"
check=$?
timeout --signal=TERM --kill-after=15 240 "$PYTHON" -m pytest -q -rs -m gpu -p no:cacheprovider \
  tests/test_gpu.py tests/precision/test_precision.py 2>&1 | tee "$OUT/gpu_tests.txt"
tests=${PIPESTATUS[0]}
echo "gpu_check.py exit $check, GPU tests exit $tests (reports in $OUT)"
[ "$check" -eq 0 ] && [ "$tests" -eq 0 ]
