"""``oidn-gpu bench --temporal SEQUENCE ...``: temporal mode's quality against per-frame
denoising, per backend.

A sequence is a folder of frame files (``*.exr``, in file-name order: beauty, albedo, normal,
a motion pass and optionally a depth pass, found by the renderers' names of docs/aovs.md or
``--motion-layer``) and ``reference/`` holding each frame's converged image under the same
file name. Each backend denoises the sequence twice: each frame alone (`Denoiser.denoise_many`)
and in temporal mode (`TemporalDenoiser.denoise_many`, its defaults or ``--param``), HDR with
albedo and normal (and motion and depth for temporal mode). The metrics are
`oidn_gpu.image.temporal_metric`'s:

* flicker: the frame-to-frame change the output has and the reference does not (temporal
  instability, relative to the reference; lower is better), and how many times lower
  temporal mode's is;
* per-frame error: the mean relative L2 and PSNR against the reference, and the largest
  ratio over frames of temporal mode's relative L2 to per-frame denoising's of that frame;
* revealed pixels: those the previous frame did not show (found from the motion, forward
  and backward); their error against the reference (as PSNR) and the ratio of temporal
  mode's RMS error there to per-frame denoising's (ghosts show here).

Each temporal row ends with whether it meets the bars: flicker at least 2x lower, no frame's
error higher (1% slack), revealed pixels' error within 10% of per-frame denoising's.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.cli.json_output import document, write_document
from oidn_gpu.filter import Denoiser, TemporalDenoiser
from oidn_gpu.image import io
from oidn_gpu.image import motion as motion_passes
from oidn_gpu.image import temporal_metric as tm
from oidn_gpu.sequence.temporal_frames import read_depth

FLICKER_BAR = 2.0  # temporal flicker at least this many times lower
FRAME_ERROR_SLACK = 1.01  # no frame's relative L2 above per-frame denoising's times this
REVEALED_BAR = 1.10  # revealed pixels' RMS error within 10% of per-frame denoising's
METHODS = ("per-frame", "temporal")


@dataclass(frozen=True, eq=False)
class SequenceFrame:
    """One frame of a sequence as read from its files (float32 images)."""

    name: str
    color: np.ndarray
    albedo: np.ndarray | None
    normal: np.ndarray | None
    motion: motion_passes.Motion
    depth: np.ndarray | None
    reference: np.ndarray

    @property
    def vectors(self) -> np.ndarray:
        """Backward motion, NaN where the pass had no valid vector."""
        return np.where(self.motion.invalid[..., None], np.float32(np.nan), self.motion.backward)


@dataclass(frozen=True)
class Row:
    """One method's metrics on one sequence and backend (`bench --temporal --json`)."""

    sequence: str
    backend: str
    method: str
    frames: int
    flicker: float
    relative_l2: float
    psnr_db: float
    revealed_psnr_db: float
    revealed_pixels: int
    seconds: float
    flicker_lower: float = float("nan")  # per-frame's flicker / this one's
    worst_frame_error_ratio: float = float("nan")  # max over frames of rel. L2 / per-frame's
    revealed_error_ratio: float = float("nan")  # RMS error on revealed pixels / per-frame's
    meets_bars: bool | None = None


def _rgb(path: Path, layers: Any, names: Sequence[str]) -> np.ndarray | None:
    layer = io.find_layer(layers, names)
    if layer is None:
        return None
    return np.ascontiguousarray(io.read_layer(path, layer).pixels[..., :3], np.float32)


REFERENCE_FOLDER = "reference"  # a sequence's converged images, beside its frames


