"""The cuda backend's cuDNN path (the bridge while Triton compiles, and ``engine="cudnn"``)
with fp16 convolutions against float32 (TF32) convolutions of fp16 values
(`torch_ops.FP32_SUMS`): distance to the reference backend on a 256x256 frame and
speed at 1080p, beside the Triton kernels. Random HDR colour + albedo + normal, as the
benchmark's. Run on the GPU machine: ``python bench/h200_cudnn_sums.py``."""

from __future__ import annotations

import numpy as np
import torch
from cuda_host_copies import timed  # bench/: the median wall of a synchronized call

import oidn_gpu
from oidn_gpu.backends.cuda import torch_ops


def images(h, w, seed=1):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = 0.5 + 0.4 * np.sin(x / 37.0)[..., None] * np.cos(y / 23.0)[..., None]
    color = (base * rng.gamma(2.0, 0.5, (h, w, 3)) * 3).astype(np.float32)
    albedo = np.clip(base * np.array([0.7, 0.6, 0.5]), 0, 1).astype(np.float32)
    normal = np.stack([np.sin(x / 50.0), np.cos(y / 40.0), np.ones_like(x)], -1)
    normal = (normal / np.linalg.norm(normal, axis=-1, keepdims=True)).astype(np.float32)
    return color, albedo, normal


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main() -> None:
    small = images(256, 256)
    reference = oidn_gpu.Denoiser(hdr=True, backend="reference").denoise(*small)
    with oidn_gpu.Denoiser(hdr=True, backend="cuda", engine="triton") as den:
        den.denoise(*small)
        (engine,) = den._engines.values()
        engine.runner.denoiser.wait_compiled()
        print(f"triton            rel L2 vs reference {rel_l2(den.denoise(*small), reference):.3e}")
    big = [torch.from_numpy(a).cuda() for a in images(1080, 1920)]
    for fp32_sums in (False, True):
        torch_ops.FP32_SUMS = fp32_sums
        with oidn_gpu.Denoiser(hdr=True, backend="cuda", engine="cudnn") as den:
            err = rel_l2(den.denoise(*small), reference)
            ms = timed(lambda den=den: den.denoise(*big), 30)
        print(f"cudnn fp32_sums={fp32_sums!s:5}  rel L2 vs reference {err:.3e}, "
              f"1080p torch tensors {ms:.2f} ms", flush=True)


if __name__ == "__main__":
    main()
