"""Which f32 accumulation the wgpu fp16 kernels need: candidates through the fp16 emulator.

Each candidate keeps f16 storage, f16 weights and the f16 network input, and sums the conv
products differently (bench/fp16_emulator.py): today's f16 partials of 32 products folded
into f32, shorter f16 chains (8 or 4 products) folded into f32, f32 accumulation on every
layer, or f32 on the full-resolution layers only. Relative L2 against Intel OIDN 2.5.1 CPU
(pyoidn) on the scene crops of tests/data/scenes (the caustics crop included) or, with
``--inputs NPZ``, on the full-size frames of `bench/fp16_frames.py export` (OIDN CPU is run
here on the same inputs; ``--crops`` then names frames).

    OPENBLAS_NUM_THREADS=1 python bench/fp16_accumulation.py [--crops ...] [--out table.md] \
        [--inputs inputs.npz --crops caustics] [--only 0 3 ...] [--fused]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))

import fp16_emulator as emu  # noqa: E402
from fp16_error_budget import FP32, WEIGHTS, Crop, cpu_name, fmt, rel_l2, table  # noqa: E402

from oidn_gpu.model.weights import load_builtin  # noqa: E402

CROPS = ("cornell_diffuse", "cornell_glossy", "dim_indirect", "textured_checker", "caustics")
# The layers at the network's full resolution (the input's): most of the fp16 error.
FULL_RESOLUTION = frozenset({"enc_conv0", "enc_conv1", "dec_conv1a", "dec_conv1b", "dec_conv0"})


ENDS = ("enc_conv0", "dec_conv0")  # the convs that read only the network input, and the final


def candidates(layers: list[str]) -> list[tuple[str, emu.Fp16Sources]]:
    every = frozenset(layers)
    base = emu.ALL_SOURCES
    ends = tuple((name, 0) for name in ENDS)
    parity = replace(base, parity=True)
    return [
        ("f16 partials of 32 products (f16-partials)", base),
        ("f16 chains of 8 products into f32 (f16-chains)", replace(base, gemm_group=8)),
        ("f16 chains of 16 products into f32 (f16-chains16)", replace(base, gemm_group=16)),
        ("2 f16 chains of 16 added in f16, into f32 (f16-pairs)", replace(base, chains=2)),
        ("4 f16 chains of 8 added in f16, into f32 (f16-lanes)", replace(base, chains=4)),
        ("f16-partials, f32 ends", replace(base, layer_groups=ends)),
        ("f16-pairs, f32 ends", replace(base, chains=2, layer_groups=ends)),
        ("f16-lanes, f32 ends", replace(base, chains=4, layer_groups=ends)),
        ("f16-chains16, f32 ends", replace(base, gemm_group=16, layer_groups=ends)),
        ("f16-chains, f32 ends", replace(base, gemm_group=8, layer_groups=ends)),
        ("f16-lanes, f32 final layer", replace(base, chains=4, layer_groups=ends[1:])),
        ("f16 chains of 4 products into f32", replace(base, gemm_group=4)),
        (
            "f32 on the full-resolution layers, 32 elsewhere",
            replace(base, f32_layers=FULL_RESOLUTION),
        ),
        ("f32 accumulation on every layer (f32)", replace(base, f32_layers=every)),
        ("f16-pairs, f32 final layer", replace(base, chains=2, layer_groups=ends[1:])),
        ("f16-partials, f32 final layer", replace(base, layer_groups=ends[1:])),
        ("f16-chains16, f32 final layer", replace(base, gemm_group=16, layer_groups=ends[1:])),
        (
            "f16-pairs, f16-chains first conv, f32 final layer",
            replace(base, chains=2, layer_groups=(("enc_conv0", (8, 1)), ends[1])),
        ),
        (
            "f16-lanes, f16-chains16 first conv, f32 final layer",
            replace(base, chains=4, layer_groups=(("enc_conv0", (16, 1)), ends[1])),
        ),
        (
            "f16-partials, f16-chains16 first conv, f32 final layer",
            replace(base, layer_groups=(("enc_conv0", 16), ends[1])),
        ),
        (
            "f16-partials, f16-chains first conv, f32 final layer",
            replace(base, layer_groups=(("enc_conv0", 8), ends[1])),
        ),
        # the decoder convs in the parity form (GEMM option decoder_form="parity")
        ("parity, f16-partials, f32 final layer", replace(parity, layer_groups=ends[1:])),
        (
            "parity, f16-chains16, f32 final layer",
            replace(parity, gemm_group=16, layer_groups=ends[1:]),
        ),
        ("parity, f16-pairs, f32 final layer", replace(parity, chains=2, layer_groups=ends[1:])),
        ("parity, f16-chains16, f32 ends", replace(parity, gemm_group=16, layer_groups=ends)),
        ("parity, f32", replace(parity, f32_layers=every)),
    ]


class Frame(Crop):
    """A full-size frame of an inputs .npz (`bench/fp16_frames.py export`), as a `Crop`."""

    def __init__(self, name: str, model, inputs: Path) -> None:
        from oidn_gpu.image.autoexposure import autoexposure
        from tests.oracle import oidn_denoise

        data = np.load(inputs)
        self.name = name
        self.color, self.albedo, self.normal = (
            np.ascontiguousarray(data[f"{name}.{image}"], np.float32)
            for image in ("color_4spp", "albedo", "normal")
        )
        self.model = model
        self.oidn = oidn_denoise(self.color, self.albedo, self.normal, hdr=True)
        self.input_scale = autoexposure(self.color)
        self.fp32 = self.emulate(FP32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crops", nargs="+", default=list(CROPS))
    parser.add_argument("--fused", action="store_true", help="f16 FMAs rounded once (GPUs)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--inputs", type=Path, help="full-size frames (fp16_frames.py export)")
    parser.add_argument("--only", nargs="*", type=int, help="candidate indices to run")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    model = load_builtin(WEIGHTS)
    layers = [n.name for n in model.graph.nodes if n.__class__.__name__ == "Conv"]
    if args.inputs:
        crops = [Frame(name, model, args.inputs) for name in args.crops]
    else:
        crops = [Crop(name, model) for name in args.crops]
    rows = []
    for index, (label, sources) in enumerate(candidates(layers)):
        if args.only and index not in args.only:
            continue
        if args.fused:
            sources = replace(sources, fused_fma=True)
        cells = []
        for crop in crops:
            out = crop.emulate(sources)
            cells.append(f"{fmt(rel_l2(out, crop.oidn))} / {fmt(rel_l2(out, crop.fp32))}")
        rows.append([label, *cells])
        print(label, cells, flush=True)
    text = "\n".join(
        [
            f"{WEIGHTS}, hdr, albedo + normal; crops {', '.join(args.crops)}; "
            f"{'fused' if args.fused else 'unfused (lavapipe)'} f16 FMA; "
            f"{datetime.date.today().isoformat()}, {cpu_name()}, NumPy {np.__version__}, "
            f"{time.perf_counter() - started:.0f} s.",
            "",
            "Relative L2 of the emulated output against Intel OIDN 2.5.1 CPU / the fp32 emulation.",
            "",
            table(["accumulation", *args.crops], rows),
        ]
    )
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
