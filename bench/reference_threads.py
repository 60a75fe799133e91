"""Reference backend network time per thread count.

Story: how many threads the reference backend should use by default
(`oidn_gpu.backends.reference.default_threads`). One executor per thread count
(``ReferenceExecutor(model, threads=n)``) runs the rt_hdr_alb_nrm network on a
random input after a warm-up run; the median of ``--runs`` is printed with the
load average, since other processes on the cores change the answer.

    python bench/reference_threads.py --size 256 --threads 1 2 4
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from oidn_gpu.backends.reference import ReferenceExecutor, default_threads
from oidn_gpu.model import weights as builtin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="square image edge (px)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    model = builtin.load_builtin("rt_hdr_alb_nrm")
    edge = -(-args.size // 16) * 16
    x = np.random.default_rng(0).random((9, edge, edge), np.float32)
    print(f"default threads here: {default_threads()}")
    for threads in args.threads:
        with ReferenceExecutor(model, threads=threads) as executor:
            executor.run(x)
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                executor.run(x)
                times.append(time.perf_counter() - start)
        print(
            f"{edge}x{edge} threads={threads}: {statistics.median(times):.3f} s "
            f"(load average {os.getloadavg()[0]:.2f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