def load_frame(path: Path, motion_layer: str | None = None) -> SequenceFrame:
    """A frame file and its reference (``reference/<same name>``)."""
    layers = io.list_layers(path)
    color = _rgb(path, layers, [*io.COLOR_LAYER_NAMES, ""])
    if color is None:
        raise io.ImageFileError(f"'{path}' has no beauty (looked for docs/aovs.md's names)")
    reference_path = path.parent / REFERENCE_FOLDER / path.name
    if not reference_path.is_file():
        raise io.ImageFileError(f"no reference for '{path}': expected '{reference_path}'")
    reference = io.read_layer(reference_path, "").pixels[..., :3].astype(np.float32)
    if reference.shape != color.shape:
        raise io.ImageFileError(
            f"reference '{reference_path}' is {reference.shape[1]}x{reference.shape[0]} but "
            f"'{path}' is {color.shape[1]}x{color.shape[0]}; expected the same size"
        )
    return SequenceFrame(
        name=path.name,
        color=color,
        albedo=_rgb(path, layers, io.ALBEDO_LAYER_NAMES),
        normal=_rgb(path, layers, io.NORMAL_LAYER_NAMES),
        motion=motion_passes.read_motion(path, motion_layer, size=color.shape[:2]),
        depth=read_depth(path, layers),
        reference=reference,
    )


def load_sequence(directory: str | Path, motion_layer: str | None = None) -> list[SequenceFrame]:
    """The frames of a sequence folder in file-name order, with their references."""
    directory = Path(directory)
    if not directory.is_dir():
        raise io.ImageFileError(f"'{directory}' is not a folder; expected a sequence folder")
    paths = sorted(p for p in directory.glob("*.exr") if p.is_file())
    if len(paths) < 2:
        raise io.ImageFileError(
            f"'{directory}' holds {len(paths)} frames (*.exr); expected at least 2"
        )
    return [load_frame(p, motion_layer) for p in paths]


def revealed_masks(frames: Sequence[SequenceFrame]) -> list[np.ndarray | None]:
    """Per frame, the pixels the previous frame did not show (None for the first)."""
    masks: list[np.ndarray | None] = [None]
    for previous, frame in itertools.pairwise(frames):
        hidden = tm.disocclusion_mask(
            frame.motion.backward,
            previous_forward=previous.motion.forward,
            depth=frame.depth,
            previous_depth=previous.depth,
        )
        masks.append(hidden | frame.motion.invalid)
    return masks


def per_frame(frames: Sequence[SequenceFrame], backend: str, options: dict) -> list[np.ndarray]:
    """Each frame denoised alone."""
    with Denoiser(hdr=True, backend=backend, **options) as den:
        items = ((f.color, f.albedo, f.normal) for f in frames)
        return [np.asarray(out, np.float32)[..., :3] for out in den.denoise_many(items)]


def temporal(
    frames: Sequence[SequenceFrame], backend: str, options: dict, params: dict
) -> list[np.ndarray]:
    """The frames in temporal mode, in order."""
    with TemporalDenoiser(hdr=True, backend=backend, **params, **options) as td:
        items = (
            {
                "color": f.color,
                "albedo": f.albedo,
                "normal": f.normal,
                "motion": f.vectors,
                "depth": f.depth,
                "frame": i + 1,
            }
            for i, f in enumerate(frames)
        )
        return [np.asarray(out, np.float32)[..., :3] for out in td.denoise_many(items)]


def measure(
    name: str, frames: Sequence[SequenceFrame], backend: str, options: dict, params: dict
) -> list[Row]:
    """The per-frame and temporal rows of one sequence on one backend."""
    masks = revealed_masks(frames)
    references = [f.reference for f in frames]
    motions = [f.vectors for f in frames]
    results = {}
    for method in METHODS:
        started = time.perf_counter()
        if method == "per-frame":
            outputs = per_frame(frames, backend, options)
        else:
            outputs = temporal(frames, backend, options, params)
        seconds = time.perf_counter() - started
        results[method] = (tm.sequence_metrics(outputs, references, motions, masks), seconds)
    return _rows(name, len(frames), backend, results)


