"""Throughput of `oidn_gpu.farm` on one machine: frames per minute per worker layout.

The story: a render farm is worth its setup only if it turns cores or GPUs into frames.
This script writes a sequence of noisy HDR frames (color only, ``--size`` px square), then
denoises it with the single-process loop (`sequence.run_sequence`, all cores for BLAS, and
again with one BLAS thread) and with the farm in each ``--layouts`` entry
(``WORKERSxCPUS``: workers of CPUS cores each, or ``WORKERSgpu``: workers of one GPU each)
on one Ray instance started here. Each run writes into a fresh folder; the farm outputs
are compared with the all-core single-process outputs of the same round (max abs diff:
zero with the same BLAS thread count, else float rounding, here one half-float step as
the frames are half EXRs). The layouts run in rounds
(``--repeat``), with the machine's 1-minute load average before and after each run. The
wall clock of a run includes starting its workers (loading the model), not starting Ray.

    python bench/farm_throughput.py --frames 40 --size 256 --backend reference \\
        --layouts 1x1,1x2,2x1 --repeat 2 --json farm.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from oidn_gpu import farm, sequence
from oidn_gpu.image import io

_LAYOUT = re.compile(r"^(\d+)(?:x(\d+)|(gpu))$")


def import_ray_on_this_machine(home: Path) -> Any:
    """Ray for an instance that stays on this machine: loopback addresses, no usage
    statistics, no cloud metadata probing (as in the farm tests' conftest.py)."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read when ray is imported
    os.environ[farm.RAY_USAGE_STATS_ENV] = "0"
    home.mkdir(parents=True)
    (home / "ray_bootstrap_config.yaml").write_text("")
    os.environ["HOME"] = str(home)
    return farm.import_ray()


def write_frames(folder: Path, count: int, size: int, seed: int = 11) -> list[Path]:
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        base = rng.uniform(0.2, 2.0, (1, 1, 3))
        pixels = (base * rng.exponential(0.5, (size, size, 3))).astype(np.float32)
        paths.append(io.write_image_atomic(folder / f"frame_{i:04d}.exr", pixels))
    return paths


def parse_layout(text: str) -> tuple[int, int, bool]:
    match = _LAYOUT.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"bad layout '{text}'; expected e.g. 2x1 or 4gpu")
    workers = int(match.group(1))
    return workers, int(match.group(2) or 1), match.group(3) is not None


def run_layout(
    ray: Any, inputs: list[Path], out: Path, kwargs: dict[str, Any], layout: str
) -> dict[str, Any]:
    workers, cpus, _gpu = parse_layout(layout)
    jobs = [sequence.FrameJob(src, out / src.name) for src in inputs]
    start = time.perf_counter()
    summary = farm.denoise_sequence(
        jobs, kwargs, workers=workers, cpus_per_worker=cpus, quiet=True, show_progress=False
    )
    wall = time.perf_counter() - start
    if summary.count("done") != len(jobs):
        raise SystemExit(f"{layout}: {summary.line(len(jobs))}")
    return {"layout": layout, "wall_s": wall, "workers": summary.workers}


def run_single(
    inputs: list[Path], out: Path, kwargs: dict[str, Any], blas_threads: int | None
) -> dict[str, Any]:
    """The single-process loop, with every core for BLAS (None) or ``blas_threads``."""
    jobs = [sequence.FrameJob(src, out / src.name) for src in inputs]
    start = time.perf_counter()
    with threadpool_limits(limits=blas_threads):
        summary = sequence.run_sequence(jobs, kwargs, sequence.InputOptions(), quiet=True)
    wall = time.perf_counter() - start
    if summary.count("done") != len(jobs):
        raise SystemExit(f"single process: {summary.line(len(jobs))}")
    return {"layout": "single process", "wall_s": wall}


def cpu_model() -> str:
    """The CPU's model name (Linux), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def max_difference(a: Path, b: Path) -> float:
    worst = 0.0
    for path in sorted(a.iterdir()):
        diff = np.abs(io.read_image(path).pixels - io.read_image(b / path.name).pixels)
        worst = max(worst, float(diff.max()))
    return worst


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--size", type=int, default=256, help="frame edge in pixels")
    parser.add_argument("--backend", default="reference")
    parser.add_argument("--quality", default="high")
    parser.add_argument("--layouts", default="1x1,1x2,2x1", help="WORKERSxCPUS or Ngpu, ...")
    parser.add_argument("--repeat", type=int, default=1, help="runs per layout (median)")
    parser.add_argument("--num-cpus", type=int, default=os.cpu_count())
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    layouts = args.layouts.split(",")
    for layout in layouts:
        parse_layout(layout)

    work = Path(tempfile.mkdtemp(prefix="farm-bench-"))
    ray = import_ray_on_this_machine(work / "home")
    kwargs = {"backend": args.backend, "quality": args.quality}
    singles = {"single process": None, "single process, 1 BLAS thread": 1}
    names = [*singles, *layouts]
    rows: dict[str, dict[str, Any]] = {name: {"layout": name, "runs": []} for name in names}
    try:
        inputs = write_frames(work / "in", args.frames, args.size)
        start = time.perf_counter()
        ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
        ray_start_s = time.perf_counter() - start
        # rounds over every layout, so that a change of the machine's load hits them alike
        for r in range(args.repeat):
            for name in names:
                out = work / f"{name.replace(' ', '-')}-{r}"
                load_before = os.getloadavg()[0]
                if name in singles:
                    result = run_single(inputs, out, kwargs, singles[name])
                else:
                    result = run_layout(ray, inputs, out, kwargs, name)
                    rows[name]["workers"] = result["workers"]
                    reference = work / f"single-process-{r}"
                    rows[name]["max_abs_difference"] = max_difference(out, reference)
                rows[name]["runs"].append(
                    {"wall_s": result["wall_s"], "load_1min": [load_before, os.getloadavg()[0]]}
                )
        ray.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"{args.frames} frames of {args.size}x{args.size}, backend {args.backend}, quality "
        f"{args.quality}, {os.cpu_count()} CPUs ({cpu_model()}); Ray started in "
        f"{ray_start_s:.1f} s"
    )
    print("| layout | wall (median) | frames/min | 1-min load during runs | max abs diff |")
    print("| --- | ---: | ---: | --- | ---: |")
    for row in rows.values():
        wall = statistics.median(run["wall_s"] for run in row["runs"])
        row["frames_per_min"] = args.frames * 60.0 / wall
        loads = [f"{a:.1f}-{b:.1f}" for run in row["runs"] for a, b in [run["load_1min"]]]
        diff = row.get("max_abs_difference")
        print(
            f"| {row['layout']} | {wall:.1f} s | {row['frames_per_min']:.1f} | "
            f"{', '.join(loads)} | {'' if diff is None else f'{diff:.1e}'} |"
        )
    if args.json:
        report = {
            "args": vars(args) | {"json": str(args.json)},
            "cpu": cpu_model(),
            "ray_start_s": ray_start_s,
            "rows": list(rows.values()),
        }
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
