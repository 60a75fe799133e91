"""Float64 NumPy references and a conv test harness for the kernel tests."""

from __future__ import annotations

import numpy as np

from oidn_gpu.kernels import weights as wpack
from oidn_gpu.kernels.spec import ConvSpec, Kernel, Precision, blocks
from tests.compare import rel_l2

from . import gpu_runner


def conv3x3(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``x [H, W, I]``, ``w [O, I, 3, 3]``, ``b [O]`` -> ``[H, W, O]`` in float64, zero pad 1."""
    x = np.asarray(x, np.float64)
    h, wd, _ = x.shape
    xp = np.pad(x, ((1, 1), (1, 1), (0, 0)))
    out = np.zeros((h, wd, w.shape[0])) + np.asarray(b, np.float64)
    w64 = np.asarray(w, np.float64)
    for ky in range(3):
        for kx in range(3):
            out += xp[ky : ky + h, kx : kx + wd] @ w64[:, :, ky, kx].T
    return out


def upsample2(x: np.ndarray) -> np.ndarray:
    return x.repeat(2, axis=0).repeat(2, axis=1)


def pool2(x: np.ndarray) -> np.ndarray:
    h, w, c = x.shape
    return x[: h // 2 * 2, : w // 2 * 2].reshape(h // 2, 2, w // 2, 2, c).max(axis=(1, 3))


def reference(spec: ConvSpec, srcs: list[np.ndarray], w: np.ndarray, b: np.ndarray) -> np.ndarray:
    xs = [upsample2(s) if src.upsample else s for s, src in zip(srcs, spec.sources, strict=True)]
    y = conv3x3(np.concatenate(xs, axis=2), w, b)
    if spec.relu:
        y = np.maximum(y, 0)
    if spec.pool:
        y = pool2(y)
    return y


def tolerance(precision: Precision) -> float:
    return 1e-5 if precision is Precision.FP32 else 2e-3


def make_case(spec: ConvSpec, height: int, width: int, rng: np.random.Generator):
    """Random sources (dense HWC), weights, bias, rounded to the spec's precision."""
    dt = spec.precision.numpy_dtype
    srcs = []
    for s in spec.sources:
        h, w = (height // 2, width // 2) if s.upsample else (height, width)
        srcs.append(rng.standard_normal((h, w, s.channels)).astype(dt).astype(np.float64))
    fan_in = 9 * spec.in_channels
    wt = rng.standard_normal((spec.out_channels, spec.in_channels, 3, 3)) / np.sqrt(fan_in)
    wt = wt.astype(dt).astype(np.float32)
    bias = (rng.standard_normal(spec.out_channels) * 0.1).astype(np.float32)
    return srcs, wt, bias


def run_conv(
    kernel: Kernel,
    spec: ConvSpec,
    srcs: list[np.ndarray],
    wt: np.ndarray,
    bias: np.ndarray,
    height: int,
    width: int,
) -> np.ndarray:
    """Run a conv-family kernel on dense inputs; return the dense ``[H_out, W_out, O]`` output."""
    packed = wpack.pack_conv(spec, wt, bias, kernel.weight_layout, kernel.parity_weights)
    inputs = {f"input{i}": wpack.pack_activation(s, spec.precision) for i, s in enumerate(srcs)}
    inputs["weights"] = packed.weights
    inputs["bias"] = packed.bias
    oh, ow = (height // 2, width // 2) if spec.pool else (height, width)
    out_dt = np.dtype(spec.out_precision.numpy_dtype)
    size = oh * ow * spec.out_blocks * 4 * out_dt.itemsize
    raw = gpu_runner.run(
        kernel,
        inputs,
        {"output": size},
        {"height": oh, "width": ow},
        (spec.out_channels, oh, ow),
    )["output"]
    data = np.frombuffer(raw, dtype=out_dt)
    return wpack.unpack_activation(data, spec.out_channels, oh, ow).astype(np.float64)


def check_conv(kernel: Kernel, spec: ConvSpec, height: int, width: int, rng, repeat: bool = False):
    srcs, wt, bias = make_case(spec, height, width, rng)
    got = run_conv(kernel, spec, srcs, wt, bias, height, width)
    ref = reference(spec, srcs, wt.astype(np.float64), bias)
    assert np.all(np.isfinite(got)), "non-finite output"
    err = rel_l2(got, ref)
    tol = tolerance(spec.precision)
    assert err <= tol, f"{kernel.key} {height}x{width}: relative L2 {err:.3g} > {tol}"
    if repeat:
        again = run_conv(kernel, spec, srcs, wt, bias, height, width)
        assert np.array_equal(got, again), "repeated run differs"
    return got


__all__ = [
    "blocks",
    "check_conv",
    "conv3x3",
    "make_case",
    "pool2",
    "reference",
    "rel_l2",
    "run_conv",
    "upsample2",
]
