"""Where bf16 loses accuracy in the cuda backend's arithmetic (CPU emulation, float64 sums).

    python bench/bf16_error_sources.py [--scene DIR] [--size 256]

The cuda kernels multiply fp16/bf16 operands and accumulate in fp32 (`tl.dot` with fp32
accumulators), so what separates bf16 from fp16 is storage: the weights and every stored
activation (network input, each conv's output) are rounded to the 8-bit (bf16) or 11-bit
(fp16) mantissa. This emulation rounds each source on its own, sums in float64, and
prints the relative L2 of the raw network output against the float64 network, and of
the denoised image after OIDN's output pass. Input: a centre crop of a shared scene's
``color_4spp``/``albedo``/``normal`` EXRs (hdr, autoexposure) or uniform noise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own alias

from oidn_gpu.backends.cuda import layout
from oidn_gpu.graph.passes import optimize
from oidn_gpu.image import autoexposure, process
from oidn_gpu.model.weights import load_builtin


def network(model, x, rounding, sources):
    """The fused graph in float64 with ``rounding`` applied to the chosen ``sources``."""
    graph = optimize(model.graph, channel_align=1)
    r = (lambda t: t.to(rounding).double()) if rounding is not None else (lambda t: t)
    values = {graph.input: r(x) if "input" in sources else x}
    out = None
    for launch in layout.launches(graph):
        params = model.convs[launch.name]
        weight = torch.as_tensor(np.asarray(params.weight, np.float64))
        if "weights" in sources:
            weight = r(weight)
        parts = []
        for source in launch.sources:
            value = values[source.value]
            parts.append(F.interpolate(value, scale_factor=2.0) if source.upsample else value)
        inp = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        out = F.conv2d(inp, weight, torch.as_tensor(np.asarray(params.bias, np.float64)), padding=1)
        if launch.relu:
            out = F.relu(out)
        if launch.pool:
            out = F.max_pool2d(out, 2, 2)
        if "activations" in sources and not launch.final:
            out = r(out)
        values[launch.value] = out
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scene", type=Path)
    parser.add_argument("--size", type=int, default=256)
    args = parser.parse_args()
    model = load_builtin("rt_hdr_alb_nrm")
    mode = process.mode_for("RT", hdr=True)
    if args.scene is not None:
        from oidn_gpu.image.io import read_image

        images = [
            np.asarray(read_image(args.scene / f"{n}.exr").pixels, np.float32)[..., :3]
            for n in ("color_4spp", "albedo", "normal")
        ]
        h, w = images[0].shape[:2]
        y, x, s = (h - args.size) // 2, (w - args.size) // 2, args.size
        scale = autoexposure.autoexposure(images[0])
        mode = process.mode_for("RT", hdr=True, input_scale=scale)
        images = [np.ascontiguousarray(i[y : y + s, x : x + s]) for i in images]
    else:
        rng = np.random.default_rng(1)
        s = args.size
        images = [
            (rng.random((s, s, 3)) * 4).astype(np.float32),
            rng.random((s, s, 3)),
            rng.random((s, s, 3)) * 2 - 1,
        ]
        images = [i.astype(np.float32) for i in images]
    inp = np.zeros((9, s, s), np.float32)
    process.build_input(*images, mode, out=inp)
    x = torch.as_tensor(inp, dtype=torch.float64)[None]
    exact = network(model, x, None, ())
    exact_img = process.finish_output(exact[0].float().numpy(), mode, 3)
    print(
        f"{'rounded':<28} {'raw rel L2 (fp16)':>18} {'(bf16)':>10} {'image (fp16)':>13} "
        f"{'(bf16)':>10}"
    )
    for sources in (
        ("input",),
        ("weights",),
        ("activations",),
        ("input", "weights", "activations"),
    ):
        cells = []
        images_out = []
        for dtype in (torch.float16, torch.bfloat16):
            out = network(model, x, dtype, sources)
            cells.append(float(torch.linalg.norm(out - exact) / torch.linalg.norm(exact)))
            img = process.finish_output(out[0].float().numpy(), mode, 3)
            images_out.append(float(np.linalg.norm(img - exact_img) / np.linalg.norm(exact_img)))
        print(
            f"{'+'.join(sources):<28} {cells[0]:>18.2e} {cells[1]:>10.2e} "
            f"{images_out[0]:>13.2e} {images_out[1]:>10.2e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
