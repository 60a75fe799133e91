"""The cuda backend's engines on the full-size frames of ``inputs.npz`` (`fp16_frames.py
export`): relative L2 of the cuDNN path with fp16 sums, with float32 (TF32) sums
(`torch_ops.FP32_SUMS`) and of the Triton kernels against the wgpu fp32 output (a few 1e-6
from Intel OIDN CPU). Run on the GPU machine (wgpu set up):
``python bench/h200_cudnn_scenes.py inputs.npz``."""

from __future__ import annotations

import json
import sys

import numpy as np

import oidn_gpu
from oidn_gpu.backends.cuda import torch_ops

FRAMES = ("cornell_diffuse", "cornell_glossy", "dim_indirect", "textured_checker", "caustics")
IMAGES = ("color_4spp", "albedo", "normal")


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def run(data, **options):
    with oidn_gpu.Denoiser(hdr=True, **options) as den:
        if options.get("engine") == "triton":
            first = [data[f"{FRAMES[0]}.{n}"] for n in IMAGES]
            den.denoise(*first)
            (engine,) = den._engines.values()
            engine.runner.denoiser.wait_compiled()
        out = {f: np.asarray(den.denoise(*[data[f"{f}.{n}"] for n in IMAGES]), np.float32)
               for f in FRAMES}
        return out, den.info().device


def main() -> None:
    data = np.load(sys.argv[1])
    base, _ = run(data, backend="wgpu", precision="fp32")
    rows = [("triton", {"engine": "triton"}), ("cudnn fp16 sums", {"engine": "cudnn"}),
            ("cudnn fp32 sums", {"engine": "cudnn"})]
    for name, options in rows:
        torch_ops.FP32_SUMS = name != "cudnn fp16 sums"
        out, device = run(data, backend="cuda", precision="fp16", **options)
        print(json.dumps({"config": name, "device": device,
                          "rel_l2_vs_wgpu_fp32": {f: round(rel_l2(out[f], base[f]), 6)
                                                  for f in FRAMES}}), flush=True)


if __name__ == "__main__":
    main()
