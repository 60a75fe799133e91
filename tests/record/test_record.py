"""record -> serialize -> parse -> replay equals direct execution, bit for bit (GPU: lavapipe).

Direct execution runs the same `submit_network` / `submit_denoise` calls with the
same executor settings on the real device; the config is made from that device
(`make_config(device=gpu)`), so kernel choice is identical. Replays must be
bit-identical: same WGSL, same dispatches, same data.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError, UnsupportedDeviceError
from oidn_gpu.record import make_config, parse_config, read_program
from oidn_gpu.record.api import (
    denoise_setup,
    inspect_model_packet,
    record_denoise,
    record_denoise_packet,
    record_network,
    record_network_packet,
    submit_denoise,
    submit_network,
)
from oidn_gpu.record.format import Write, frame_data
from oidn_gpu.record.reader import read_model_packet, read_packet_error
from oidn_gpu.record.replay import Replayer
from tests.autoexposure_tolerance import autoexposure_tolerance

pytestmark = pytest.mark.gpu

PRECISIONS = ("fp32", "fp16")


def _skip_without_f16(gpu, precision):
    if precision == "fp16" and not gpu.capabilities.has_f16:
        pytest.fail("the device has no shader-f16; the fp16 tests need it (lavapipe has it)")


# A Replayer compiles a program's shaders with runtime checks (a program file is untrusted
# input), so the direct runs it is compared with compile the same kernels the same way:
# on some drivers, trusted and checked builds of one shader may round differently.
CHECKED = True


def _direct_network(gpu, tza, precision, x):
    from oidn_gpu.backends.wgpu.device import STORAGE_USAGE
    from oidn_gpu.backends.wgpu.executor import WgpuExecutor
    from oidn_gpu.model.unet import load_model

    height, width = x.shape[:2]
    with WgpuExecutor(
        load_model(tza), device=gpu, precision=precision, shader_checks=CHECKED
    ) as executor:
        buffer = gpu.create_buffer_with_data("test/input", x, STORAGE_USAGE)
        out = submit_network(executor, buffer, width, height)
        return np.frombuffer(gpu.read_buffer(out), np.float32).reshape(height, width, 4)


def _direct_denoise(gpu, tza, config, images, input_scale=None):
    """`submit_denoise` on the real device; ``input_scale`` replaces the config's scale."""
    import dataclasses

    from oidn_gpu.backends.wgpu.device import STORAGE_USAGE
    from oidn_gpu.backends.wgpu.executor import WgpuExecutor
    from oidn_gpu.backends.wgpu.runner import GpuDenoiser
    from oidn_gpu.model.unet import load_model

    cfg = parse_config(config, denoise=True)
    model = load_model(tza)
    h, w = cfg.height, cfg.width
    with (
        WgpuExecutor(model, device=gpu, precision=cfg.precision, shader_checks=CHECKED) as executor,
        GpuDenoiser(executor) as denoiser,
    ):
        inputs = [gpu.create_buffer_with_data("test/in", x, STORAGE_USAGE) for x in images]
        output = gpu.create_buffer("test/out", h * w * 16, STORAGE_USAGE)
        setup = denoise_setup(model, cfg)
        if input_scale is not None:
            setup = dataclasses.replace(
                setup, mode=dataclasses.replace(setup.mode, input_scale=input_scale)
            )
        submit_denoise(denoiser, inputs, output, w, h, setup)
        return np.frombuffer(gpu.read_buffer(output), np.float32).reshape(h, w, 4)


def _rgba_images(rng, count, height, width, scale=2.0):
    return [
        np.dstack(
            [
                rng.random((height, width, 3), np.float32) * np.float32(scale),
                rng.random((height, width, 1), np.float32),
            ]
        ).astype(np.float32)
        for _ in range(count)
    ]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("name", ["tiny_base_ic3", "tiny_base_ic9"])
