"""GPU time of the wgpu backend's autoexposure passes alone, per kernel variant.

For each image size: a random HDR float32 RGB image on the GPU; the bins pass with 0, 3, 4
and 2 (the default, last: the scale passes read its bins) tree levels per invocation in
registers; then the scale pass of each variant ("stack", then "levels" with 3, 4 (the
default) and 5 tree levels per invocation in registers). Each pass is timed with timestamps
around an encoder holding ``--reps`` copies of its dispatch (GPU ms per dispatch, median over
``--runs`` encoders); each variant's bins and ``frame`` (the scale and 1 / scale) are read
back and compared with the first variant's bit for bit ("same").

    python3 bench/autoexposure_passes.py --sizes 1080p 4k --runs 20 --reps 10
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from oidn_gpu.backends.wgpu.bench import CommandTimer, open_timed_device
from oidn_gpu.backends.wgpu.pipeline_cache import PipelineCache
from oidn_gpu.image import autoexposure as ae
from oidn_gpu.kernels import autoexposure as gae

SIZES = {"1080p": (1080, 1920), "4k": (2160, 3840), "64": (64, 64)}
STORAGE = 0x80 | 0x4 | 0x8  # STORAGE | COPY_SRC | COPY_DST (wgpu BufferUsage bits)
UNIFORM = 0x40
BINS_REGISTER_LEVELS = [0, 3, 4, 2]  # the bins pass: 0 first (one pixel per invocation)
VARIANTS = [("stack", 4), ("levels", 3), ("levels", 4), ("levels", 5)]


def time_pass(device, timer, pipeline, group, grid, runs: int, reps: int) -> float:
    """Median GPU ms of one dispatch over ``runs`` encoders of ``reps`` dispatches."""
    for _ in range(2):  # warm-up
        encoder = device.create_command_encoder("bench/ae/warmup")
        encoder.dispatch(pipeline, group, grid)
        device.submit([encoder.finish()])
    device.wait_idle()
    with timer:
        for _ in range(runs):
            encoder = device.create_command_encoder("bench/ae")
            for _ in range(reps):
                encoder.dispatch(pipeline, group, grid)
            device.submit([encoder.finish()])
    elapsed = timer.elapsed_ms()
    return statistics.median(elapsed) / reps if elapsed else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["1080p", "4k"], choices=sorted(SIZES))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    device = open_timed_device()
    timer = CommandTimer(device)
    if not timer.enabled:
        print("note: no timestamp-query on this device; GPU times are n/a")
    cache = PipelineCache(device)
    print(f"device: {device}")
    rng = np.random.default_rng(0)
    mismatches = 0
    for size in args.sizes:
        height, width = SIZES[size]
        bins_h, bins_w = gae.bin_grid(height, width)
        color = (10.0 ** rng.uniform(-3, 3, (height, width, 3))).astype(np.float32)
        color_buf = device.create_buffer_with_data("bench/ae/color", color.reshape(-1), STORAGE)
        bins_buf = device.create_buffer("bench/ae/bins", 4 * bins_h * bins_w, STORAGE)
        frame_buf = device.create_buffer("bench/ae/frame", 16, STORAGE)
        bins_ref = None
        for register_levels in BINS_REGISTER_LEVELS:
            bins_kernel = gae.generate_bins(gae.AutoexposureSpec("float32"), register_levels)
            bins_params = bins_kernel.pack_params(
                color_offset=0,
                color_pixel_stride=3,
                color_row_stride=3 * width,
                color_channels=3,
                height=height,
                width=width,
                bins_h=bins_h,
                bins_w=bins_w,
            )
            bins_pipeline = cache.get(bins_kernel)
            params_buf = device.create_buffer_with_data(
                "bench/ae/bins/params", bins_params, UNIFORM
            )
            bins_group = device.create_bind_group(
                "bench/ae/bins", bins_pipeline, [color_buf, bins_buf, params_buf]
            )
            grid = bins_kernel.grid(0, bins_h, bins_w)
            bins_ms = time_pass(
                device, timer, bins_pipeline, bins_group, grid, args.runs, args.reps
            )
            bins_now = device.read_buffer(bins_buf)
            bins_ref = bins_now if bins_ref is None else bins_ref
            same = "same" if bins_now == bins_ref else "DIFFERENT"
            mismatches += bins_now != bins_ref
            print(
                f"{size} {width}x{height} ({bins_h}x{bins_w} bins): bins pass "
                f"{bins_kernel.key:34s} {bins_ms:.4f} ms ({same})"
            )
        first = None
        for variant, thread_levels in VARIANTS:
            kernel = gae.generate_scale(variant, thread_levels)
            pipeline = cache.get(kernel)
            params = kernel.pack_params(bins_h=bins_h, bins_w=bins_w)
            group = device.create_bind_group(
                "bench/ae/scale",
                pipeline,
                [
                    bins_buf,
                    frame_buf,
                    device.create_buffer_with_data("bench/ae/scale/params", params, UNIFORM),
                ],
            )
            ms = time_pass(device, timer, pipeline, group, (1, 1, 1), args.runs, args.reps)
            frame = device.read_buffer(frame_buf, 0, 8)
            first = frame if first is None else first
            same = "same" if frame == first else "DIFFERENT"
            mismatches += frame != first
            scale = np.frombuffer(frame, np.float32)
            print(f"  scale {kernel.key:34s} {ms:.4f} ms  s={scale[0]:.9g} ({same})")
        bins = np.frombuffer(device.read_buffer(bins_buf), np.float32)
        # the host autoexposure takes about a second at 4K: compared at 1080p only
        host = f"{ae.autoexposure(color):.9g}" if size != "4k" else "not computed at 4K"
        print(f"  host scale {host} (bins mean {bins.mean():.6g})")
    device.close()
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
