"""Benchmark: the NumPy reference executor on a 1920x1080 color+albedo+normal HDR image.

Story: load ``rt_hdr_alb_nrm`` (base U-Net, 9 input channels), check accuracy
against a float64 `run_graph` on small inputs, then time the network on the
1080p input padded to 1920x1088 (what OIDN runs on an untiled 1080p image) and
report the process's peak RSS. With ``--oidn`` also time Intel OIDN 2.5.1's CPU
device (pyoidn) denoising the same-size image with the same weights (its time
includes input/output processing, which is small).

Usage: ``python bench/reference_1080p.py [--runs 3] [--oidn] [--weights PATH]``
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from pathlib import Path

import numpy as np

from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.graph.reference import run_graph
from oidn_gpu.model.unet import load_model
from oidn_gpu.model.weights import bundled_weights_dir

WIDTH, HEIGHT, PADDED_HEIGHT = 1920, 1080, 1088
DEFAULT_WEIGHTS = bundled_weights_dir() / "rt_hdr_alb_nrm.tza"


def accuracy(model, sizes=((64, 64), (96, 80))) -> None:
    rng = np.random.default_rng(0)
    for height, width in sizes:
        x = rng.random((model.input_channels, height, width), dtype=np.float32)
        expected = run_graph(model.graph, model.convs, x, dtype=np.float64)
        actual = ReferenceExecutor(model).run(x)
        rel_l2 = np.linalg.norm(actual - expected) / np.linalg.norm(expected)
        max_rel = np.max(np.abs(actual - expected)) / np.max(np.abs(expected))
        print(f"accuracy {height}x{width}: rel L2 {rel_l2:.2e}, max err / max|ref| {max_rel:.2e}")


def time_reference(model, runs: int) -> None:
    x = np.random.default_rng(1).random((model.input_channels, PADDED_HEIGHT, WIDTH), np.float32)
    executor = ReferenceExecutor(model)
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        executor.run(x)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    print(
        f"reference {WIDTH}x{PADDED_HEIGHT}: wall {', '.join(f'{t:.2f}' for t in walls)} s "
        f"(median {statistics.median(walls):.2f} s), cpu median {statistics.median(cpus):.2f} s"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    held = executor.resources().byte_size / 2**20
    print(f"peak RSS {peak:.0f} MiB (executor holds {held:.0f} MiB)")


def time_oidn(weights: Path, runs: int) -> None:
    import pyoidn

    rng = np.random.default_rng(2)
    color = (rng.random((HEIGHT, WIDTH, 3)) * 4).astype(np.float32)
    albedo = rng.random((HEIGHT, WIDTH, 3), dtype=np.float32)
    normal = (rng.random((HEIGHT, WIDTH, 3), dtype=np.float32) * 2 - 1).astype(np.float32)
    output = np.zeros_like(color)
    device = pyoidn.Device(pyoidn.OIDN_DEVICE_TYPE_CPU)
    device.commit()
    flt = pyoidn.Filter(device, "RT")
    images = {"color": color, "albedo": albedo, "normal": normal, "output": output}
    for name, image in images.items():
        flt.set_image(name, image, pyoidn.OIDN_FORMAT_FLOAT3)
    flt.set_bool("hdr", True)
    flt.set_int("quality", pyoidn.OIDN_QUALITY_BALANCED)  # rt_hdr_alb_nrm, as the reference
    flt.commit()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        flt.execute()
        times.append(time.perf_counter() - start)
    message = device.get_error()
    if message is not None:
        raise RuntimeError(message)
    flt.release()
    print(
        f"intel oidn 2.5.1 cpu {WIDTH}x{HEIGHT}: {', '.join(f'{t:.2f}' for t in times)} s "
        f"(median {statistics.median(times):.2f} s); weights {weights.name} (built-in)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--oidn", action="store_true", help="also time Intel OIDN (pyoidn)")
    parser.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    args = parser.parse_args()
    model = load_model(args.weights)
    accuracy(model)
    time_reference(model, args.runs)
    if args.oidn:
        time_oidn(args.weights, args.runs)


if __name__ == "__main__":
    main()
