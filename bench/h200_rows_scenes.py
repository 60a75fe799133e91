"""Denoise the shared scenes on the GPU with and without the row kernel (cuda, triton, fp16).

    python3 bench/h200_rows_scenes.py INPUTS.npz OUT.npz

INPUTS.npz: `bench/scenes.py export` arrays (carried as fp16). Prints each scene's distance
between the two outputs and writes the row-kernel outputs (``{scene}``, float32) to OUT.npz;
score them here with ``python bench/scenes.py score --outputs OUT.npz``.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from oidn_gpu import Denoiser

SCENES = ("cornell_diffuse", "cornell_glossy", "dim_indirect", "textured_checker")


def main(inputs: str, out: str) -> None:
    data = np.load(inputs)
    results: dict[str, dict[str, np.ndarray]] = {}
    for rows in ("off", "on"):
        os.environ["OIDN_GPU_CUDA_ROWS"] = rows
        results[rows] = {}
        with Denoiser(hdr=True, backend="cuda", precision="fp16", engine="triton") as den:
            for scene in SCENES:
                images = [data[f"{scene}.{n}"].astype(np.float32)
                          for n in ("color_4spp", "albedo", "normal")]  # fmt: skip
                results[rows][scene] = den.denoise(images[0], albedo=images[1],
                                                   normal=images[2])  # fmt: skip
            kernels = den.info().kernels
            print("rows", rows, {k: kernels.get(k) for k in ("enc_conv0", "enc_conv1",
                                                            "dec_conv1b")}, flush=True)  # fmt: skip
    for scene in SCENES:
        on, off = results["on"][scene], results["off"][scene]
        rel = np.linalg.norm(on - off) / np.linalg.norm(off)
        print(f"{scene} row kernel vs per-layer: rel L2 {rel:.3e}, max abs "
              f"{np.abs(on - off).max():.3e}", flush=True)
    np.savez_compressed(out, **results["on"])
    np.savez_compressed(out.replace(".npz", "_per_layer.npz"), **results["off"])


if __name__ == "__main__":
    main(*sys.argv[1:])
