"""Temporal mode against per-frame denoising on animation sequences (docs/benchmarks.md).

    python bench/temporal_mode.py tests/data/sequences/static tests/data/sequences/orbit \
        tests/data/sequences/moving --backend reference

The sequences and the metric are `bench/temporal_stability.py`'s (instability: flicker the
reference does not have, relative to it; PSNR per frame; PSNR of the disoccluded pixels).
The temporal method is `oidn_gpu.TemporalDenoiser` with its default parameters,
or those given as ``--param name=value`` (repeatable), with each frame's color, albedo,
normal, motion and depth.
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
    args = parser.parse_args(argv)
    params = dict(args.param)
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
