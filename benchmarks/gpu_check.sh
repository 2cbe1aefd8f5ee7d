#!/usr/bin/env bash
# Check a GPU machine in at most 5 minutes (see benchmarks/gpu_check.py for what is checked).
#   benchmarks/gpu_check.sh [OUT_DIR] [more gpu_check.py options]
# Writes OUT_DIR/gpu_check.json and gpu_check.md (default benchmarks/results/gpu_check).
# Needs a CUDA build of torch in .venv (make TORCH=torch install) or in $PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
OUT="${1:-benchmarks/results/gpu_check}"
shift || true
# The script keeps to a 280 s budget itself; this is the hard stop at 5 minutes.
exec timeout --signal=TERM --kill-after=15 300 "$PYTHON" benchmarks/gpu_check.py --out "$OUT" "$@"
