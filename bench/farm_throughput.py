"""Throughput of `oidn_gpu.farm` on one machine: frames per minute per worker layout.

The story: a render farm is worth its setup only if it turns cores or GPUs into frames.
This script writes a sequence of noisy HDR frames (color only, ``--size`` px square or
``WIDTHxHEIGHT``), then denoises it with the single-process loop of ``oidn-gpu denoise``
(`sequence.run_sequence`; for the reference backend with all cores for BLAS, and again
with one BLAS thread) and with the farm in each ``--layouts`` entry on one Ray instance
started here: ``WORKERSxCPUS`` (workers of CPUS cores each), ``WORKERSgpu`` (workers of
one GPU each) or ``WORKERSxSHAREgpu`` (workers of SHARE GPUs each: ``2x0.5gpu`` puts two
workers on one GPU). Each run writes into a fresh folder; the farm outputs are compared
with the single-process outputs of the same round (max abs diff: zero with the same BLAS
thread count, or on a GPU, else float rounding, here one half-float step as the frames
are half EXRs). The layouts run in rounds (``--repeat``), with the machine's 1-minute
load average before and after each run. The wall clock of a run includes starting its
workers (loading the model, compiling GPU kernels), not starting Ray; the steady rate
leaves out each worker's first frame (the frames finished after as many frames as
there are workers, over the time since; for the single process, the frames after the
first over their own times). A run that fails is reported in its row and the others go
on. Each row also gives the median milliseconds of a frame's stages on its worker
(``read``: reading and checking the EXRs, ``denoise``: the denoise calls with their
uploads and copies back, ``write``: writing the outputs; `oidn_gpu.sequence.frame.STAGES`)
over the frames after each worker's first, and on NVIDIA GPUs the GPU busy share: the
mean of ``nvidia-smi``'s ``utilization.gpu`` (the share of time a kernel ran) sampled
every 200 ms during the run, per GPU.

``--distinct`` frames are written and the sequence repeats them under new names (hard
links), so that a long sequence of large frames costs no time to write. With
``--target-seconds``, a warm-up run of the single-process loop over the distinct frames
measures the time per frame and the sequence gets as many frames as the single process
denoises in that time (at least ``--distinct``, at most ``--frames``).

    python bench/farm_throughput.py --frames 40 --size 256 --backend reference \\
        --layouts 1x1,1x2,2x1 --repeat 2 --json farm.json
    python bench/farm_throughput.py --backend cuda --size 1920x1080 --num-gpus 1 \\
        --layouts 1gpu,2x0.5gpu --frames 2000 --target-seconds 45 --json farm-cuda.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from oidn_gpu import DenoiserConfig, FilterOptions, farm, sequence
from oidn_gpu.image import io
from oidn_gpu.sequence.frame import STAGES

_LAYOUT = re.compile(r"^(\d+)(?:x(\d+)|(?:x(\d*\.?\d+))?(gpu))$")
_SIZE = re.compile(r"^(\d+)(?:x(\d+))?$")
# frames compared pixel by pixel with the single process per run (the rest repeat them)
COMPARED_FRAMES = 4


def import_ray_on_this_machine(home: Path) -> Any:
    """Ray for an instance that stays on this machine: loopback addresses, no usage
    statistics, no cloud metadata probing (as in the farm tests' conftest.py)."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read when ray is imported
    os.environ[farm.RAY_USAGE_STATS_ENV] = "0"
    home.mkdir(parents=True)
    (home / "ray_bootstrap_config.yaml").write_text("")
    os.environ["HOME"] = str(home)
    return farm.import_ray()


def write_frames(
    folder: Path, count: int, size: tuple[int, int], seed: int = 11, aux: str = ""
) -> list[Path]:
    """``count`` noisy HDR frames of ``size`` (width, height): color only, or with
    ``aux`` an EXR compression, half-float frames with Cycles-named albedo and normal
    layers in that compression (`exr_codecs.synthetic_frame`)."""
    rng = np.random.default_rng(seed)
    width, height = size
    paths = []
    if aux:
        from exr_codecs import CHANNELS, synthetic_frame, write_half_exr

        folder.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            path = folder / f"frame_{i:04d}.exr"
            write_half_exr(path, synthetic_frame(height, width, seed + i), CHANNELS, aux)
            paths.append(path)
        return paths
    for i in range(count):
        base = rng.uniform(0.2, 2.0, (1, 1, 3))
        pixels = (base * rng.exponential(0.5, (height, width, 3))).astype(np.float32)
        paths.append(io.write_image_atomic(folder / f"frame_{i:04d}.exr", pixels))
    return paths


def sequence_of(distinct: list[Path], folder: Path, count: int) -> list[Path]:
    """``count`` frames ``seq_0000.exr``... repeating ``distinct`` (hard links)."""
    folder.mkdir(parents=True)
    paths = []
    for i in range(count):
        path = folder / f"seq_{i:05d}.exr"
        os.link(distinct[i % len(distinct)], path)
        paths.append(path)
    return paths


def parse_layout(text: str) -> tuple[int, int, float]:
    """``(workers, cpus per worker, gpus per worker)``; no GPU for ``WORKERSxCPUS``."""
    match = _LAYOUT.match(text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"bad layout '{text}'; expected e.g. 2x1 (workers x CPUs), 1gpu or 2x0.5gpu"
        )
    workers = int(match.group(1))
    if match.group(4):
        return workers, 1, float(match.group(3) or 1)
    return workers, int(match.group(2)), 0.0


def parse_size(text: str) -> tuple[int, int]:
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"bad size '{text}'; expected e.g. 256 or 1920x1080")
    width = int(match.group(1))
    return width, int(match.group(2) or width)


