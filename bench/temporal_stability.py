"""Temporal stability of denoised animation sequences against their converged references.

    python bench/temporal_stability.py tests/data/sequences/static tests/data/sequences/orbit \
        tests/data/sequences/moving --backend reference

A sequence is a folder of frames (``*.exr``: beauty, albedo, normal and a motion pass, found by
the renderers' names: docs/aovs.md) and ``reference/`` holding the converged frame under the
same file name (R, G, B). scripts/render_sequences.py writes such folders.

For each sequence and each method (the noisy input, per-frame denoising with `Denoiser`'s
``denoise_many``, and any method added to `METHODS` or passed to `compare`) it prints the
temporal instability (`oidn_gpu.image.temporal_metric`: flicker the reference does not have,
relative to the reference; 0 is perfectly stable), per-frame relative L2 and PSNR against the
reference (means over frames), and the PSNR on the disoccluded pixels (those the previous
frame did not show: where history cannot help and ghosts would appear).

A method is a function from the sequence's frames (`SequenceFrame`, as `oidn-gpu bench
--temporal` reads them: color, albedo, normal, motion, depth, reference) to the denoised
colours, one H x W x 3 array per frame, in order.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from oidn_gpu.cli import bench_temporal
from oidn_gpu.cli.bench_temporal import SequenceFrame, load_sequence
from oidn_gpu.image import temporal_metric as tm

Method = Callable[[Sequence[SequenceFrame]], list[np.ndarray]]


def disocclusions(frames: Sequence[SequenceFrame]) -> list[np.ndarray | None]:
    """Per frame, the pixels the previous frame did not show (None for the first frame),
    from the motion alone (`bench_temporal.revealed_masks` also compares depths)."""
    masks: list[np.ndarray | None] = [None]
    for previous, frame in itertools.pairwise(frames):
        hidden = tm.disocclusion_mask(
            frame.motion.backward, previous_forward=previous.motion.forward
        )
        masks.append(hidden | frame.motion.invalid)
    return masks


def evaluate(frames: Sequence[SequenceFrame], outputs: Sequence[np.ndarray]) -> tm.SequenceMetrics:
    """The temporal metrics of one method's outputs."""
    # NaN where the pass had no valid vector: warp() then leaves those pixels out.
    motions = [f.vectors for f in frames]
    return tm.sequence_metrics(
        outputs, [f.reference for f in frames], motions, disocclusions(frames)
    )


def noisy_input(frames: Sequence[SequenceFrame]) -> list[np.ndarray]:
    """The noisy colour itself, for scale."""
    return [f.color for f in frames]


def per_frame(backend: str, **options) -> Method:
    """Each frame denoised alone (`Denoiser.denoise_many`, HDR, with albedo and normal)."""
    return lambda frames: bench_temporal.per_frame(frames, backend, options)


@dataclass(frozen=True)
class Row:
    sequence: str
    method: str
    frames: int
    instability: float
    relative_l2: float
    psnr_db: float
    disoccluded_psnr_db: float
    disoccluded_pixels: int
    seconds: float


def compare(
    directory: str | Path, methods: dict[str, Method], motion_layer: str | None = None
) -> list[Row]:
    """Every method's metrics on one sequence."""
    frames = load_sequence(directory, motion_layer)
    rows = []
    for name, method in methods.items():
        started = time.perf_counter()
        outputs = method(frames)
        seconds = time.perf_counter() - started
        metrics = evaluate(frames, outputs)
        rows.append(
            Row(
                sequence=Path(directory).name,
                method=name,
                frames=len(frames),
                instability=metrics.instability,
                relative_l2=metrics.mean_relative_l2,
                psnr_db=metrics.mean_psnr_db,
                disoccluded_psnr_db=metrics.disoccluded_psnr_db,
                disoccluded_pixels=sum(metrics.disoccluded_pixels),
                seconds=seconds,
            )
        )
    return rows


def format_rows(rows: Sequence[Row]) -> str:
    header = (
        f"{'sequence':<10} {'method':<22} {'instability':>11} {'rel. L2':>8} "
        f"{'PSNR dB':>8} {'disocc. PSNR':>12} {'disocc. px':>10} {'time s':>7}"
    )
    lines = [header]
    for r in rows:
        dis = "-" if math.isnan(r.disoccluded_psnr_db) else f"{r.disoccluded_psnr_db:.2f}"
        lines.append(
            f"{r.sequence:<10} {r.method:<22} {r.instability:>11.4f} {r.relative_l2:>8.4f} "
            f"{r.psnr_db:>8.2f} {dis:>12} {r.disoccluded_pixels:>10} {r.seconds:>7.2f}"
        )
    return "\n".join(lines)


# The methods main() runs, by name; a temporal mode adds itself here (or is passed to compare).
METHODS: dict[str, Callable[[argparse.Namespace], Method]] = {
    "noisy input": lambda args: noisy_input,
    "per-frame": lambda args: per_frame(args.backend, **_backend_options(args)),
}


def _backend_options(args: argparse.Namespace) -> dict:
    return {"precision": args.precision} if args.precision else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sequences", nargs="+", type=Path, help="sequence folders")
    parser.add_argument("--backend", default="reference")
    parser.add_argument("--precision", default=None, help="the backend's precision option")
    parser.add_argument(
        "--methods", default=",".join(METHODS), help="comma-separated, of: " + ", ".join(METHODS)
    )
    parser.add_argument("--motion-layer", default=None)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        parser.error(f"unknown method {unknown[0]!r}; expected one of {', '.join(METHODS)}")
    methods = {name: METHODS[name](args) for name in names}
    rows = [row for seq in args.sequences for row in compare(seq, methods, args.motion_layer)]
    if args.json:
        json.dump([asdict(r) for r in rows], sys.stdout, indent=2)
        print()
    else:
        print(format_rows(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
