"""Input pack/unpack and the denoise input/output passes vs NumPy (oidn-semantics 4, 5)."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import transfer as tf
from oidn_gpu.kernels import io_passes as io
from oidn_gpu.kernels import weights as wpack
from oidn_gpu.kernels.spec import FRAME_PARAMS, BindingKind, Kernel, Precision

from . import gpu_runner

pytestmark = pytest.mark.gpu

FLT_MAX = np.finfo(np.float32).max

# The transfer functions run on the GPU's exp/log/pow. WGSL only promises exp and exp2
# to 3 + 2|x| ULP, log2 to 2^-21 absolute near 1, and pow as exp2(y * log2(x)) (WGSL
# spec, "Floating Point Accuracy"): for the Log inverse (exp of up to 11) and the PU
# inverse (pow with exponent 2.32) that is a few 1e-6 relative on hardware drivers
# (lavapipe is closer to NumPy's correctly rounded results). Wrong constants or formulas
# miss by far more than this.
GPU_TRANSFER_RTOL = 2e-5


@pytest.mark.parametrize("precision", [Precision.FP32, Precision.FP16], ids=lambda p: p.value)
def test_pack_unpack_roundtrip(precision: Precision, rng) -> None:
    h, w, c = 5, 7, 9
    x = rng.standard_normal((h, w, c)).astype(np.float32)
    packed = gpu_runner.run(
        io.generate_input_pack(io.PackSpec(c, precision)),
        {"source": x},
        {"output": h * w * 12 * precision.itemsize},
        {"height": h, "width": w},
        (c, h, w),
    )["output"]
    expect = wpack.pack_activation(x, precision)
    np.testing.assert_array_equal(np.frombuffer(packed, precision.numpy_dtype), expect)
    dense = gpu_runner.run(
        io.generate_output_unpack(io.PackSpec(c, precision)),
        {"input": expect},
        {"output": h * w * c * 4},
        {"height": h, "width": w},
        (c, h, w),
    )["output"]
    np.testing.assert_array_equal(
        np.frombuffer(dense, np.float32).reshape(h, w, c), x.astype(precision.numpy_dtype)
    )


def _run_pass(
    kernel: Kernel,
    inputs: dict[str, np.ndarray],
    outputs: dict[str, int],
    params: dict[str, float],
    frames: list[dict[str, float]],
    grid_shape: tuple[int, int, int],
    output_init: dict[str, np.ndarray] | None = None,
) -> list[dict[str, bytes]]:
    """Run an io pass once per frame, all with ONE bind group (per-tile ``params``).

    Between runs only the ``frame`` uniform is rewritten with ``queue.write_buffer``,
    as `GpuDenoiser` and a program replay do; the read-write buffers are reset.
    """
    import wgpu

    dev = gpu_runner.device()
    pipeline = gpu_runner.compile_kernel(kernel)
    usage_rw = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    init: dict[str, bytes] = {}
    buffers = {}
    for b in kernel.bindings:
        if b.name == "frame":
            buffers[b.name] = dev.create_buffer(
                size=FRAME_PARAMS.size, usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
            )
        elif b.kind is BindingKind.UNIFORM:
            buffers[b.name] = dev.create_buffer_with_data(
                data=kernel.pack_params(**params), usage=wgpu.BufferUsage.UNIFORM
            )
        elif b.kind is BindingKind.STORAGE_READ:
            raw = np.ascontiguousarray(inputs[b.name]).tobytes()
            buffers[b.name] = dev.create_buffer_with_data(
                data=raw + bytes(-len(raw) % 16), usage=wgpu.BufferUsage.STORAGE
            )
        else:
            size = outputs[b.name]
            padded = size + (-size) % 16
            raw = b""
            if output_init and b.name in output_init:
                raw = np.ascontiguousarray(output_init[b.name]).tobytes()
            init[b.name] = raw + bytes(padded - len(raw))
            buffers[b.name] = dev.create_buffer(size=padded, usage=usage_rw)
    group = dev.create_bind_group(
        layout=pipeline.get_bind_group_layout(0),
        entries=[
            {
                "binding": b.index,
                "resource": {"buffer": buffers[b.name], "offset": 0, "size": buffers[b.name].size},
            }
            for b in kernel.bindings
        ],
    )
    results = []
    for frame in frames:
        dev.queue.write_buffer(buffers["frame"], 0, FRAME_PARAMS.pack(**frame))
        for name, raw in init.items():
            dev.queue.write_buffer(buffers[name], 0, raw)
        encoder = dev.create_command_encoder()
        cpass = encoder.begin_compute_pass()
        cpass.set_pipeline(pipeline)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups(*kernel.grid(*grid_shape))
        cpass.end()
        dev.queue.submit([encoder.finish()])
        results.append({n: bytes(dev.queue.read_buffer(buffers[n]))[: outputs[n]] for n in outputs})
    return results


def _frame(input_scale: float) -> dict[str, float]:
    s = np.float32(input_scale)
    return {"input_scale": float(s), "output_scale": float(np.float32(1) / s) if s else 0.0}


@pytest.mark.parametrize(
    "kernel",
    [
        io.generate_input_pass(io.InputPassSpec(tuple(io.ImageRole), Precision.FP32)),
        io.generate_input_pass(io.InputPassSpec((io.ImageRole.MAIN,), Precision.FP16)),
        io.generate_output_pass(io.OutputPassSpec()),
    ],
    ids=["input-3img", "input-1img", "output"],
)
def test_scales_are_in_the_frame_uniform_after_params(kernel: Kernel) -> None:
    names = kernel.binding_names
    assert names[-2:] == ("params", "frame")
    frame = kernel.binding("frame")
    assert frame.kind is BindingKind.UNIFORM and frame.index == len(names) - 1
    assert not {"input_scale", "output_scale"} & set(kernel.params.names)
    assert FRAME_PARAMS.names == ("input_scale", "output_scale") and FRAME_PARAMS.size == 16
    assert FRAME_PARAMS.wgsl() in kernel.source
    assert f"@binding({frame.index}) var<uniform> frame: Frame;" in kernel.source
    assert kernel.trusted  # the frame values scale pixels and never reach an index


def _broadcast(img: np.ndarray) -> np.ndarray:
    c = img.shape[2]
    idx = [0, min(1, c - 1), min(2, c - 1)]
    return img[:, :, idx]


def _sanitize(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    v = np.where(np.isnan(v), np.float32(0), v)
    return np.clip(v, lo, hi).astype(np.float32)


INPUT_CASES = [
    # roles, precision, transfer, hdr, snorm
    (
        (io.ImageRole.MAIN, io.ImageRole.ALBEDO, io.ImageRole.NORMAL),
        Precision.FP32,
        tf.Transfer.PU,
        True,
        False,
    ),
    ((io.ImageRole.MAIN, io.ImageRole.ALBEDO), Precision.FP16, tf.Transfer.SRGB, False, False),
    ((io.ImageRole.MAIN,), Precision.FP32, tf.Transfer.LINEAR, False, True),
    ((io.ImageRole.MAIN,), Precision.FP32, tf.Transfer.LOG, True, False),
]


@pytest.mark.parametrize(
    "case", INPUT_CASES, ids=lambda c: f"{len(c[0])}img-{c[1].value}-{c[2].value}"
)
def test_input_pass(case, rng) -> None:
    roles, precision, transfer, hdr, snorm = case
    spec = io.InputPassSpec(roles, precision, transfer, hdr, snorm)
    kernel = io.generate_input_pass(spec)
    ih, iw = 9, 13  # image
    th, tw = 16, 16  # tensor (tile)
    src_y, src_x, dst_y, dst_x, ch, cw = 2, 1, 3, 0, 7, 12
    scales = (0.75, 3.0)  # two frames through the same bind group
    channels = {io.ImageRole.MAIN: 3, io.ImageRole.ALBEDO: 2, io.ImageRole.NORMAL: 1}
    images, params = {}, {}
    dense = {}
    for role in roles:
        c = channels[role]
        stride = 4 if role is io.ImageRole.MAIN else c  # main is RGBA
        img = (rng.standard_normal((ih, iw, stride)) * 3).astype(np.float32)
        img.reshape(-1)[::17] = np.nan
        img.reshape(-1)[5::23] = np.inf
        img.reshape(-1)[7::29] = -np.inf
        images[f"{role.value}_image"] = np.concatenate([np.zeros(5, np.float32), img.reshape(-1)])
        params.update(
            {
                f"{role.value}_offset": 5,
                f"{role.value}_pixel_stride": stride,
                f"{role.value}_row_stride": iw * stride,
                f"{role.value}_channels": c,
            }
        )
        dense[role] = _broadcast(img[:, :, :c])
    params.update(
        tensor_height=th,
        tensor_width=tw,
        dst_y=dst_y,
        dst_x=dst_x,
        src_y=src_y,
        src_x=src_x,
        copy_height=ch,
        copy_width=cw,
    )
    nb = -(-spec.channels // 4)
    runs = _run_pass(
        kernel,
        images,
        {"output": th * tw * nb * 4 * precision.itemsize},
        params,
        [_frame(s) for s in scales],
        (spec.channels, th, tw),
    )
    for scale, run in zip(scales, runs, strict=True):
        got = np.frombuffer(run["output"], precision.numpy_dtype).reshape(th, tw, nb * 4)
        _check_input_pass(got, spec, dense, scale, (src_y, src_x, dst_y, dst_x, ch, cw))


def _check_input_pass(got, spec, dense, scale, rect) -> None:
    roles, precision, transfer = spec.images, spec.precision, spec.transfer
    hdr, snorm = spec.hdr, spec.snorm
    src_y, src_x, dst_y, dst_x, ch, cw = rect
    th, tw, lanes = got.shape
    nb = lanes // 4
    # reference
    ref = np.zeros((th, tw, nb * 4), np.float32)
    region = (slice(src_y, src_y + ch), slice(src_x, src_x + cw))
    with np.errstate(invalid="ignore", over="ignore"):
        main = dense[io.ImageRole.MAIN][region] * np.float32(scale)
    main = _sanitize(main, -1.0 if snorm else 0.0, FLT_MAX if hdr else 1.0)
    if snorm:
        main = main * np.float32(0.5) + np.float32(0.5)
    parts = [tf.forward(transfer, main)]
    if io.ImageRole.ALBEDO in roles:
        parts.append(_sanitize(dense[io.ImageRole.ALBEDO][region], 0.0, 1.0))
    if io.ImageRole.NORMAL in roles:
        parts.append(
            _sanitize(dense[io.ImageRole.NORMAL][region], -1.0, 1.0) * np.float32(0.5)
            + np.float32(0.5)
        )
    ref[dst_y : dst_y + ch, dst_x : dst_x + cw, : spec.channels] = np.concatenate(parts, axis=2)
    ref = ref.astype(precision.numpy_dtype).astype(np.float32)
    assert np.all(np.isfinite(got))
    rtol = GPU_TRANSFER_RTOL if precision is Precision.FP32 else 1e-3
    np.testing.assert_allclose(got.astype(np.float32), ref, rtol=rtol, atol=1e-7)
    outside = np.ones((th, tw), bool)
    outside[dst_y : dst_y + ch, dst_x : dst_x + cw] = False
    assert np.all(got[outside] == 0) and np.all(got[:, :, spec.channels :] == 0)


OUTPUT_CASES = [
    # transfer, hdr, snorm, out_channels
    (tf.Transfer.PU, True, False, 3),
    (tf.Transfer.SRGB, False, False, 1),
    (tf.Transfer.LINEAR, False, True, 2),
    (tf.Transfer.LOG, True, False, 3),
]


@pytest.mark.parametrize("case", OUTPUT_CASES, ids=lambda c: f"{c[0].value}-c{c[3]}")
def test_output_pass(case, rng) -> None:
    transfer, hdr, snorm, oc = case
    kernel = io.generate_output_pass(io.OutputPassSpec(transfer, hdr, snorm))
    th, tw = 12, 12
    net = (rng.random((th, tw, 4)) * 1.2 - 0.1).astype(np.float32)
    net.reshape(-1)[::13] = np.nan
    ih, iw, stride = 8, 9, 4
    src_y, src_x, dst_y, dst_x, h, w = 2, 3, 1, 0, 6, 8
    input_scales = (1 / 1.5, 0.0)  # output scales 1.5 and 0 (s == 0), one bind group
    init = np.full((ih, iw, stride), -7.0, np.float32)
    params = dict(
        tensor_width=tw,
        src_y=src_y,
        src_x=src_x,
        dst_y=dst_y,
        dst_x=dst_x,
        height=h,
        width=w,
        out_offset=0,
        out_pixel_stride=stride,
        out_row_stride=iw * stride,
        out_channels=oc,
    )
    frames = [_frame(s) for s in input_scales]
    runs = _run_pass(
        kernel,
        {"input": net},
        {"output": init.nbytes},
        params,
        frames,
        (3, h, w),
        output_init={"output": init},
    )
    for frame, run in zip(frames, runs, strict=True):
        got = np.frombuffer(run["output"], np.float32).reshape(ih, iw, stride)
        rect = (src_y, src_x, dst_y, dst_x, h, w)
        expect = _expected_output(net, init, case, frame["output_scale"], rect)
        np.testing.assert_allclose(got, expect, rtol=GPU_TRANSFER_RTOL, atol=1e-7)


def _expected_output(net, init, case, out_scale, rect) -> np.ndarray:
    transfer, hdr, snorm, oc = case
    src_y, src_x, dst_y, dst_x, h, w = rect
    v = _sanitize(net[src_y : src_y + h, src_x : src_x + w, :3], 0.0, FLT_MAX)
    v = tf.inverse(transfer, v)
    if oc == 1:
        v = np.repeat((v.sum(axis=2, dtype=np.float32) * np.float32(1 / 3))[:, :, None], 3, axis=2)
    if snorm:
        v = np.maximum(v * 2 - 1, -1)
    if not hdr:
        v = np.minimum(v, 1)
    v = (v * np.float32(out_scale)).astype(np.float32)
    expect = init.copy()
    expect[dst_y : dst_y + h, dst_x : dst_x + w, :oc] = v[:, :, :oc]
    return expect


def test_float16_images_are_read_as_they_are(rng) -> None:
    """Half images (odd offsets, RGBA stride, NaN/Inf) give the input of their float32 widening."""
    roles = (io.ImageRole.MAIN, io.ImageRole.ALBEDO, io.ImageRole.NORMAL)
    ih, iw, th, tw = 7, 9, 16, 16
    shapes = {io.ImageRole.MAIN: (4, 3), io.ImageRole.ALBEDO: (2, 2), io.ImageRole.NORMAL: (1, 1)}
    halves, widened, params = {}, {}, {}
    for role in roles:
        stride, channels = shapes[role]
        img = (rng.standard_normal((ih, iw, stride)) * 3).astype(np.float16)
        img.reshape(-1)[::13] = np.nan
        img.reshape(-1)[4::19] = np.inf
        img.reshape(-1)[6::23] = -np.inf
        img.reshape(-1)[8::11] = np.float16(3e-6)  # a half denormal, widened exactly
        flat = np.concatenate([np.zeros(3, np.float16), img.reshape(-1)])  # odd offset
        widened[f"{role.value}_image"] = flat.astype(np.float32)
        halves[f"{role.value}_image"] = np.concatenate(
            [flat, np.zeros(flat.size % 2, np.float16)]
        ).view(np.uint32)
        params.update(
            {
                f"{role.value}_offset": 3,
                f"{role.value}_pixel_stride": stride,
                f"{role.value}_row_stride": iw * stride,
                f"{role.value}_channels": channels,
            }
        )
    params.update(
        tensor_height=th,
        tensor_width=tw,
        dst_y=1,
        dst_x=2,
        src_y=0,
        src_x=0,
        copy_height=ih,
        copy_width=iw,
    )
    outputs = {"output": th * tw * 3 * 16}
    half_spec = io.InputPassSpec(
        roles, Precision.FP32, tf.Transfer.PU, True, False, dtypes=("float16",) * 3
    )
    float_spec = io.InputPassSpec(roles, Precision.FP32, tf.Transfer.PU, True, False)
    frames = [_frame(0.5)]
    got = _run_pass(
        io.generate_input_pass(half_spec), halves, outputs, params, frames, (9, th, tw)
    )[0]["output"]
    want = _run_pass(
        io.generate_input_pass(float_spec), widened, outputs, params, frames, (9, th, tw)
    )[0]["output"]
    assert "f16=main+albedo+normal" in half_spec.describe()
    assert got == want
    assert np.count_nonzero(np.frombuffer(got, np.float32)) > ih * iw


def test_input_pass_rejects_unknown_image_dtypes() -> None:
    with pytest.raises(InvalidArgumentError, match="invalid image dtypes"):
        io.InputPassSpec((io.ImageRole.MAIN,), dtypes=("float64",))
    with pytest.raises(InvalidArgumentError, match="invalid image dtypes"):
        io.InputPassSpec((io.ImageRole.MAIN,), dtypes=("float16", "float16"))
