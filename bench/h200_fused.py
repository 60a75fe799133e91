"""The CUDA backend's fused network tail on the H200: tile sweep, accuracy, benchmarks.

    source .device/setup.sh && python3 bench/h200_fused.py [sweep|final] 2>&1 | tee $OUT/log.txt

``sweep``: times the fused tail's tile candidates at 1080p against the per-layer
``dec_conv1b`` + ``dec_conv0`` kernels, checks the fused kernel against the per-layer path
(1080p, 4K, odd sizes) and the reference backend, reads the generated code for wgmma, then
benchmarks 1080p, 720p, 4K and 1080p fast with the fastest tile (and 1080p per-layer).
Writes JSON under $OUT.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time

import numpy as np
import torch

import oidn_gpu
from oidn_gpu.backends.cuda import bench as cbench
from oidn_gpu.backends.cuda import executor as exm
from oidn_gpu.backends.cuda import fusion
from oidn_gpu.backends.cuda import fused_kernels, tuning
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.model.weights import load_builtin

OUT = os.environ.get("OUT", "/tmp/out")
SWEEP = [
    (16, 32, 128, 64, 64, 4, 2, 4),
    (16, 16, 128, 64, 64, 4, 2, 4),
    (16, 32, 256, 64, 64, 8, 2, 2),
    (32, 32, 256, 64, 64, 8, 2, 2),
    (16, 32, 128, 128, 64, 4, 2, 4),
    (16, 64, 256, 64, 64, 8, 2, 2),
    (16, 32, 128, 64, 64, 4, 3, 4),
    (8, 64, 128, 64, 64, 4, 2, 4),
    (32, 32, 128, 64, 64, 4, 2, 3),
    (16, 32, 64, 64, 64, 4, 2, 6),
]


def save(log: dict) -> None:
    with open(os.path.join(OUT, "fused.json"), "w") as f:
        json.dump(log, f, indent=1, default=str)


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def graph_ms(fn, repeat: int = 10, runs: int = 30) -> float:
    graph = cbench._graph_of(torch, fn, repeat)
    return statistics.median(cbench._time_events(torch, graph.replay, runs, 3)) / repeat


def network_input(ex, height, width, seed):
    prep = ex.prepare(height, width)
    x = ex.input_view(prep, height, width)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x.copy_(torch.rand(x.shape, device="cuda", generator=gen).to(x.dtype))
    x[..., ex.input_channels :] = 0
    return prep, x


PROJECT_TILES = [
    (128, 32, 32, 4, 3),
    (128, 32, 64, 4, 3),
    (64, 32, 64, 4, 3),
    (256, 32, 64, 8, 3),
    (128, 32, 128, 4, 3),
    (128, 32, 64, 4, 4),
    (64, 32, 32, 4, 4),
]


def layer_times(model, log, tag):
    layers = CudaExecutor(model, engine="triton", bridge=False, tune=False, fused=False)
    prep, x = network_input(layers, 1088, 1920, 1)
    layers.forward(x, prep=prep)
    target = layers._raw_target(prep)
    out = {
        launch.name: graph_ms(lambda launch=launch: layers.launch_step(prep, launch, target))
        for launch in layers.launches[-2:]
    }
    log[f"{tag}_per_layer_ms"] = out
    print(tag, "per-layer", out, "sum", sum(out.values()), flush=True)
    layers.close()
    return sum(out.values())


def sweep(model, log, tag, tiles):
    """Times of the fused tail's modes and tiles at 1080p; returns (z_fp32, tile) of the best."""
    layer_times(model, log, tag)
    results = {}
    for z_fp32 in (True, False):
        fusion.TAIL_Z_FP32 = z_fp32
        fused = CudaExecutor(model, engine="triton", bridge=False, tune=False, fused="project")
        prep, x = network_input(fused, 1088, 1920, 1)
        fused.forward(x, prep=prep)
        target = fused._raw_target(prep)
        key = tuning.project_signature(fused.tail.hidden)
        for shape in tiles:
            prep.configs[key] = tuning.TileConfig(*shape)
            try:
                ms = graph_ms(lambda: fused.launch_step(prep, fused.tail, target))
            except Exception as err:
                print("project", shape, "failed", type(err).__name__, str(err)[:200])
                continue
            results[(z_fp32, shape)] = ms
            print(f"{tag} project z32={z_fp32} {shape} {ms:.4f} ms", flush=True)
        fused.close()
    tail = CudaExecutor(model, engine="triton", bridge=False, tune=False, fused="tail")
    prep, x = network_input(tail, 1088, 1920, 1)
    tail.forward(x, prep=prep)
    target = tail._raw_target(prep)
    log[f"{tag}_tail_ms"] = graph_ms(lambda: tail.launch_step(prep, tail.tail, target))
    print(tag, "tail", prep.tail.describe(), log[f"{tag}_tail_ms"], flush=True)
    tail.close()
    log[f"{tag}_project_ms"] = {str(k): v for k, v in results.items()}
    best = min(results, key=results.get)
    print(tag, "best", best, results[best], flush=True)
    return best


