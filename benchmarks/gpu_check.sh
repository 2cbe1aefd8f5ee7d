#!/usr/bin/env bash
# Check a GPU machine (one GPU is enough) in at most 9 minutes: benchmarks/gpu_check.py, one JSON
# line per section on disk as each ends (its sections include the GPU-marked tests, gpu_tests).
# Smoke test without a GPU: PYTHONPATH=$PWD python3 benchmarks/gpu_check.py --device cpu --quick
#   benchmarks/gpu_check.sh [OUT_DIR] [more gpu_check.py options]
# Writes OUT_DIR/gpu_check.jsonl and gpu_check.md (default benchmarks/results/gpu_check).
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
# The script keeps to its budget (--budget-s, 500 s by default) itself; this is the hard stop at 9
# minutes (its SIGTERM handler writes what is left and ends every process it started).
timeout --signal=TERM --kill-after=15 540 "$PYTHON" benchmarks/gpu_check.py --out "$OUT" "$@"
