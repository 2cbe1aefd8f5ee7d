"""Run every benchmark in turn; results land in benchmarks/results/*.json."""
import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
for script in ("bench_throughput.py", "bench_kernel.py", "bench_data_parallel.py"):
    print(f"== {script}", flush=True)
    subprocess.run([sys.executable, str(here / script)], check=True, cwd=here)
print("== comm", flush=True)
subprocess.run([sys.executable, "-m", "gpututor", "bench", "comm", "--world-size", "2",
                "--json", str(here / "results" / "comm.json")], check=True)