def wgmma_check() -> dict:
    out = {}
    kernels = (fused_kernels.conv_tail_kernel, fused_kernels.conv_project_kernel,
               fused_kernels.tap_sum_kernel)  # fmt: skip
    for fn in kernels:
        for device_cache in fn.device_caches.values():
            for index, kernel in enumerate(device_cache[0].values()):
                asm = getattr(kernel, "asm", {})
                out[f"{fn.fn.__name__}.{index}"] = {
                    "ttgir_warp_group_dot": asm.get("ttgir", "").count("warp_group_dot "),
                    "ptx_wgmma": asm.get("ptx", "").count("wgmma.mma_async"),
                    "ptx_mma_sync": asm.get("ptx", "").count("mma.sync"),
                    "n_regs": getattr(kernel, "n_regs", None),
                    "n_spills": getattr(kernel, "n_spills", None),
                    "shared": kernel.metadata.shared if hasattr(kernel, "metadata") else None,
                }
    print("codegen", json.dumps(out)[:1500], flush=True)
    return out


def accuracy(model, precision, sizes, log, mode) -> None:
    fused = CudaExecutor(model, engine="triton", bridge=False, tune=False, fused=mode,
                         precision=precision)  # fmt: skip
    layers = CudaExecutor(model, engine="triton", bridge=False, tune=False, fused=False,
                          precision=precision)  # fmt: skip
    for height, width in sizes:
        prep_f, x_f = network_input(fused, height, width, height + width)
        prep_l, x_l = network_input(layers, height, width, height + width)
        assert torch.equal(x_f, x_l)
        outs = []
        for _ in range(2):  # twice: a race would move the error
            fused.prepare(height, width).views[fused.graph.output].fill_(float("nan"))
            outs.append(fused.forward(x_f, prep=prep_f).clone())
        ref = layers.forward(x_l, prep=prep_l)
        key = f"{mode} {precision} {height}x{width}"
        log[key] = {
            "fused_vs_layers_rel_l2": rel(outs[0].cpu(), ref.cpu()),
            "fused_vs_layers_max_abs": float((outs[0] - ref).abs().max()),
            "fused_run_to_run_equal": bool(torch.equal(outs[0], outs[1])),
            "finite": bool(torch.isfinite(outs[0]).all()),
        }
        if height * width <= 256 * 256:
            host = x_f[..., : fused.input_channels].permute(2, 0, 1).float().cpu().numpy()
            expected = ReferenceExecutor(model).run(host)
            log[key]["fused_vs_reference"] = rel(outs[0].permute(2, 0, 1).cpu(), expected)
            log[key]["layers_vs_reference"] = rel(ref.permute(2, 0, 1).cpu(), expected)
        print(key, log[key], flush=True)
    fused.close()
    layers.close()


def benches(log) -> None:
    rows = [
        ("1080p", (1080, 1920), "rt_hdr_alb_nrm", "project", 100),
        ("1080p_layers", (1080, 1920), "rt_hdr_alb_nrm", "off", 100),
        ("1080p_tail", (1080, 1920), "rt_hdr_alb_nrm", "tail", 100),
        ("720p", (720, 1280), "rt_hdr_alb_nrm", "project", 100),
        ("4k", (2160, 3840), "rt_hdr_alb_nrm", "project", 60),
        ("4k_layers", (2160, 3840), "rt_hdr_alb_nrm", "off", 60),
        ("fast", (1080, 1920), "rt_hdr_alb_nrm_small", "project", 100),
        ("fast_layers", (1080, 1920), "rt_hdr_alb_nrm_small", "off", 100),
    ]
    for name, size, weights, fused, runs in rows:
        os.environ[exm.FUSED_ENV_VAR] = fused
        result = cbench.run_bench(size=size, weights=weights, runs=runs, host_runs=5)
        print(f"== {name}\n{result.table()}", flush=True)
        log[f"bench_{name}"] = {
            k: v for k, v in dataclasses.asdict(result).items()
            if not k.endswith("_ms") or not isinstance(v, (list, tuple))
        }  # fmt: skip
        save(log)
    os.environ.pop(exm.FUSED_ENV_VAR)


def main() -> None:
    print(oidn_gpu.__file__, torch.__version__, torch.cuda.get_device_name(), flush=True)
    import triton

    print("triton", triton.__version__, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    log: dict = {}
    model = load_builtin("rt_hdr_alb_nrm")
    try:
        for weights, tiles in (("rt_hdr_alb_nrm", PROJECT_TILES),
                               ("rt_hdr_alb_nrm_small", PROJECT_TILES[:4])):  # fmt: skip
            net = load_builtin(weights)
            z_fp32, tile = sweep(net, log, weights, tiles)
            hidden = CudaExecutor(net, engine="triton", bridge=False, tune=False).tail.hidden
            tuning.SHIPPED_TILES[(9, 0)][tuning.project_signature(hidden)] = tile
            log[f"{weights}_best"] = (z_fp32, tile)
            if weights == "rt_hdr_alb_nrm":
                fusion.TAIL_Z_FP32 = z_fp32
        save(log)
        log["wgmma"] = wgmma_check()
        for mode in ("project", "tail"):
            accuracy(model, "fp16", [(1088, 1920), (2160, 3840), (736, 1264), (144, 208)], log,
                     mode)  # fmt: skip
            accuracy(model, "bf16", [(1088, 1920), (144, 208)], log, mode)
            save(log)
        log["wgmma"] = wgmma_check()
        benches(log)
    finally:
        save(log)


if __name__ == "__main__":
    main()