def _rows(name: str, count: int, backend: str, results: dict) -> list[Row]:
    rows = []
    base = results["per-frame"][0]
    for method, (m, seconds) in results.items():
        row = Row(
            name,
            backend,
            method,
            count,
            m.instability,
            m.mean_relative_l2,
            m.mean_psnr_db,
            m.disoccluded_psnr_db,
            sum(m.disoccluded_pixels),
            seconds,
        )
        if method != "per-frame":
            lower = base.instability / m.instability if m.instability > 0 else math.inf
            worst = max(
                (t / p if p > 0 else 1.0)
                for t, p in zip(m.relative_l2, base.relative_l2, strict=True)
            )
            revealed = (
                10.0 ** ((base.disoccluded_psnr_db - m.disoccluded_psnr_db) / 20.0)
                if not math.isnan(m.disoccluded_psnr_db)
                else float("nan")
            )
            meets = (
                lower >= FLICKER_BAR
                and worst <= FRAME_ERROR_SLACK
                and (math.isnan(revealed) or revealed <= REVEALED_BAR)
            )
            row = Row(
                **{
                    **asdict(row),
                    "flicker_lower": lower,
                    "worst_frame_error_ratio": worst,
                    "revealed_error_ratio": revealed,
                    "meets_bars": meets,
                }
            )
        rows.append(row)
    return rows


def format_rows(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| sequence | backend | method | flicker | lower | rel. L2 | PSNR dB | worst frame "
        "error | revealed PSNR dB (px) | revealed error | bars | time s |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for r in rows:

        def num(value: float, fmt: str) -> str:
            return "-" if math.isnan(value) else format(value, fmt)

        revealed = (
            "-"
            if math.isnan(r.revealed_psnr_db)
            else (f"{r.revealed_psnr_db:.2f} ({r.revealed_pixels})")
        )
        bars = "-" if r.meets_bars is None else ("yes" if r.meets_bars else "NO")
        lines.append(
            f"| {r.sequence} | {r.backend} | {r.method} | {r.flicker:.4f} | "
            f"{num(r.flicker_lower, '.2f')}{'x' if not math.isnan(r.flicker_lower) else ''} | "
            f"{r.relative_l2:.4f} | {r.psnr_db:.2f} | {num(r.worst_frame_error_ratio, '.3f')} | "
            f"{revealed} | {num(r.revealed_error_ratio, '.3f')} | {bars} | {r.seconds:.1f} |"
        )
    return "\n".join(lines)


def _param(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"--param {text!r}: expected name=value")
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        parsed = value
    return name.strip(), parsed


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oidn-gpu bench --temporal",
        description="Temporal mode's flicker, per-frame error and error on revealed pixels "
        "against per-frame denoising, per backend.",
    )
    parser.add_argument(
        "--temporal",
        dest="sequences",
        nargs="+",
        type=Path,
        required=True,
        metavar="SEQUENCE",
        help="sequence folders: frames (*.exr) and reference/ (same names)",
    )
    parser.add_argument(
        "--backend",
        default="auto",
        help="comma-separated backends (as --backend names them; default auto)",
    )
    parser.add_argument("--precision", default=None, help="the backends' precision option")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        type=_param,
        help="a temporal mode option, name=value (repeatable), e.g. history=4",
    )
    parser.add_argument(
        "--motion-layer",
        default=None,
        help="the motion pass's layer (default: found by the renderers' names)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the rows as JSON on stdout (schema oidn-gpu.bench-temporal, docs/json.md)",
    )
    return parser


def _finite_or_none(value: Any) -> Any:
    """A JSON value: a float that is not finite (a ratio per-frame rows lack) as null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def main(argv: Sequence[str]) -> int:
    """Run the report; 0 when it ran (whether or not the bars are met)."""
    args = build_parser().parse_args(list(argv))
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    options = {"precision": args.precision} if args.precision else {}
    params = dict(args.param)
    rows: list[Row] = []
    for directory in args.sequences:
        frames = load_sequence(directory, args.motion_layer)
        for backend in backends:
            rows += measure(Path(directory).name, frames, backend, options, params)
    if args.json:
        rows_json = [{k: _finite_or_none(v) for k, v in asdict(r).items()} for r in rows]
        write_document(document("oidn-gpu.bench-temporal", {"rows": rows_json}))
    else:
        print(format_rows(rows))
    return 0
