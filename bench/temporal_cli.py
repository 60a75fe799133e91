"""Wall time per frame of ``oidn-gpu denoise DIR`` with and without ``--temporal``.

Writes ``--frames`` multi-layer EXRs of ``--size`` as Blender writes them (half
``ViewLayer.Combined`` RGBA, ``Denoising Albedo``, ``Denoising Normal``, ``Vector``, and a
float ``Depth``; ZIP, `scripts/sequence_render.py`'s writer) of `temporal_overhead`'s
one-pixel pan, then runs the command line on them in this process (``oidn_gpu.cli.main``):
per-frame denoising, ``--temporal`` reading each frame in its turn (the next frame not
read ahead: `oidn_gpu.sequence.loop._upcoming` gives none), and ``--temporal`` as
shipped (the next frame read and staged while the current one is denoised). Each run's
``--json`` gives the per-frame wall times and stages; medians over the frames after
``--warmup``. The two temporal runs' output files are compared byte for byte.

    python bench/temporal_cli.py --size 1920x1080 --frames 16 -- --backend cuda
"""

from __future__ import annotations

import argparse
import contextlib
import io as text_io
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "scripts")]

from sequence_render import write_exr  # noqa: E402
from temporal_overhead import sequence  # noqa: E402

from oidn_gpu.cli import main as cli_main  # noqa: E402
from oidn_gpu.image.motion import cycles_vector  # noqa: E402
from oidn_gpu.sequence import loop  # noqa: E402


def write_frames(folder: Path, width: int, height: int, frames: int) -> None:
    for frame in sequence(height, width, frames):
        backward = frame["motion"]
        rgba = np.concatenate([frame["color"], np.ones((height, width, 1), np.float32)], axis=2)
        write_exr(
            folder / f"pan.{frame['frame']:04d}.exr",
            [
                ("ViewLayer.Combined", ("R", "G", "B", "A"), rgba, "half"),
                ("ViewLayer.Denoising Albedo", ("R", "G", "B"), frame["albedo"], "half"),
                ("ViewLayer.Denoising Normal", ("X", "Y", "Z"), frame["normal"], "half"),
                (
                    "ViewLayer.Vector",
                    ("X", "Y", "Z", "W"),
                    cycles_vector(backward, -backward),
                    "half",
                ),
                ("ViewLayer.Depth", ("Z",), frame["depth"], "float"),
            ],
        )


def run(
    name: str, folder: Path, out: Path, args: list[str], warmup: int, *, read_ahead: bool = True
) -> dict:
    """One command line run: its medians per frame (ms) after ``warmup`` frames."""
    saved = loop._upcoming
    if not read_ahead:
        loop._upcoming = lambda *_: None
    stdout = text_io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(stdout):
            rc = cli_main(
                [
                    "denoise",
                    str(folder),
                    "-o",
                    f"{out}/",
                    "--mkdir",
                    "--json",
                    "--no-progress",
                    "--quiet",
                    *args,
                ]
            )
    finally:
        loop._upcoming = saved
    wall = time.perf_counter() - start
    summary = json.loads(stdout.getvalue())
    frames = summary["results"][warmup:]
    row = {
        "run": name,
        "rc": rc,
        "frames": len(summary["results"]),
        "wall_per_frame_ms": 1e3 * wall / max(1, len(summary["results"])),
        "frame_ms": 1e3 * statistics.median(f["elapsed_s"] for f in frames),
    }
    for stage in frames[0]["stages_s"]:
        row[f"{stage}_ms"] = 1e3 * statistics.median(f["stages_s"][stage] for f in frames)
    print(
        f"{name:34s} rc {rc}: {row['frame_ms']:7.2f} ms a frame (median of "
        f"{len(frames)}; read {row['read_ms']:.2f}, denoise {row['denoise_ms']:.2f}, write "
        f"{row['write_ms']:.2f}); whole run {row['wall_per_frame_ms']:.2f} ms a frame",
        flush=True,
    )
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT")
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--no-warm-up-run",
        dest="warm_up_run",
        action="store_false",
        help="no per-frame run first (its first frames start the GPU)",
    )
    parser.add_argument("cli", nargs="*", help="after --: options of oidn-gpu denoise")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "frames"
        folder.mkdir()
        start = time.perf_counter()
        write_frames(folder, width, height, args.frames)
        print(
            f"{args.frames} frames {width}x{height} written in {time.perf_counter() - start:.1f} s",
            flush=True,
        )
        rows = []
        if args.warm_up_run:
            rows.append(run("warm-up (per-frame)", folder, root / "warm", args.cli, args.warmup))
            shutil.rmtree(root / "warm")
        rows.append(run("per-frame", folder, root / "plain", args.cli, args.warmup))
        rows.append(
            run(
                "--temporal (next frame read ahead)",
                folder,
                root / "ahead",
                [*args.cli, "--temporal"],
                args.warmup,
            )
        )
        rows.append(
            run(
                "--temporal, one frame at a time",
                folder,
                root / "one",
                [*args.cli, "--temporal"],
                args.warmup,
                read_ahead=False,
            )
        )
        same = all(
            (root / "one" / p.name).read_bytes() == p.read_bytes()
            for p in sorted((root / "ahead").iterdir())
        )
        print(f"--temporal output files identical with and without the read-ahead: {same}")
        plain, ahead = rows[-3]["frame_ms"], rows[-2]["frame_ms"]
        print(
            f"--temporal over per-frame: {100 * (ahead / plain - 1):+.1f}% a frame "
            f"({ahead - plain:+.2f} ms)"
        )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "identical": same}, indent=1))


if __name__ == "__main__":
    main()
