"""What reading a frame's files costs the command line's ``--temporal``: the images alone
(`sequence.load_frame`, per-frame denoising), the images and then the motion and depth
passes each read on their own (three decodes of the file), and both from one decode
(`TemporalFrames.load`). Medians over ``--frames`` multi-layer EXRs of ``--size``
(`temporal_cli.write_frames`: half, ZIP, as Blender writes them).

    python bench/temporal_read.py --size 1920x1080 --frames 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from temporal_cli import write_frames

from oidn_gpu import sequence
from oidn_gpu.sequence.options import FrameJob, InputOptions
from oidn_gpu.sequence.temporal_frames import TemporalFrames


def median_ms(fn, jobs) -> float:
    times = []
    for job in jobs:
        start = time.perf_counter()
        fn(job)
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--frames", type=int, default=4)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    inputs = InputOptions()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_frames(folder, width, height, args.frames)
        jobs = [
            FrameJob(color=p, output=folder / "out" / p.name) for p in sorted(folder.glob("*.exr"))
        ]
        temporal = TemporalFrames()

        def separately(job):
            frame = sequence.load_frame(job, inputs)
            temporal._passes(job.color, frame)

        def together(job):
            temporal.load(job, inputs)

        rows = {
            "images (per-frame denoising)": lambda job: sequence.load_frame(job, inputs),
            "images, then motion and depth each read": separately,
            "images, motion and depth from one decode": together,
        }
        for name, fn in rows.items():
            print(f"{name:42s} {median_ms(fn, jobs):8.1f} ms a frame", flush=True)


if __name__ == "__main__":
    main()
