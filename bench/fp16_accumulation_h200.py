"""The fp16 accumulations on a GPU: 1080p speed per layer and distance to Intel OIDN CPU.

Two steps (the GPU machine has no OpenEXR reader and no pyoidn):

    # here: the scene crops of tests/data/scenes and full-size frames of an inputs .npz
    # (bench/fp16_frames.py export), stored as float16 (OIDN CPU denoises those same
    # values here), with OIDN 2.5.1 CPU's outputs, in one .npz
    python bench/fp16_accumulation_h200.py export --frames inputs.npz caustics --to acc.npz
    # on the GPU: for each candidate of CANDIDATES (the large-GPU fp16 GEMM options with
    # its accumulations), `run_bench` at 1080p (network and e2e GPU medians, per-layer
    # times) and `oidn_gpu.Denoiser` (hdr, autoexposure) on every image of acc.npz
    python bench/fp16_accumulation_h200.py run --data acc.npz --out DIR [--budget-s 110]

``run`` prints one JSON line per candidate (and appends it to DIR/results.jsonl), then a
table. A candidate's per-layer times let a per-layer mix be summed from several rows.
When the data has no OIDN outputs (``export --inputs-only``: a smaller file to carry), ``run``
saves each candidate's denoised images in DIR/outputs_<n>.npz instead, and ``compare`` (here)
measures them against OIDN CPU:

    python bench/fp16_accumulation_h200.py compare --data acc.npz --results DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

LARGE = {"tile_policy": "balanced", "shared_load": "pair", "shared_layout": "padded"}
F32_ENDS = {"input_accumulation": "f32", "final_accumulation": "f32"}
F32_FINAL = {"final_accumulation": "f32"}
# (name, GEMM options over LARGE), most important first (a budget may stop the list)
CANDIDATES = (
    ("f16-partials", {"accumulation": "f16-partials"}),
    ("f16-pairs+f32-ends", {"accumulation": "f16-pairs", **F32_ENDS}),
    ("f16-lanes+f32-ends", {"accumulation": "f16-lanes", **F32_ENDS}),
    ("f16-chains16+f32-ends", {"accumulation": "f16-chains16", **F32_ENDS}),
    (
        "f16-pairs, first conv f16-chains, final f32 (padded patch, 2 pixels)",
        {
            "accumulation": "f16-pairs",
            "input_accumulation": "f16-chains",
            **F32_FINAL,
            "final_patch": "padded",
            "final_pixels": 2,
        },
    ),
    (
        "f16-lanes, first conv f16-chains16, final f32 (padded patch)",
        {
            "accumulation": "f16-lanes",
            "input_accumulation": "f16-chains16",
            **F32_FINAL,
            "final_patch": "padded",
        },
    ),
    ("f16-pairs", {"accumulation": "f16-pairs"}),
    ("f16-chains", {"accumulation": "f16-chains"}),
    ("f16-lanes, 4 rows", {"accumulation": "f16-lanes", "rows_per_thread": 4}),
    ("f16-pairs, 4 rows", {"accumulation": "f16-pairs", "rows_per_thread": 4}),
    ("f32", {"accumulation": "f32"}),
)
FINAL_2PX = {**F32_FINAL, "final_patch": "padded", "final_pixels": 2}
# The second call: the cheap per-layer mixes measured whole, final-layer variants, chains16 tiles
CANDIDATES2 = (
    ("f16-partials+f32-final (padded, 2 px)", {"accumulation": "f16-partials", **FINAL_2PX}),
    (
        "f16-partials, first conv f16-chains16, f32 final (padded, 2 px)",
        {"accumulation": "f16-partials", "input_accumulation": "f16-chains16", **FINAL_2PX},
    ),
    (
        "f16-partials+f32-final (padded, 4 px)",
        {"accumulation": "f16-partials", **F32_FINAL, "final_patch": "padded", "final_pixels": 4},
    ),
    (
        "f16-partials+f32-final (shared input only, padded, 2 px)",
        {"accumulation": "f16-partials", **FINAL_2PX, "final_layer": "shared-input"},
    ),
    (
        "f16-partials, first conv f16-chains, f32 final (padded, 2 px)",
        {"accumulation": "f16-partials", "input_accumulation": "f16-chains", **FINAL_2PX},
    ),
    ("f16-chains16+f32-final (padded, 2 px)", {"accumulation": "f16-chains16", **FINAL_2PX}),
    ("f16-chains16, K tile 16", {"accumulation": "f16-chains16", "k_tile": 16}),
    ("f16-chains16, 2 cols", {"accumulation": "f16-chains16", "cols_per_thread": 2}),
    ("f16-partials (again)", {"accumulation": "f16-partials"}),
)
PARITY = {"decoder_form": "parity"}
# The third call: the decoder convs' parity form with the accurate sums (final layer in f32)
CANDIDATES3 = (
    (
        "f16-partials+f32-final (the default, full form)",
        {"accumulation": "f16-partials", **FINAL_2PX},
    ),
    ("parity, f16-partials+f32-final", {**PARITY, "accumulation": "f16-partials", **FINAL_2PX}),
    ("parity, f16-chains16+f32-final", {**PARITY, "accumulation": "f16-chains16", **FINAL_2PX}),
    ("parity, f16-pairs+f32-final", {**PARITY, "accumulation": "f16-pairs", **FINAL_2PX}),
    ("parity, f32", {**PARITY, "accumulation": "f32", **FINAL_2PX}),
    ("parity, f16-chains+f32-final", {**PARITY, "accumulation": "f16-chains", **FINAL_2PX}),
    ("parity, f16-lanes+f32-final", {**PARITY, "accumulation": "f16-lanes", **FINAL_2PX}),
    (
        "parity, f16-chains16, f32 first and final",
        {**PARITY, "accumulation": "f16-chains16", **FINAL_2PX, "input_accumulation": "f32"},
    ),
    ("f16-chains16+f32-final (full form)", {"accumulation": "f16-chains16", **FINAL_2PX}),
    (
        "parity, f16-chains16, 4 rows",
        {**PARITY, "accumulation": "f16-chains16", **FINAL_2PX, "rows_per_thread": 4},
    ),
    ("f16-partials+f32-final (the default, again)", {"accumulation": "f16-partials", **FINAL_2PX}),
)
# The fourth call: the parity form with the first and final layers in f32
PARITY_ENDS = {**PARITY, **FINAL_2PX, "input_accumulation": "f32"}
CANDIDATES4 = (
    ("parity, f16-chains16, f32 first and final", {**PARITY_ENDS, "accumulation": "f16-chains16"}),
    ("parity, f16-pairs, f32 first and final", {**PARITY_ENDS, "accumulation": "f16-pairs"}),
    ("parity, f16-lanes, f32 first and final", {**PARITY_ENDS, "accumulation": "f16-lanes"}),
    ("parity, f16-chains, f32 first and final", {**PARITY_ENDS, "accumulation": "f16-chains"}),
)
IMAGES = ("color_4spp", "albedo", "normal")
CROPS = ("cornell_diffuse", "cornell_glossy", "dim_indirect", "textured_checker", "caustics")


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a64 - b64) / np.linalg.norm(b64))


def export(frames_npz: Path | None, frames: list[str], to: Path, inputs_only: bool = False) -> None:
    """The crops and ``frames`` (float16 values) with OIDN CPU's outputs, in one .npz
    (``inputs_only``: without them)."""
    from tests.datasets import scene_crop
    from tests.oracle import oidn_denoise

    sets = {f"crop_{name}": scene_crop(name) for name in CROPS}
    if frames:
        data = np.load(frames_npz)
        for frame in frames:
            sets[f"frame_{frame}"] = {i: data[f"{frame}.{i}"] for i in IMAGES}
    arrays = {}
    for key, images in sets.items():
        kept = [np.asarray(images[i], np.float16).astype(np.float32) for i in IMAGES]
        oidn = oidn_denoise(*kept, hdr=True)  # the arrays stay alive until it returns
        for name, image in zip(IMAGES, kept, strict=True):
            arrays[f"{key}.{name}"] = image.astype(np.float16)
        if not inputs_only:
            arrays[f"{key}.oidn"] = np.asarray(oidn, np.float32)
        print(key, kept[0].shape, flush=True)
    np.savez_compressed(to, **arrays)


def _accuracy(data, gemm: dict, device_handle, save: Path | None = None) -> dict[str, float]:
    """Distances to OIDN CPU per image of ``data`` (NaN without its OIDN output; the
    denoised images go to ``save`` then)."""
    from oidn_gpu import Denoiser

    keys = sorted({k.rsplit(".", 1)[0] for k in data.files})
    out = {}
    saved = {}
    with Denoiser(
        hdr=True, backend="wgpu", precision="fp16", gemm=gemm, device=device_handle
    ) as denoiser:
        for key in keys:
            images = [np.ascontiguousarray(data[f"{key}.{i}"], np.float32) for i in IMAGES]
            result = denoiser.denoise(images[0], albedo=images[1], normal=images[2])
            if f"{key}.oidn" in data.files:
                out[key] = rel_l2(result, data[f"{key}.oidn"])
            else:
                out[key], saved[key] = float("nan"), np.asarray(result, np.float32)
    if saved and save is not None:
        np.savez_compressed(save, **saved)
    return out


def compare(data_path: Path, results: Path) -> None:
    """Fill in the distances of ``results``/results.jsonl from its saved outputs."""
    data = np.load(data_path)
    rows = [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]
    for n, row in enumerate(rows):
        outputs = np.load(results / f"outputs_{n}.npz")
        row["rel_l2_vs_oidn_cpu"] = {
            key: rel_l2(outputs[key], data[f"{key}.oidn"]) for key in outputs.files
        }
    (results / "results_compared.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(table(rows))


def run(
    data_path: Path,
    out: Path,
    budget_s: float,
    runs: int,
    size: tuple[int, int],
    first: int,
    candidates: tuple = CANDIDATES,
) -> None:
    from oidn_gpu.backends.wgpu.bench import run_bench
    from oidn_gpu.backends.wgpu.command_timer import open_timed_device
    from oidn_gpu.backends.wgpu.executor import WgpuExecutor
    from oidn_gpu.kernels.gemm import GemmOptions
    from oidn_gpu.model.weights import load_builtin

    out.mkdir(parents=True, exist_ok=True)
    data = np.load(data_path)
    model = load_builtin("rt_hdr_alb_nrm")
    device = open_timed_device()
    started = time.perf_counter()
    rows = []
    for name, extra in candidates[:first]:
        if time.perf_counter() - started > budget_s:
            print(f"budget of {budget_s} s spent: {name} and the rest not run", flush=True)
            break
        t0 = time.perf_counter()
        gemm = {**LARGE, **extra}
        executor = WgpuExecutor(
            model, device=device, precision="fp16", gemm=GemmOptions(**gemm), shape_cache_size=1
        )
        try:
            result = run_bench(executor=executor, size=size, runs=runs, warmup=3)
        finally:
            executor.close()
        row = {
            "name": name,
            "gemm": gemm,
            "device": result.device,
            "network_gpu_ms": result.network_gpu_median_ms,
            "e2e_gpu_ms": result.e2e_gpu_median_ms,
            "layers_ms": {layer.name: layer.median_ms for layer in result.layers},
            "compile_s": round(result.compile_s, 2),
        }
        save = out / f"outputs_{len(rows)}.npz"
        row["rel_l2_vs_oidn_cpu"] = _accuracy(data, gemm, device.handle, save)
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        line = json.dumps(row)
        print(line, flush=True)
        with open(out / "results.jsonl", "a") as f:
            f.write(line + "\n")
    print(table(rows))


def table(rows: list[dict]) -> str:
    if not rows:
        return ""
    keys = list(rows[0]["rel_l2_vs_oidn_cpu"])
    head = ["candidate", "net ms", "e2e ms", *keys]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["name"], f"{r['network_gpu_ms']:.2f}", f"{r['e2e_gpu_ms']:.2f}"]
        cells += [f"{r['rel_l2_vs_oidn_cpu'][k]:.3e}" for k in keys]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export")
    ex.add_argument("--frames", nargs="*", default=[], help="inputs.npz, then frame names")
    ex.add_argument("--to", type=Path, required=True)
    ex.add_argument("--inputs-only", action="store_true", help="without OIDN's outputs")
    cp = sub.add_parser("compare")
    cp.add_argument("--data", type=Path, required=True)
    cp.add_argument("--results", type=Path, required=True)
    rn = sub.add_parser("run")
    rn.add_argument("--data", type=Path, required=True)
    rn.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    rn.add_argument("--budget-s", type=float, default=110.0)
    rn.add_argument("--runs", type=int, default=15)
    rn.add_argument("--size", default="1080x1920", help="HEIGHTxWIDTH")
    rn.add_argument("--first", type=int, default=99, help="run the first N candidates")
    rn.add_argument("--set", type=int, choices=(1, 2, 3, 4), default=1, help="CANDIDATES<N>")
    args = parser.parse_args(argv)
    if args.command == "export":
        frames_npz = Path(args.frames[0]) if args.frames else None
        export(frames_npz, args.frames[1:], args.to, args.inputs_only)
    elif args.command == "compare":
        compare(args.data, args.results)
    else:
        height, width = (int(v) for v in args.size.split("x"))
        candidates = {1: CANDIDATES, 2: CANDIDATES2, 3: CANDIDATES3, 4: CANDIDATES4}[args.set]
        run(args.data, args.out, args.budget_s, args.runs, (height, width), args.first, candidates)
    return 0


if __name__ == "__main__":
    sys.exit(main())
