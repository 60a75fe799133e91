"""Where the wgpu backend's fp16 path loses accuracy, source by source and layer by layer.

Runs rt_hdr_alb_nrm (hdr, albedo + normal, autoexposure) on the scene crops in
tests/data/scenes through the NumPy emulation of the wgpu fp16 arithmetic
(bench/fp16_emulator.py: f16 network input, f16 weights, f16 activation storage,
f16 partial sums in the kernels' order), with each source switched on alone, all
together and with other partial sizes, and with all sources on one conv layer at a
time. Every result is compared with Intel OIDN 2.5.1 on the CPU (pyoidn) and with
the fp32 emulation (every source off: the golden interpreter). The emulation is
checked against the real wgpu fp16 path on the local adapter (lavapipe in CI).

    OPENBLAS_NUM_THREADS=1 python bench/fp16_error_budget.py [--out budget.md]

Prints markdown tables (relative L2 = ||a - b|| / ||b|| over all pixels and channels).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads OpenBLAS; a shared CPU
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # tests.datasets, tests.oracle
sys.path.insert(0, str(REPO_ROOT / "bench"))

import fp16_emulator as emu  # noqa: E402

from oidn_gpu.backends.base import DenoiseImages  # noqa: E402
from oidn_gpu.backends.host_runner import HostTileRunner  # noqa: E402
from oidn_gpu.backends.plan import DenoiseOptions, plan_denoise  # noqa: E402
from oidn_gpu.graph import ir  # noqa: E402
from oidn_gpu.image.autoexposure import autoexposure  # noqa: E402
from oidn_gpu.image.process import build_input, mode_for  # noqa: E402
from oidn_gpu.model.weights import load_builtin  # noqa: E402

WEIGHTS = "rt_hdr_alb_nrm"
CROPS = ("cornell_diffuse", "cornell_glossy", "dim_indirect", "textured_checker")
FP32 = emu.Fp16Sources()
CONFIGS = (
    ("fp32 (every source off)", FP32),
    ("(a) f16 network input", emu.Fp16Sources(input=True)),
    ("(b) f16 weights (the weights files hold f16 already)", emu.Fp16Sources(weights=True)),
    ("(c) f16 activation storage", emu.Fp16Sources(storage=True)),
    ("(d) f16 partial sums (32 products; final layer 4)", emu.Fp16Sources(partials=True)),
    (
        "(a)+(b)+(c): f16 storage, f32 accumulation",
        emu.Fp16Sources(input=True, weights=True, storage=True),
    ),
    ("all: the wgpu fp16 kernels (lavapipe's f16 FMA: product and sum rounded)", emu.ALL_SOURCES),
    (
        "all, fused f16 FMA (one rounding, as native f16 hardware)",
        replace(emu.ALL_SOURCES, fused_fma=True),
    ),
    (
        "all, f16 partials of 4 products (f32 sum per vec4 block)",
        replace(emu.ALL_SOURCES, gemm_group=4),
    ),
)
FINAL_F32_ROW = "all, but the final layer sums in f32"
WGPU_ROW = "measured: wgpu fp16 on {device}"


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a64 = np.asarray(a, np.float64)
    b64 = np.asarray(b, np.float64)
    return float(np.linalg.norm(a64 - b64) / np.linalg.norm(b64))


def conv_layers(graph: ir.Graph) -> list[ir.Conv]:
    return [node for node in graph.nodes if isinstance(node, ir.Conv)]


def macs_share(graph: ir.Graph) -> dict[str, float]:
    """Each conv layer's share of the network's multiply-adds (resolution taken into account)."""
    scale = {graph.input: 1.0}
    macs = {}
    for node in graph.nodes:
        if isinstance(node, ir.Conv):
            scale[node.name] = scale[node.input]
            macs[node.name] = scale[node.name] * 9 * node.in_channels * node.out_channels
        elif isinstance(node, ir.Pool):
            scale[node.name] = scale[node.input] / 4
        elif isinstance(node, ir.Upsample):
            scale[node.name] = scale[node.input] * 4
        else:
            scale[node.name] = scale[node.inputs[0]]
    total = sum(macs.values())
    return {name: value / total for name, value in macs.items()}


class Crop:
    """One crop's images, its OIDN CPU output and the emulated runs."""

    def __init__(self, name: str, model) -> None:
        from tests.datasets import scene_crop
        from tests.oracle import oidn_denoise

        images = scene_crop(name)
        self.name = name
        self.color = images["color_4spp"]
        self.albedo = images["albedo"]
        self.normal = images["normal"]
        self.model = model
        # pyoidn keeps raw pointers: the arrays above stay alive on self
        self.oidn = oidn_denoise(self.color, self.albedo, self.normal, hdr=True)
        self.input_scale = autoexposure(self.color)
        self.fp32 = self.emulate(FP32)

    def emulate(self, sources: emu.Fp16Sources, input_scale: float | None = None) -> np.ndarray:
        """The denoised image through the emulation (OIDN's autoexposure unless given)."""
        scale = self.input_scale if input_scale is None else input_scale
        height, width = self.color.shape[:2]
        plan = plan_denoise(self.model, height, width, DenoiseOptions(hdr=True, input_scale=scale))
        runner = HostTileRunner(emu.EmulatedExecutor(self.model, sources))
        return runner.run(DenoiseImages(self.color, self.albedo, self.normal), plan)

    def network_input(self) -> np.ndarray:
        """The network input of the whole crop (one tile: the crop sizes are multiples of 16)."""
        mode = mode_for("RT", hdr=True, input_scale=self.input_scale)
        return build_input(self.color, self.albedo, self.normal, mode)

    def sensitivity(self) -> tuple[float, float]:
        """Relative L2 change of the emulated fp16 and of the fp32 network output when one input
        value (the median of the positive color R values) moves one f16 step towards zero."""
        x = emu.store_f16(self.network_input())
        red = x[0].reshape(-1)
        positive = np.flatnonzero(red > 0)
        pick = positive[np.argsort(red[positive], kind="stable")[positive.size // 2]]
        moved = x.copy()
        moved[0].reshape(-1)[pick] = np.nextafter(np.float16(red[pick]), np.float16(0))
        graph, convs = self.model.graph, self.model.convs
        return tuple(
            rel_l2(
                emu.run_graph(graph, convs, moved, sources),
                emu.run_graph(graph, convs, x, sources),
            )
            for sources in (emu.ALL_SOURCES, FP32)
        )


class Wgpu:
    """The wgpu fp16 path on the default adapter: end to end through `oidn_gpu.Denoiser`
    (input and output processing on the GPU), and the network alone with NumPy's input
    and output processing (`HostTileRunner`)."""

    def __init__(self, model) -> None:
        import oidn_gpu
        from oidn_gpu.backends.wgpu.executor import WgpuExecutor

        self.denoiser = oidn_gpu.Denoiser(hdr=True, backend="wgpu", precision="fp16")
        self.executor = WgpuExecutor(model, precision="fp16")
        self.device = "the default adapter"

    def end_to_end(self, crop: Crop) -> tuple[np.ndarray, float]:
        out = self.denoiser.denoise(crop.color, crop.albedo, crop.normal)
        info = self.denoiser.info()
        self.device = info.device
        return np.asarray(out, np.float32), info.input_scale

    def host_processing(self, crop: Crop) -> np.ndarray:
        height, width = crop.color.shape[:2]
        plan = plan_denoise(
            crop.model, height, width, DenoiseOptions(hdr=True, input_scale=crop.input_scale)
        )
        images = DenoiseImages(crop.color, crop.albedo, crop.normal)
        return HostTileRunner(self.executor).run(images, plan)

    def close(self) -> None:
        self.denoiser.close()
        self.executor.close()


def cpu_name() -> str:
    """The CPU model (Linux /proc/cpuinfo), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fmt(value: float) -> str:
    return f"{value:.2e}" if value else "0"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crops", nargs="+", default=list(CROPS), choices=CROPS)
    parser.add_argument("--no-wgpu", action="store_true", help="skip the measured wgpu run")
    parser.add_argument("--out", type=Path, help="also write the markdown here")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    model = load_builtin(WEIGHTS)
    layers = conv_layers(model.graph)
    share = macs_share(model.graph)
    crops = [Crop(name, model) for name in args.crops]

    budget: dict[str, list[tuple[float, float]]] = {}
    emulated_all: dict[str, np.ndarray] = {}
    hidden = frozenset(conv.name for conv in layers if conv.name != model.graph.output)
    configs = [*CONFIGS, (FINAL_F32_ROW, replace(emu.ALL_SOURCES, layers=hidden))]
    for label, sources in configs:
        budget[label] = []
        for crop in crops:
            out = crop.emulate(sources)
            if sources == emu.ALL_SOURCES:
                emulated_all[crop.name] = out
            budget[label].append((rel_l2(out, crop.oidn), rel_l2(out, crop.fp32)))

    validation = []
    device = "the default adapter"
    if not args.no_wgpu:
        wgpu = Wgpu(model)
        measured = []
        try:
            for crop in crops:
                network = wgpu.host_processing(crop)
                differ = np.count_nonzero(network != emulated_all[crop.name])
                out, scale = wgpu.end_to_end(crop)
                measured.append((rel_l2(out, crop.oidn), rel_l2(out, crop.fp32)))
                same_scale = np.float32(scale) == np.float32(crop.input_scale)
                # the emulation with the GPU's own autoexposure where it differs in the last bits
                emulated = (
                    emulated_all[crop.name] if same_scale else crop.emulate(emu.ALL_SOURCES, scale)
                )
                validation.append(
                    [
                        crop.name,
                        f"{differ} of {network.size}",
                        fmt(rel_l2(emulated_all[crop.name], crop.oidn)),
                        fmt(rel_l2(out, crop.oidn)),
                        fmt(rel_l2(out, emulated)),
                        " / ".join(fmt(v) for v in crop.sensitivity()),
                    ]
                )
        finally:
            wgpu.close()
        device = wgpu.device
        budget[WGPU_ROW.format(device=device)] = measured

    per_layer = []
    input_row = [budget["(a) f16 network input"][i][1] for i in range(len(crops))]
    per_layer.append(["input pass (a)", "-", *(f"{fmt(v)} / -" for v in input_row)])
    for conv in layers:
        only = frozenset({conv.name})
        cells = []
        for crop in crops:
            stored = crop.emulate(emu.Fp16Sources(weights=True, storage=True, layers=only))
            summed = crop.emulate(emu.Fp16Sources(weights=True, partials=True, layers=only))
            cells.append(f"{fmt(rel_l2(stored, crop.fp32))} / {fmt(rel_l2(summed, crop.fp32))}")
        per_layer.append([conv.name, f"{share[conv.name]:.1%}", *cells])

    names = [crop.name for crop in crops]
    size = f"{crops[0].color.shape[1]}x{crops[0].color.shape[0]}"
    text = [
        f"{WEIGHTS}, hdr, albedo + normal, autoexposure; crops of {size} px "
        f"({', '.join(names)}); {datetime.date.today().isoformat()}, "
        f"{cpu_name()} ({os.cpu_count()} CPUs), NumPy {np.__version__}; "
        f"run time {time.perf_counter() - started:.0f} s.",
        "",
        "Relative L2 of the output: against Intel OIDN 2.5.1 CPU / against the fp32 emulation.",
        "",
        table(
            ["fp16 error sources on", *names],
            [
                [label] + [f"{fmt(o)} / {fmt(f)}" for o, f in values]
                for label, values in budget.items()
            ],
        ),
    ]
    if validation:
        text += [
            "",
            "The emulation against the wgpu fp16 path on the same adapter. Network: the wgpu "
            "network on NumPy's input processing, values that differ from the emulation. End to "
            "end (`oidn_gpu.Denoiser`, input and output processing on the GPU, autoexposure from "
            "the GPU): relative L2. Sensitivity: relative L2 change of the emulated fp16 and fp32 "
            "network output when one input value moves by one f16 step.",
            "",
            table(
                [
                    "crop",
                    "network: values that differ",
                    "emulated vs OIDN CPU",
                    "measured vs OIDN CPU",
                    "measured vs emulated",
                    "sensitivity fp16 / fp32",
                ],
                validation,
            ),
        ]
    text += [
        "",
        "One conv layer at a time in fp16 (every other layer and the input in fp32): relative "
        "L2 against the fp32 emulation with (c) that layer's output stored as f16 / (d) its "
        "products summed in f16 partials. MACs: the layer's share of the multiply-adds.",
        "",
        table(["layer", "MACs", *names], per_layer),
    ]
    markdown = "\n".join(text) + "\n"
    print(markdown)
    if args.out is not None:
        args.out.write_text(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
