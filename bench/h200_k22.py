"""dec_conv1a's K steps per source, and a frame graph launched without torch, on a GPU.

    python3 bench/h200_k22.py OUT.json

1. For the default network at 1280x720 and 1920x1088, `dec_conv1a` (the 2x2-parity decoder
   conv: the upsampled 64 channels, then the network input's 16 channels over 9 taps) alone,
   a CUDA graph of 10 launches, median of 30 replays: the shipped tile with other K tiles
   for each source (`tuning.block_k_for` overridden per stored channel count: the upsampled
   source's chunk, the input's taps per K step) and other stages; each output against the
   shipped form's, bit for bit.
2. At 720p, the benchmark's end-to-end setup: host time of a render loop's call (median of
   300, after a GPU sleep) and `e2e GPU` (median of 100 CUDA-event pairs, the benchmark's
   timing) with the frame graph replayed by torch (`CUDAGraph.replay`) and launched
   directly (`cudaGraphLaunch` on `raw_cuda_graph_exec`, through ctypes), alternating.
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
import time

import torch

from oidn_gpu.backends.cuda import bench as cuda_bench
from oidn_gpu.backends.cuda import executor as cuda_executor
from oidn_gpu.backends.cuda.bench import _graph_of, _time_events
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.backends.cuda.tuning import TileConfig, block_k_for
from oidn_gpu.model.weights import load_builtin

SLEEP = 3_000_000
# (name, tile, chunk of the 64-channel upsampled source, K of the 16-channel input)
VARIANTS = [
    ("shipped", None, None, None),
    ("a64", None, 64, None),
    ("b16", None, None, 16),
    ("b64", None, None, 64),
    ("a64_b64", None, 64, 64),
    ("a64_b16", None, 64, 16),
    ("s4", TileConfig(128, 64, 32, 4, 4), None, None),
    ("a64_s4", TileConfig(128, 64, 32, 4, 4), 64, None),
    ("w8_256", TileConfig(256, 64, 32, 8, 3), None, None),
    ("a64_w8_256", TileConfig(256, 64, 32, 8, 3), 64, None),
    ("shipped_again", None, None, None),
]


def _k_override(a_chunk, b_k):
    def pick(block_k, channels):
        if channels == 64 and a_chunk is not None:
            return a_chunk, 1
        if channels == 16 and b_k is not None:
            return b_k, b_k // 16
        return block_k_for(block_k, channels)
    return pick


def _dec_conv1a(rows):
    ex = CudaExecutor(load_builtin("rt_hdr_alb_nrm"), precision="fp16", engine="triton",
                      tune=False, bridge=False)  # fmt: skip
    for height, width in ((720, 1280), (1088, 1920)):
        prep = ex.prepare(height, width)
        x = ex.input_view(prep, height, width)
        torch.manual_seed(0)
        x.copy_(torch.rand(x.shape, device="cuda").to(x.dtype))
        x[..., ex.input_channels:] = 0
        ex.forward(x, prep=prep)
        torch.cuda.synchronize()
        step = next(s for s in ex.steps if getattr(s, "name", "") == "dec_conv1a")
        shipped = prep.configs["dec_conv1a"]
        target = ex._raw_target(prep)
        row = {"size": [height, width], "shipped": shipped.describe(), "ms": {}, "same": {}}
        base = None
        for name, tile, a_chunk, b_k in VARIANTS:
            cuda_executor.block_k_for = _k_override(a_chunk, b_k)
            prep.configs["dec_conv1a"] = tile or shipped
            try:
                def call(ex=ex, prep=prep, step=step, target=target):
                    ex.launch_step(prep, step, target)
                call()
                got = prep.views[step.value].clone()
                graph = _graph_of(torch, call, 10)
                row["ms"][name] = statistics.median(_time_events(torch, graph.replay, 30, 3)) / 10
                base = got if base is None else base
                row["same"][name] = bool(torch.equal(got.view(torch.int16), base.view(torch.int16)))
            except Exception as error:
                row["ms"][name] = repr(error)[:200]
            finally:
                cuda_executor.block_k_for = block_k_for
                prep.configs["dec_conv1a"] = shipped
        print(json.dumps(row), flush=True)
        rows.append(row)
    ex.close()


def _cudart():
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "libcudart" in line}
    lib = ctypes.CDLL(sorted(paths)[0])
    lib.cudaGraphLaunch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.cudaGraphLaunch.restype = ctypes.c_int
    return lib, sorted(paths)[0]


def _host_us(fn, runs: int = 300) -> float:
    times = []
    for _ in range(runs):
        torch.cuda._sleep(SLEEP)
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def _launch(rows):
    ex = CudaExecutor(load_builtin("rt_hdr_alb_nrm"), precision="fp16", engine="triton",
                      tune=False, bridge=False)  # fmt: skip
    _, images, out, mode, plan = cuda_bench.e2e_inputs(torch, ex, ex.model, 720, 1280)
    denoiser = CudaDenoiser(ex)

    def call():
        denoiser.denoise_tensors(*images, mode=mode, plan=plan, out=out, autoexposure=True)

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    graph = denoiser._replay[1].graph
    lib, path = _cudart()
    handle = ctypes.c_void_p(graph.raw_cuda_graph_exec())
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def raw():
        if lib.cudaGraphLaunch(handle, stream) != 0:
            raise RuntimeError("cudaGraphLaunch failed")

    expected = out.clone()
    out.fill_(float("nan"))
    raw()
    torch.cuda.synchronize()
    row = {"cudart": path.rsplit("/", 1)[-1], "same_image": bool(torch.equal(out, expected))}
    for key, fn in (("call", call), ("replay", graph.replay), ("raw", raw)) * 2:
        row.setdefault("host_us", {}).setdefault(key, []).append(_host_us(fn))
    for key, fn in (("call", call), ("raw", raw)) * 3:
        ms = statistics.median(_time_events(torch, fn, 100, 10))
        row.setdefault("e2e_gpu_ms", {}).setdefault(key, []).append(ms)
    print(json.dumps(row), flush=True)
    rows.append(row)
    denoiser.close()
    ex.close()


def _host_parts(rows):
    """Where a render loop's call spends its host time: cProfile of 300 calls, and the call
    with its graph launched directly (`_replay_again` patched), against the plain call."""
    import cProfile
    import io
    import pstats

    ex = CudaExecutor(load_builtin("rt_hdr_alb_nrm"), precision="fp16", engine="triton",
                      tune=False, bridge=False)  # fmt: skip
    _, images, out, mode, plan = cuda_bench.e2e_inputs(torch, ex, ex.model, 720, 1280)
    denoiser = CudaDenoiser(ex)

    def call():
        denoiser.denoise_tensors(*images, mode=mode, plan=plan, out=out, autoexposure=True)

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    graph = denoiser._replay[1].graph
    lib, _ = _cudart()
    handle = ctypes.c_void_p(graph.raw_cuda_graph_exec())
    get_stream = torch._C._cuda_getCurrentRawStream
    index = torch.cuda.current_device()
    plain = CudaDenoiser._replay_again

    def direct(self, frame):
        self.executor.last_engine = self.executor.engine
        if lib.cudaGraphLaunch(handle, ctypes.c_void_p(get_stream(index))) != 0:
            raise RuntimeError("cudaGraphLaunch failed")
        return frame

    row = {"parts_us": {}}
    t = {"stream": lambda: get_stream(index), "current_stream": torch.cuda.current_stream,
         "find": lambda: denoiser._last_request.find((*images, out), (mode, plan, None, True)),
         "data_ptr": images[0].data_ptr, "stride": images[0].stride,
         "shape": lambda: images[0].shape}
    for key, fn in t.items():
        t0 = time.perf_counter()
        for _ in range(1000):
            fn()
        row["parts_us"][key] = (time.perf_counter() - t0) * 1e3
    for form in ("plain", "direct") * 3:
        CudaDenoiser._replay_again = plain if form == "plain" else direct
        row.setdefault("host_us", {}).setdefault(form, []).append(_host_us(call))
        ms = statistics.median(_time_events(torch, call, 100, 10))
        row.setdefault("e2e_gpu_ms", {}).setdefault(form, []).append(ms)
    CudaDenoiser._replay_again = plain
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(300):
        call()
    profile.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(15)
    row["profile"] = text.getvalue()[-3000:]
    print(json.dumps({k: v for k, v in row.items() if k != "profile"}), flush=True)
    print(row["profile"], flush=True)
    rows.append(row)
    denoiser.close()
    ex.close()


def main(out_path: str, *_: str) -> None:
    rows: list = []
    if len(sys.argv) > 2 and sys.argv[2] == "host":
        _host_parts(rows)
    else:
        _dec_conv1a(rows)
        _launch(rows)
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