def test_replayed_network_equals_direct_execution(gpu, tiny_tza, rng, name, precision):
    _skip_without_f16(gpu, precision)
    tza = tiny_tza[name]
    channels = 3 if name.endswith("ic3") else 9
    x = rng.random((32, 48, channels), np.float32)
    data = record_network(tza, make_config(48, 32, precision=precision, device=gpu))
    program = read_program(data)
    assert program.meta.precision == (2 if precision == "fp16" else 1)
    assert not program.output_external and program.output_channels == 3
    with Replayer(data, gpu) as replayer:
        replayed = replayer.run([x])
        again = replayer.run([x])
    direct = _direct_network(gpu, tza, precision, x)
    assert replayed.tobytes() == direct.tobytes()
    assert again.tobytes() == direct.tobytes()


CASES = {
    # name: (model, hdr, max tile edge, height, width) -- 230 rows at edge 208 give 3 tiles
    "ldr-untiled": ("tiny_base_ic3", False, 0, 37, 53),
    "hdr-aux-untiled": ("tiny_base_ic9", True, 0, 40, 24),
    "hdr-tiled": ("tiny_base_ic3", True, 208, 230, 40),
    "ldr-aux-tiled": ("tiny_base_ic9", False, 208, 40, 230),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_replayed_denoise_equals_direct_execution(gpu, tiny_tza, rng, case, precision):
    _skip_without_f16(gpu, precision)
    name, hdr, edge, h, w = CASES[case]
    tza = tiny_tza[name]
    config = make_config(
        w,
        h,
        precision=precision,
        device=gpu,
        denoise=True,
        hdr=hdr,
        max_tile_edge=edge,
        input_scale=0.75 if hdr else 1.0,
    )
    data = record_denoise(tza, config)
    program = read_program(data)
    tiles = program.meta.tiles
    assert (tiles > 1) == (edge > 0)
    assert program.output_external and program.output_channels == 4
    images = _rgba_images(rng, 3 if name.endswith("ic9") else 1, h, w)
    with Replayer(data, gpu) as replayer:
        replayed = replayer.run(images)
    direct = _direct_denoise(gpu, tza, config, images)
    assert replayed.tobytes() == direct.tobytes()
    np.testing.assert_array_equal(replayed[:, :, 3], images[0][:, :, 3])  # color alpha kept
    assert np.isfinite(replayed).all()


@pytest.mark.parametrize("case", ["hdr-tiled", "ldr-aux-tiled"])
def test_replay_with_new_input_scales_equals_direct_execution(gpu, tiny_tza, rng, case):
    """One recorded program, several scales written into its frame buffer: each run is
    bit-identical to a direct denoise with that scale (and None restores the recorded one)."""
    name, hdr, edge, h, w = CASES[case]
    tza = tiny_tza[name]
    config = make_config(
        w,
        h,
        precision="fp32",
        device=gpu,
        denoise=True,
        hdr=hdr,
        max_tile_edge=edge,
        input_scale=0.75,
    )
    data = record_denoise(tza, config)
    program = read_program(data)
    frame = program.meta.frame_buffer
    assert frame is not None and program.buffers[frame].byte_size == 16
    assert program.buffers[frame].data == frame_data(0.75)
    assert not any(isinstance(op, Write) and op.buffer == frame for op in program.operations)
    images = _rgba_images(rng, 3 if name.endswith("ic9") else 1, h, w)
    scales = [2.5, 0.3, None, 0.0, 2.5]
    with Replayer(data, gpu) as replayer:
        assert replayer.has_frame and replayer.recorded_input_scale == 0.75
        replayed = [replayer.run(images, input_scale=s) for s in scales]
    direct = {s: _direct_denoise(gpu, tza, config, images, s) for s in set(scales)}
    for s, out in zip(scales, replayed, strict=True):
        assert out.tobytes() == direct[s].tobytes(), f"input scale {s}"
    assert replayed[0].tobytes() != replayed[1].tobytes()
    assert not replayed[3][:, :, :3].any()  # s == 0: output scale 0, as OIDN


def test_hdr_replay_with_host_autoexposure_equals_the_denoiser_at_that_scale(
    gpu, tiny_tza, rng, monkeypatch
):
    """The host computes OIDN's autoexposure and writes it into the frame buffer; the
    result equals `Denoiser` (wgpu backend) denoising at that scale, and the scale the
    denoiser's own autoexposure (on the GPU) finds is the host's within its tolerance."""
    monkeypatch.setenv("OIDN_GPU_SHADER_CHECKS", "1")  # compile as the Replayer does
    from oidn_gpu.filter import Denoiser
    from oidn_gpu.image.autoexposure import autoexposure

    h, w = 40, 24
    tza = tiny_tza["tiny_base_ic3"]
    color = _rgba_images(rng, 1, h, w, scale=40.0)[0]
    scale = autoexposure(color[:, :, :3])
    assert scale != 1.0
    data = record_denoise(
        tza, make_config(w, h, precision="fp32", device=gpu, denoise=True, hdr=True)
    )
    with Replayer(data, gpu) as replayer:
        replayed = replayer.run([color], input_scale=scale)
        baked = replayer.run([color])
    options = {"hdr": True, "weights": tza, "backend": "wgpu", "precision": "fp32"}
    denoiser = Denoiser(input_scale=scale, device=gpu.device, **options)
    direct = denoiser.denoise(color=color[:, :, :3].copy())
    assert denoiser.info().input_scale == scale
    automatic = Denoiser(device=gpu.device, **options)
    automatic.denoise(color=color[:, :, :3].copy())
    gpu_scale = automatic.info().input_scale
    assert abs(gpu_scale - scale) <= autoexposure_tolerance(scale) * scale
    assert replayed[:, :, :3].tobytes() == np.ascontiguousarray(direct).tobytes()
    assert baked.tobytes() != replayed.tobytes()  # the recorded scale (1) differs


def test_input_scale_needs_a_frame_buffer(gpu, tiny_tza, rng):
    data = record_network(tiny_tza["tiny_base_ic3"], make_config(16, 16, precision="fp32"))
    with Replayer(data, gpu) as replayer:
        assert not replayer.has_frame and replayer.recorded_input_scale is None
        with pytest.raises(InvalidArgumentError, match="no frame buffer"):
            replayer.run([rng.random((16, 16, 3), np.float32)], input_scale=2.0)
    data = record_denoise(
        tiny_tza["tiny_base_ic3"], make_config(16, 16, precision="fp32", denoise=True)
    )
    with Replayer(data, gpu) as replayer, pytest.raises(InvalidArgumentError, match="NaN"):
        replayer.run(_rgba_images(rng, 1, 16, 16), input_scale=float("nan"))


def test_frame_data_layout():
    assert frame_data(2.0) == struct.pack("<ff", 2.0, 0.5) + bytes(8)
    assert frame_data(0.0) == bytes(16)
    s = np.float32(0.37)
    assert frame_data(0.37)[:8] == struct.pack("<ff", s, np.float32(1) / s)


def test_replay_into_caller_buffers_equals_host_replay(gpu, tiny_tza, rng):
    from oidn_gpu.backends.wgpu.device import STORAGE_USAGE

    h, w = 40, 24
    data = record_denoise(
        tiny_tza["tiny_base_ic9"], make_config(w, h, precision="fp32", device=gpu, denoise=True)
    )
    images = _rgba_images(rng, 3, h, w, scale=1.0)
    with Replayer(data, gpu) as replayer:
        host = replayer.run(images)
        inputs = [gpu.create_buffer_with_data("test/in", x, STORAGE_USAGE) for x in images]
        output = gpu.create_buffer("test/out", h * w * 16, STORAGE_USAGE)
        assert replayer.run(inputs, output) is output
        on_gpu = np.frombuffer(gpu.read_buffer(output), np.float32).reshape(h, w, 4)
    assert on_gpu.tobytes() == host.tobytes()


def test_recording_is_deterministic(tiny_tza):
    config = make_config(64, 48, precision="fp32", denoise=True, hdr=True)
    assert record_denoise(tiny_tza["tiny_base_ic9"], config) == record_denoise(
        tiny_tza["tiny_base_ic9"], config
    )


def test_meta_lists_weights_and_kernels(gpu, tiny_tza):
    program = read_program(
        record_network(
            tiny_tza["tiny_base_ic3"], make_config(16, 16, precision="fp32", kernel="direct")
        )
    )
    meta = program.meta
    labels = [program.buffers[i].label for i in meta.weight_buffers]
    assert labels and all("/weights/" in label or label.endswith("/bias") for label in labels)
    assert meta.kernels & 1  # direct
    assert meta.frame_buffer is None and meta.tiles == 0


def test_fp16_without_the_feature_is_unsupported(tiny_tza):
    config = make_config(16, 16, precision="fp16", features=[])
    with pytest.raises(UnsupportedDeviceError, match="shader-f16"):
        record_network(tiny_tza["tiny_base_ic3"], config)


def test_subgroup_matrix_kernel_is_unsupported(tiny_tza):
    with pytest.raises(UnsupportedDeviceError, match="subgroup-matrix"):
        record_network(tiny_tza["tiny_base_ic3"], make_config(16, 16, kernel="subgroup-matrix"))


def test_network_size_must_be_aligned(tiny_tza):
    with pytest.raises(InvalidArgumentError, match="multiples of 16"):
        record_network(tiny_tza["tiny_base_ic3"], make_config(20, 16))


def test_packets_carry_errors_instead_of_raising(tiny_tza):
    message = read_packet_error(record_network_packet(b"not weights", make_config(16, 16)))
    assert message
    assert read_packet_error(record_denoise_packet(tiny_tza["tiny_base_ic3"], b"\0\0\0")) == (
        "config has 0 whole word(s); expected at least 3 (version, width, height)"
    )
    good = record_network_packet(tiny_tza["tiny_base_ic3"], make_config(16, 16, precision="fp32"))
    assert read_packet_error(good) is None and read_program(good).meta is not None


def test_model_inspection_packet(tiny_tza):
    assert read_model_packet(inspect_model_packet(tiny_tza["tiny_base_ic9"])) == 3
    assert read_model_packet(inspect_model_packet(tiny_tza["tiny_base_ic3"])) == 1
    assert read_packet_error(inspect_model_packet(b"\0" * 16))


def test_recording_device_cannot_read_back():
    from oidn_gpu.record.config import RecordConfig
    from oidn_gpu.record.device import RecordingDevice, recording_capabilities

    device = RecordingDevice(recording_capabilities(RecordConfig(16, 16)))
    buffer = device.create_buffer("x", 16)
    with pytest.raises(InvalidOperationError, match="cannot read buffers back"):
        device.read_buffer(buffer)
    assert not device.capabilities.has_timestamps


@pytest.mark.parametrize(("edge", "accepted"), [(16, False), (207, False), (208, True)])
def test_tile_edge_must_hold_the_overlap_on_both_sides(tiny_tza, edge, accepted):
    """A tile keeps the model's overlap (96 px for the base networks, OIDN's receptive reach)
    on both sides plus one 16 px step of output, so the tiled image equals the untiled one;
    a smaller max tile edge is refused with the minimum, not planned with a shorter overlap."""
    config = make_config(64, 300, precision="fp32", denoise=True, max_tile_edge=edge)
    if accepted:
        program = read_program(record_denoise(tiny_tza["tiny_base_ic3"], config))
        assert program.meta.tiles == 7  # 16 kept rows per tile: ceil((300 - 2 * 96) / 16)
        return
    with pytest.raises(InvalidArgumentError) as info:
        record_denoise(tiny_tza["tiny_base_ic3"], config)
    assert f"max tile edge {edge} is too small for overlap 96" in str(info.value)
    assert "expected at least 208" in str(info.value)
