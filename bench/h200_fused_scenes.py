"""Denoise shared scenes on the H200 with each tail fusion and precision (cuda, triton).

    python3 bench/h200_fused_scenes.py INPUTS.npz OUT_PREFIX

INPUTS.npz: `bench/scenes.py export` arrays (any float dtype; the device copy limit
had the colour carried as fp16). Writes OUT_PREFIX_fp16.npz and OUT_PREFIX_bf16.npz
with ``{scene}.{fusion}`` float32 outputs, and prints each fused output's distance
to the per-layer one. Score here with `bench/scenes.py score` (one fusion at a time).
"""

from __future__ import annotations

import os
import sys

import numpy as np

from oidn_gpu import Denoiser

FUSIONS = ("project", "off")


def main(inputs: str, prefix: str) -> None:
    data = np.load(inputs)
    scenes = sorted({k.split(".")[0] for k in data.files})
    for precision in ("fp16", "bf16"):
        results = {}
        for fusion in FUSIONS:
            os.environ["OIDN_GPU_CUDA_FUSED"] = fusion
            with Denoiser(hdr=True, backend="cuda", precision=precision,
                          engine="triton") as denoiser:  # fmt: skip
                for scene in scenes:
                    images = [data[f"{scene}.{n}"].astype(np.float32)
                              for n in ("color_4spp", "albedo", "normal")]  # fmt: skip
                    results[f"{scene}.{fusion}"] = denoiser.denoise(
                        images[0], albedo=images[1], normal=images[2]
                    )
                print(precision, fusion, denoiser.info().kernels.get("dec_conv0"), flush=True)
        for scene in scenes:
            layers = results[f"{scene}.off"]
            for fusion in FUSIONS[:1]:
                out = results[f"{scene}.{fusion}"]
                rel = np.linalg.norm(out - layers) / np.linalg.norm(layers)
                print(f"{precision} {scene} {fusion} vs per-layer: rel L2 {rel:.3e}, "
                      f"max abs {np.abs(out - layers).max():.3e}", flush=True)
        np.savez(f"{prefix}_{precision}.npz", **results)


if __name__ == "__main__":
    main(*sys.argv[1:])
