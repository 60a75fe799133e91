"""Temporal mode against per-frame denoising on animation sequences (docs/benchmarks.md).

    python bench/temporal_mode.py tests/data/sequences/static tests/data/sequences/orbit \
        tests/data/sequences/moving --backend reference

The sequences and the metric are `bench/temporal_stability.py`'s (instability: flicker the
reference does not have, relative to it; PSNR per frame; PSNR of the disoccluded pixels).
The temporal method is `oidn_gpu.TemporalDenoiser` with its default parameters,
or those given as ``--param name=value`` (repeatable), with each frame's color, albedo,
normal, motion and depth.

``--sources`` prints instead where the flicker of ``oidn-gpu bench --temporal`` comes from
(its sequences, `oidn_gpu.cli.bench_temporal`'s methods and `oidn_gpu.image.temporal_metric`'s
flicker), per frame and in temporal mode:

    python bench/temporal_mode.py tests/data/sequences/objects \
        tests/data/sequences/objects_pan --sources

the squared flicker (each frame pair's ``(D_t - warp(D_t-1)) - (R_t - warp(R_t-1))`` over
the pixels carried, relative to the reference's mean square there, summed over frame
pairs) split into ``revealed`` (the pixels the previous frame did not show) and the other
pixels by how much the converged reference itself changes there from the previous frame
carried by the motion (``|R_t - warp(R_t-1)|``, quantiles per frame: ``change top 5%``,
``80-95%``, ``50-80%``, ``0-50%``: moving edges and textures, shadows, what is seen
through glass at the top; still, flat surfaces at the bottom); then the flicker lower than
per-frame denoising's that a noise-free output perfectly stable in time scores if it is
the reference blurred by a Gaussian of ``--blur`` pixels: how much of the metric is detail
lost on what moves, which temporal passes cannot give back.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import temporal_stability as ts

from oidn_gpu.cli import bench_temporal as bt
from oidn_gpu.image import temporal_metric as tm


def temporal(backend: str, params: dict, **options) -> ts.Method:
    """Each frame through `TemporalDenoiser` (HDR, with albedo, normal, motion and depth)."""

    def run(frames: Sequence[ts.SequenceFrame]) -> list[np.ndarray]:
        from oidn_gpu import TemporalDenoiser

        with TemporalDenoiser(hdr=True, backend=backend, **params, **options) as td:
            outputs = []
            for f in frames:
                motion = np.where(f.motion.invalid[..., None], np.nan, f.motion.backward)
                out = td.denoise(f.color, f.albedo, f.normal, motion=motion, depth=f.depth)
                outputs.append(np.asarray(out, np.float32)[..., :3])
            return outputs

    return run


BANDS = ("0-50%", "50-80%", "80-95%", "change top 5%")
QUANTILES = (0.5, 0.8, 0.95)


def blurred(image: np.ndarray, sigma: float) -> np.ndarray:
    """``image`` ``[H, W, C]`` convolved with a Gaussian of ``sigma`` pixels (rows, then
    columns; edges repeated)."""
    radius = int(3 * sigma + 1)
    offsets = np.arange(-radius, radius + 1)
    kernel = np.exp(-(offsets**2) / (2 * sigma * sigma))
    kernel /= kernel.sum()
    height, width = image.shape[:2]
    padded = np.pad(image, ((radius, radius), (0, 0), (0, 0)), mode="edge")
    rows = sum(k * padded[i : i + height] for i, k in enumerate(kernel))
    padded = np.pad(rows, ((0, 0), (radius, radius), (0, 0)), mode="edge")
    return sum(k * padded[:, i : i + width] for i, k in enumerate(kernel)).astype(np.float32)


def flicker_sources(frames: Sequence[bt.SequenceFrame], outputs: Sequence[np.ndarray]) -> dict:
    """The squared flicker of ``outputs`` summed over frame pairs, per kind of pixel."""
    masks = bt.revealed_masks(frames)
    sums = dict.fromkeys(("revealed", *BANDS), 0.0)
    for t in range(1, len(frames)):
        motion = frames[t].vectors
        reference = frames[t].reference
        warped_reference, carried = tm.warp(frames[t - 1].reference, motion)
        warped_output, _ = tm.warp(outputs[t - 1], motion)
        flicker = ((outputs[t] - warped_output) - (reference - warped_reference)) ** 2
        change = np.sqrt(((reference - warped_reference) ** 2).sum(axis=2))
        scale = float(np.mean(reference[carried] ** 2)) * reference.shape[2]
        energy = flicker.sum(axis=2) / scale
        revealed = masks[t] & carried
        sums["revealed"] += float(energy[revealed].sum())
        rest = carried & ~masks[t]
        edges = [-np.inf, *np.quantile(change[rest], QUANTILES), np.inf]
        for band, low, high in zip(BANDS, edges[:-1], edges[1:], strict=True):
            sums[band] += float(energy[rest & (change > low) & (change <= high)].sum())
    return sums


def sources(sequences: Sequence[Path], backend: str, params: dict, blurs: Sequence[float]) -> None:
    """``--sources``: the flicker per kind of pixel, and the flicker of stable blurred
    references (see the module docstring)."""
    print("| sequence | method | " + " | ".join(("revealed", *BANDS[::-1])) + " | total |")
    print("| --- | --- |" + " ---: |" * (len(BANDS) + 2))
    floors = []
    for directory in sequences:
        frames = bt.load_sequence(directory)
        references = [f.reference for f in frames]
        motions = [f.vectors for f in frames]
        single = bt.per_frame(frames, backend, {})
        methods = {"per-frame": single, "temporal": bt.temporal(frames, backend, {}, params)}
        for method, outputs in methods.items():
            sums = flicker_sources(frames, outputs)
            cells = [f"{sums[k]:.0f}" for k in ("revealed", *BANDS[::-1])]
            print(
                f"| {directory.name} | {method} | "
                + " | ".join(cells)
                + f" | {sum(sums.values()):.0f} |"
            )
        base = tm.temporal_instability(single, references, motions)
        for sigma in blurs:
            stable = tm.temporal_instability(
                [blurred(r, sigma) for r in references], references, motions
            )
            floors.append(
                f"{directory.name}: reference blurred by {sigma:g} px: {base / stable:.2f}x lower"
            )
    print("\n".join(floors))


def _param(text: str) -> tuple[str, object]:
    name, _, value = text.partition("=")
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        parsed = value
    return name.strip(), parsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sequences", nargs="+", type=Path, help="sequence folders")
    parser.add_argument("--backend", default="reference")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        type=_param,
        help="a TemporalDenoiser parameter, name=value (repeatable)",
    )
    parser.add_argument("--motion-layer", default=None)
    parser.add_argument("--no-per-frame", action="store_true", help="only the temporal rows")
    parser.add_argument("--sources", action="store_true", help="where the flicker comes from")
    parser.add_argument("--blur", type=float, nargs="+", default=[0.7, 1.0], help="--sources' px")
    args = parser.parse_args(argv)
    params = dict(args.param)
    if args.sources:
        sources(args.sequences, args.backend, params, args.blur)
        return 0
    methods: dict[str, ts.Method] = {}
    if not args.no_per_frame:
        methods["per-frame"] = ts.per_frame(args.backend)
    label = "temporal" + "".join(f" {k}={v}" for k, v in params.items())
    methods[label] = temporal(args.backend, params)
    rows = [row for seq in args.sequences for row in ts.compare(seq, methods, args.motion_layer)]
    print(ts.format_rows(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
