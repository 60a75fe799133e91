"""Recorded fp16 denoise programs per accumulation, replayed, beside the live wgpu backend.

For each fp16 sum a whole HDR denoise (one tile, color + albedo + normal) is recorded for
this machine's adapter (`record_denoise(..., accumulation=)`) and replayed by `Replayer`
on GPU buffers; the live `GpuDenoiser` runs the same submissions (`record.api.
submit_denoise`) on the same buffers, with the recorder's GEMM options and that sum, and
with the device's default options (the large-GPU ones on a discrete GPU). Every variant
takes a fixed input scale (no autoexposure: a program's host computes it) and the variants
take turns run by run, so each sees the same machine state:

    python bench/program_replay.py --runs 30 [--size 1920x1080] [--weights rt_hdr_alb_nrm]

Prints one JSON line per variant: the median and p95 GPU time (timestamps around the
denoise's submissions; null without ``timestamp-query``) and wall time (ms, submit to
queue idle), and the programs whose image it equals bit for bit. Replays compile
trusted, as the live kernels (``Replayer(trusted=True)``: programs made here).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np

ACCUMULATIONS = ("f32", "f16-chains", "f16-partials")
SCALE = 1.0  # the input scale of every run (a program's frame buffer; the live plan's)


class Stamps:
    """GPU time between two timestamp passes submitted around each run (queue order)."""

    def __init__(self, gpu: Any, runs: int) -> None:
        self.gpu = gpu
        self.enabled = gpu.capabilities.has_timestamps
        self.count = 0
        self.query = gpu.create_query_set("bench/replay/stamps", 2 * runs) if self.enabled else None

    def stamp(self) -> None:
        from oidn_gpu.backends.gpu_device import PassTimestamps

        if self.enabled:
            encoder = self.gpu.create_command_encoder("bench/replay/stamp")
            encoder.write_timestamps(PassTimestamps(self.query, begin_index=self.count))
            self.gpu.submit([encoder.finish()])
            self.count += 1

    def elapsed_ms(self) -> list[float]:
        from oidn_gpu.backends.gpu_device import BufferUsage

        if not self.enabled or not self.count:
            return []
        size = self.count * 8
        resolve = self.gpu.create_buffer(
            "bench/replay/resolve", size, BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC
        )
        encoder = self.gpu.create_command_encoder("bench/replay/resolve")
        encoder.resolve_timestamps(self.query, self.count, resolve)
        self.gpu.submit([encoder.finish()])
        ticks = np.frombuffer(self.gpu.read_buffer(resolve, 0, size), np.uint64).astype(np.int64)
        period = self.gpu.timestamp_period_ns
        return [
            max(0, int(ticks[i + 1] - ticks[i])) * period / 1e6 for i in range(0, len(ticks), 2)
        ]


def _live(gpu: Any, model: Any, accumulation: str | None, recorder_options: bool) -> Any:
    from oidn_gpu.backends.wgpu.executor import WgpuExecutor
    from oidn_gpu.backends.wgpu.runner import GpuDenoiser
    from oidn_gpu.kernels.gemm import GemmOptions

    gemm = GemmOptions() if recorder_options else None
    executor = WgpuExecutor(
        model, device=gpu, precision="fp16", gemm=gemm, accumulation=accumulation
    )
    return GpuDenoiser(executor)


def _variants(gpu: Any, tza: bytes, config: bytes, inputs: list[Any], output: Any) -> dict:
    """name -> (run: submits one denoise into ``output``, closer)."""
    from oidn_gpu.model.unet import load_model
    from oidn_gpu.record import parse_config
    from oidn_gpu.record.api import denoise_setup, record_denoise, submit_denoise
    from oidn_gpu.record.replay import Replayer

    cfg = parse_config(config, denoise=True)
    model = load_model(tza)
    setup = denoise_setup(model, cfg)
    w, h = cfg.width, cfg.height
    out: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {}

    def live(name: str, accumulation: str | None, recorder_options: bool) -> None:
        denoiser = _live(gpu, model, accumulation, recorder_options)
        out[name] = (
            lambda: submit_denoise(denoiser, inputs, output, w, h, setup),
            lambda: (denoiser.close(), denoiser.executor.close()),
        )

    for accumulation in ACCUMULATIONS:
        data = record_denoise(tza, config, accumulation=accumulation)
        replayer = Replayer(data, gpu, trusted=True, deadline_s=None)
        out[f"program {accumulation}"] = (
            lambda r=replayer: r.run(inputs, output, input_scale=SCALE),
            replayer.close,
        )
        live(f"live {accumulation} (recorder's options)", accumulation, True)
    live("live device default", None, False)
    return out


def main() -> None:
    from oidn_gpu.backends.wgpu.device import STORAGE_USAGE, open_device
    from oidn_gpu.model.weights import weights_path
    from oidn_gpu.record import make_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--weights", default="rt_hdr_alb_nrm")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    gpu = open_device()
    tza = weights_path(args.weights).read_bytes()
    config = make_config(
        width, height, precision="fp16", device=gpu, denoise=True, hdr=True, input_scale=SCALE
    )
    rng = np.random.default_rng(20261205)
    images = [rng.random((height, width, 4), np.float32) * np.float32(4.0)]
    images += [rng.random((height, width, 4), np.float32) for _ in range(2)]
    inputs = [gpu.create_buffer_with_data("bench/replay/in", x, STORAGE_USAGE) for x in images]
    output = gpu.create_buffer("bench/replay/out", height * width * 16, STORAGE_USAGE)
    variants = _variants(gpu, tza, config, inputs, output)
    stamps = {name: Stamps(gpu, args.runs) for name in variants}
    walls: dict[str, list[float]] = {name: [] for name in variants}
    images_out: dict[str, bytes] = {}
    import time

    for run in range(args.warmup + args.runs):
        for name, (submit, _) in variants.items():
            timed = run >= args.warmup
            if timed:
                stamps[name].stamp()
            start = time.perf_counter()
            submit()
            if timed:
                stamps[name].stamp()
            gpu.wait_idle()
            if timed:
                walls[name].append((time.perf_counter() - start) * 1e3)
            if run == 0:
                images_out[name] = bytes(gpu.read_buffer(output))
    device = gpu.capabilities.adapter.device
    for name in variants:
        gpu_ms = stamps[name].elapsed_ms()
        same = [
            p for p in variants if p.startswith("program ") and images_out[p] == images_out[name]
        ]
        print(
            json.dumps(
                {
                    "variant": name,
                    "device": device,
                    "size": f"{width}x{height}",
                    "runs": args.runs,
                    "gpu_median_ms": statistics.median(gpu_ms) if gpu_ms else None,
                    "gpu_p95_ms": float(np.percentile(gpu_ms, 95)) if gpu_ms else None,
                    "wall_median_ms": statistics.median(walls[name]),
                    "wall_p95_ms": float(np.percentile(walls[name], 95)),
                    "same_image_as": same,
                }
            ),
            flush=True,
        )
    for _, close in variants.values():
        close()


if __name__ == "__main__":
    main()
