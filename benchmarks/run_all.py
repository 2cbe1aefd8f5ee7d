"""Run every benchmark script (bench_*.py) in turn; results land in benchmarks/results/*.json.

Each script measures its ratios side by side in one run; run this on an otherwise idle machine.
"""
import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
for script in sorted(here.glob("bench_*.py")):
    print(f"== {script.name}", flush=True)
    subprocess.run([sys.executable, str(script)], check=True, cwd=here)
print("== comm", flush=True)
subprocess.run([sys.executable, "-m", "gpututor", "bench", "comm", "--world-size", "2",
                "--json", str(here / "results" / "comm.json")], check=True)
