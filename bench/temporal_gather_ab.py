"""The cuda temporal reprojection kernel (`temporal_kernels.gather_kernel`) of this
checkout against another version of the module (``--other``, a path to its
``temporal_kernels.py``) on the same 1080p inputs: GPU time per launch (CUDA events,
median of ``--runs``) and whether the outputs are equal.

The inputs: a one-pixel pan (whole-pixel motion) and a 0.4-pixel one (subpixel), guides
that agree and a history 5 frames long, so every pixel takes the Catmull-Rom path.

    python bench/temporal_gather_ab.py --other /path/to/old/temporal_kernels.py
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics

import torch

from oidn_gpu.backends.cuda import temporal_kernels as tk
from oidn_gpu.temporal import passes as tp


def load(path: str):
    spec = importlib.util.spec_from_file_location("other_temporal_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs(height: int, width: int, shift: float) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(3)
    rand = lambda *shape: torch.rand(*shape, device="cuda", generator=gen)  # noqa: E731
    motion = torch.zeros(height, width, 2, device="cuda")
    motion[..., 0] = shift
    guide = rand(height, width, tp.GUIDE_CHANNELS)
    guide[..., 0] = 3.0
    guide[..., 7] = 0.0
    state = rand(height, width, tp.STATE_CHANNELS)
    state[..., tp.STATE_COUNT] = 5.0
    state[..., tp.STATE_OUTPUT_COUNT] = 3.0
    state[..., 14:] = 0.0
    return {"motion": motion, "guide": guide, "prev_guide": guide.clone(),
            "signal": rand(height, width, tp.SIGNAL_CHANNELS), "prev_state": state}


def time_gather(module, data: dict, params, runs: int) -> tuple[float, list]:
    height, width = data["motion"].shape[:2]
    out = torch.empty(height, width, tp.REPROJECTION_CHANNELS, device="cuda")
    lum = torch.empty(2, height, width, device="cuda")
    kept = torch.zeros(1, dtype=torch.int32, device="cuda")
    times = []
    for _ in range(runs + 3):
        kept.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        module.gather(data["motion"], data["guide"], data["prev_guide"], data["signal"],
                      data["prev_state"], out, lum, kept, params, has_history=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times[3:]), [out.clone(), lum.clone(), kept.clone()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", required=True)
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    other = load(args.other)
    params = tp.TemporalParams().with_guides(depth=True, normal=False, albedo=False)
    for shift in (1.0, 0.4):
        data = inputs(height, width, shift)
        new_ms, new = time_gather(tk, data, params, args.runs)
        old_ms, old = time_gather(other, data, params, args.runs)
        same = [torch.equal(a, b) for a, b in zip(new, old, strict=True)]
        diff = (new[0] - old[0]).abs()
        print(f"gather {width}x{height}, motion {shift} px: this checkout {new_ms:.3f} ms, "
              f"other {old_ms:.3f} ms (median of {args.runs}); reprojection, luminances, "
              f"count equal: {same}; reprojection max abs difference {diff.max():.3g}, at "
              f"{int((diff > 0).sum())} of {diff.numel()} values", flush=True)


if __name__ == "__main__":
    main()
