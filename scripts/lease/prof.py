"""Per-kernel CUDA time of bench_upstream cases under torch.profiler, on the device machine.

    source ~/tl-env.sh && python3 scripts/lease/prof.py CASE[,CASE]   # ours
    PYTHONPATH=~/up-site python3 scripts/lease/prof.py CASE            # upstream's wheel

Runs the cases (5 ms warm-up, 20 ms of repetitions) and prints, for the kernels that are neither
torch's nor cuBLAS's (the TileLang ones, by name), their launch count and mean time. Run one case
at a time: kernels of the same name in two cases are averaged together."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from torch.profiler import ProfilerActivity, profile  # noqa: E402

import bench_upstream  # noqa: E402


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        rc = bench_upstream.main(["--examples", str(ROOT / ".gpu/conformance/upstream/examples"), "--names",
                                  sys.argv[1], "--warmup", "5", "--rep", "20"])
    ours = [e for e in sorted(p.key_averages(), key=lambda e: -e.device_time_total)
            if not e.key.startswith("void ") and "xmma" not in e.key and "gemm" not in e.key]
    for e in ours[:12]:
        print(f"{e.count:6d} {e.device_time_total / max(e.count, 1):10.1f} us  {e.key[:110]}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