def denoiser_config(kwargs: dict[str, Any]) -> DenoiserConfig:
    """The `DenoiserConfig` of the benchmark's options (backend, quality, precision)."""
    options = dict(kwargs)
    return DenoiserConfig.create(FilterOptions(quality=options.pop("quality")), **options)


class GpuBusy:
    """Samples ``nvidia-smi``'s ``utilization.gpu`` of every GPU while it runs (nothing
    where there is no ``nvidia-smi``); `share` is the mean per GPU, 0..1."""

    def __init__(self) -> None:
        self._samples: list[float] = []
        self._gpus = 0
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> GpuBusy:
        exe = shutil.which("nvidia-smi")
        if exe is not None:
            listing = subprocess.run([exe, "-L"], capture_output=True, text=True, check=False)
            self._gpus = sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
            self._process = subprocess.Popen(
                [
                    exe,
                    "--query-gpu=utilization.gpu",
                    "--format=csv,noheader,nounits",
                    "-lms",
                    "200",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:  # one line per GPU per sample, in GPU order
            try:
                self._samples.append(float(line))
            except ValueError:
                continue

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=10)

    def share(self) -> list[float] | None:
        """The mean busy share of each GPU (None without samples)."""
        if self._gpus == 0 or len(self._samples) < self._gpus:
            return None
        whole = len(self._samples) - len(self._samples) % self._gpus
        return [
            statistics.fmean(self._samples[g : whole : self._gpus]) / 100.0
            for g in range(self._gpus)
        ]


def stage_medians(results: list[Any], skip: int) -> dict[str, float]:
    """Median milliseconds of each stage over the frames done after the first ``skip``
    (each worker's first, with its start-up)."""
    done = [r for r in results if r.status == "done" and r.stages]
    done = done[skip:] if len(done) > skip else done
    if not done:
        return {}
    return {stage: statistics.median(r.stages[stage] for r in done) * 1e3 for stage in STAGES}


def run_layout(
    ray: Any, inputs: list[Path], out: Path, kwargs: dict[str, Any], layout: str
) -> dict[str, Any]:
    workers, cpus, gpus = parse_layout(layout)
    jobs = [sequence.FrameJob(src, out / src.name) for src in inputs]
    finished: list[float] = []
    start = time.perf_counter()
    with GpuBusy() as busy:
        summary = farm.denoise_sequence(
            jobs,
            denoiser_config(kwargs),
            sequence.SequenceOptions(quiet=True, show_progress=False),
            farm.FarmOptions(workers=workers, cpus_per_worker=cpus, gpus_per_worker=gpus or 1.0),
            on_frame=lambda result: finished.append(time.perf_counter()),
        )
    wall = time.perf_counter() - start
    if summary.count("done") != len(jobs):
        first = next((r.error for r in summary.results if r.status == "failed"), None)
        raise RuntimeError(f"{layout}: {summary.line(len(jobs))}; first error: {first}")
    # after as many frames as workers (each worker's first, with its start-up)
    skip = len(summary.workers)
    span = finished[-1] - finished[skip - 1] if len(finished) > skip else 0.0
    steady = (len(finished) - skip) * 60.0 / span if span > 0 else None
    return {
        "wall_s": wall,
        "steady_frames_per_min": steady,
        "workers": summary.workers,
        "stages_ms": stage_medians(summary.results, skip),
        "gpu_busy": busy.share(),
    }


def run_single(
    inputs: list[Path], out: Path, kwargs: dict[str, Any], blas_threads: int | None
) -> dict[str, Any]:
    """The single-process loop, with every core for BLAS (None) or ``blas_threads``."""
    jobs = [sequence.FrameJob(src, out / src.name) for src in inputs]
    start = time.perf_counter()
    with threadpool_limits(limits=blas_threads), GpuBusy() as busy:
        summary = sequence.run_sequence(
            jobs, denoiser_config(kwargs), sequence.SequenceOptions(quiet=True)
        )
    wall = time.perf_counter() - start
    if summary.count("done") != len(jobs):
        first = next((r.error for r in summary.results if r.status == "failed"), None)
        raise RuntimeError(f"single process: {summary.line(len(jobs))}; first error: {first}")
    rest = sum(r.elapsed_s for r in summary.results[1:])  # after the first (model load)
    steady = (len(jobs) - 1) * 60.0 / rest if rest > 0 else None
    return {
        "wall_s": wall,
        "steady_frames_per_min": steady,
        "stages_ms": stage_medians(summary.results, 1),
        "gpu_busy": busy.share(),
    }


def cpu_model() -> str:
    """The CPU's model name (Linux), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def max_difference(a: Path, b: Path, names: list[str]) -> float:
    worst = 0.0
    for name in names:
        diff = np.abs(io.read_image(a / name).pixels - io.read_image(b / name).pixels)
        worst = max(worst, float(diff.max()))
    return worst


def calibrate(
    distinct: list[Path], work: Path, kwargs: dict[str, Any], blas: int | None, target_s: float
) -> tuple[float, float]:
    """Seconds per frame of the single process over ``distinct`` (after one warm-up
    frame: model load, kernel compilation, tuning caches), and the frames that take it
    ``target_s`` seconds."""
    run_single(distinct[:1], work / "warmup-0", kwargs, blas)
    result = run_single(distinct, work / "warmup-1", kwargs, blas)
    per_frame = result["wall_s"] / len(distinct)
    return per_frame, target_s / per_frame


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument(
        "--size", type=parse_size, default=(256, 256), help="frame edge, or WIDTHxHEIGHT"
    )
    parser.add_argument("--distinct", type=int, default=0, help="frames written (0: all)")
    parser.add_argument(
        "--target-seconds", type=float, default=0.0, help="size the sequence to this"
    )
    parser.add_argument(
        "--aux",
        default="",
        metavar="COMPRESSION",
        help="half EXRs with albedo and normal layers in this compression (zip, piz, "
        "dwaa, none, ...); default: float color-only frames",
    )
    parser.add_argument("--backend", default="reference")
    parser.add_argument("--quality", default="high")
    parser.add_argument("--precision", help="Denoiser precision (default: the backend's)")
    parser.add_argument(
        "--layouts", default="1x1,1x2,2x1", help="WORKERSxCPUS, Ngpu or NxSHAREgpu, ..."
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per layout (median)")
    parser.add_argument("--num-cpus", type=int, default=os.cpu_count())
    parser.add_argument("--num-gpus", type=int, help="GPUs of the Ray instance (default: found)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    layouts = args.layouts.split(",")
    for layout in layouts:
        parse_layout(layout)

    work = Path(tempfile.mkdtemp(prefix="farm-bench-"))
    ray = import_ray_on_this_machine(work / "home")
    kwargs = {"backend": args.backend, "quality": args.quality}
    if args.precision:
        kwargs["precision"] = args.precision
    singles: dict[str, int | None] = {"single process": None}
    if args.backend == "reference":
        singles["single process, 1 BLAS thread"] = 1
    names = [*singles, *layouts]
    rows: dict[str, dict[str, Any]] = {name: {"layout": name, "runs": []} for name in names}
    report: dict[str, Any] = {"args": vars(args) | {"json": str(args.json)}, "cpu": cpu_model()}
    ray_start_s = float("nan")
    frames = args.frames
    try:
        distinct = write_frames(work / "in", args.distinct or args.frames, args.size, aux=args.aux)
        if args.target_seconds > 0:
            per_frame, fitting = calibrate(distinct, work, kwargs, None, args.target_seconds)
            frames = int(min(args.frames, max(len(distinct), round(fitting))))
            report["single_process_s_per_frame"] = per_frame
            print(f"single process: {per_frame:.3f} s per frame -> {frames} frames")
        inputs = sequence_of(distinct, work / "seq", frames)
        compared = [p.name for p in inputs[:COMPARED_FRAMES]]
        start = time.perf_counter()
        ray.init(
            num_cpus=args.num_cpus,
            num_gpus=args.num_gpus,
            include_dashboard=False,
            log_to_driver=False,
        )
        ray_start_s = time.perf_counter() - start
        report["ray_resources"] = ray.cluster_resources()
        # rounds over every layout, so that a change of the machine's load hits them alike
        for r in range(args.repeat):
            reference = work / f"single-process-{r}"
            for name in names:
                out = work / f"{name.replace(' ', '-').replace(',', '')}-{r}"
                load_before = os.getloadavg()[0]
                try:
                    if name in singles:
                        result = run_single(inputs, out, kwargs, singles[name])
                    else:
                        result = run_layout(ray, inputs, out, kwargs, name)
                        rows[name]["workers"] = result["workers"]
                        if reference.is_dir():
                            diff = max_difference(out, reference, compared)
                            rows[name]["max_abs_difference"] = diff
                except Exception as err:  # one row's failure does not stop the others
                    rows[name].setdefault("errors", []).append(f"{type(err).__name__}: {err}")
                    print(f"{name}: failed\n{traceback.format_exc()}", flush=True)
                    continue
                finally:
                    if out != reference:
                        shutil.rmtree(out, ignore_errors=True)
                rows[name]["runs"].append(
                    {
                        "wall_s": result["wall_s"],
                        "steady_frames_per_min": result["steady_frames_per_min"],
                        "load_1min": [load_before, os.getloadavg()[0]],
                        "stages_ms": result["stages_ms"],
                        "gpu_busy": result["gpu_busy"],
                    }
                )
                print(f"{name}: {frames * 60.0 / result['wall_s']:.1f} frames/min", flush=True)
                save(args.json, report, frames, ray_start_s, rows)  # a killed run keeps it
        ray.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    width, height = args.size
    print(
        f"{frames} frames of {width}x{height}, backend {args.backend}, quality "
        f"{args.quality}, {os.cpu_count()} CPUs ({cpu_model()}); Ray started in "
        f"{ray_start_s:.1f} s"
    )
    print(
        "| layout | wall (median) | frames/min | steady frames/min | 1-min load during runs "
        "| max abs diff | read / denoise / write ms per frame | GPU busy |"
    )
    print("| --- | ---: | ---: | ---: | --- | ---: | --- | --- |")
    save(args.json, report, frames, ray_start_s, rows)
    for row in rows.values():
        if not row["runs"]:
            error = row.get("errors", ["not run"])[0]
            print(f"| {row['layout']} | failed: {error[:80]} | | | | | | |")
            continue
        wall = statistics.median(run["wall_s"] for run in row["runs"])
        loads = [f"{a:.1f}-{b:.1f}" for run in row["runs"] for a, b in [run["load_1min"]]]
        diff = row.get("max_abs_difference")
        steady = row.get("steady_frames_per_min")
        last = row["runs"][-1]
        stages = " / ".join(f"{v:.1f}" for v in last["stages_ms"].values())
        busy = last["gpu_busy"]
        busy_text = "" if busy is None else ", ".join(f"{100 * b:.0f}%" for b in busy)
        print(
            f"| {row['layout']} | {wall:.1f} s | {row['frames_per_min']:.1f} | "
            f"{'' if steady is None else f'{steady:.1f}'} | {', '.join(loads)} | "
            f"{'' if diff is None else f'{diff:.1e}'} | {stages} | {busy_text} |"
        )


def save(
    path: Path | None,
    report: dict[str, Any],
    frames: int,
    ray_start_s: float,
    rows: dict[str, dict[str, Any]],
) -> None:
    """Each row's frames per minute (median wall) into ``rows``, and the report to ``path``."""
    for row in rows.values():
        if row["runs"]:
            wall = statistics.median(run["wall_s"] for run in row["runs"])
            row["frames_per_min"] = frames * 60.0 / wall
            steady = [r["steady_frames_per_min"] for r in row["runs"]]
            if None not in steady:
                row["steady_frames_per_min"] = statistics.median(steady)
    if path is not None:
        report |= {"frames": frames, "ray_start_s": ray_start_s, "rows": list(rows.values())}
        path.write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
