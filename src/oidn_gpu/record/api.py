"""Recording entry points for native hosts (oidn-web's ``recordNetwork`` / ``recordDenoise``).

`record_network` records one execution of the U-Net at a fixed size;
`record_denoise` records a whole denoise (per tile: input pass, network, output
pass). Both run the unchanged `WgpuExecutor` / `GpuDenoiser` against a
`RecordingDevice` whose features and limits come from the config, and
serialize what was submitted. The same functions with a real `GpuDevice`
(`submit_network`, `submit_denoise`) are the direct execution the tests compare
replays with.

What every program guarantees:

- network: one input, the network input as dense ``[H, W, C_in]`` float32
  (C_in = 3 per image: color, albedo, normal, in network space: transfer
  applied, as `image.process.build_input` makes it; H and W multiples of 16);
  the output is the executor's ``[H, W, 4]`` float32 buffer (RGB and a zero
  lane), not external; output channels 3.
- denoise: inputs color, then albedo and normal for auxiliary models, each an
  RGBA float32 image (16 bytes per pixel, alpha ignored); the external output
  is RGBA float32 with the color's alpha; output channels 4. META names the
  frame buffer: `GpuDenoiser`'s frame uniform (`kernels.spec.FRAME_PARAMS`:
  f32 input scale, f32 output scale), created with the config's scale as its
  initial data and bound by every tile's input and output pass, so a host sets
  another scale per run by rewriting it (`format.frame_data`, `Replayer.run`).

Both take ``accumulation``, how an fp16 program's convolutions sum their products
(the wgpu backend's names, `ACCUMULATIONS`: ``"f16-partials"`` is oidn-web's
arithmetic and the fastest); None keeps the recorder's default, every product
summed in f32, the most accurate. META (version 2) records the sums. And
``format_version``: 3 (the default, checksummed sections) or 2, oidn-web's
layout for hosts that read only that (its META, version 1, has no sums).

`inspect_model_packet` and the ``*_packet`` variants return bytes, never raise:
errors become the ``ERRO`` packet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oidn_gpu.backends.plan import DenoiseOptions, DenoisePlan, plan_denoise
from oidn_gpu.backends.wgpu.device import STORAGE_USAGE, BufferUsage, open_device
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.backends.wgpu.options import ACCUMULATIONS
from oidn_gpu.backends.wgpu.runner import GpuDenoiser, GpuImage
from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.image.transfer import Transfer
from oidn_gpu.model.unet import load_model
from oidn_gpu.record.config import RecordConfig, parse_config
from oidn_gpu.record.device import RecordingDevice, recording_capabilities
from oidn_gpu.record.format import (
    PROGRAM_VERSION,
    PROGRAM_VERSIONS,
    KernelBit,
    MetaAccumulation,
    MetaPrecision,
    ProgramMeta,
    frame_data,
)
from oidn_gpu.record.writer import error_packet, model_packet, write_program

RGBA_F32_BYTES = 16
F32_BYTES = 4
IMAGE_NAMES = ("color", "albedo", "normal")
# The frame buffer of a denoise program: UNIFORM|COPY_DST (0x48), as oidn-webgpu's
# ``uniformBuffer`` (native/denoise.ts); the host rewrites it per frame.
PROGRAM_FRAME_USAGE = BufferUsage.UNIFORM | BufferUsage.COPY_DST
_KERNEL_SETTINGS = {  # config kernel -> WgpuExecutor kernel setting
    "auto": "auto",
    "implicit-gemm": "implicit-gemm",
    "direct": "direct",
    "spatial": "spatial",
    "subgroup": "subgroup",
}
_FAMILY_BITS = {
    "conv-direct": KernelBit.DIRECT,
    "conv-igemm": KernelBit.IMPLICIT_GEMM,
    "conv-spatial": KernelBit.SPATIAL,
}


def recording_device() -> Any:
    """The wgpu device of this machine, to record for (`make_config` reads its features
    and limits)."""
    return open_device()


def _load_model(tza: bytes | bytearray | memoryview) -> Any:
    return load_model(bytes(tza))


def check_recording(accumulation: str | None, format_version: int) -> None:
    """Refuse an unknown accumulation or format version before anything is recorded."""
    if accumulation is not None and accumulation not in ACCUMULATIONS:
        raise InvalidArgumentError(
            f"unknown accumulation {accumulation!r}; expected one of {', '.join(ACCUMULATIONS)}"
        )
    if format_version not in PROGRAM_VERSIONS:
        raise InvalidArgumentError(
            f"unknown program format version {format_version!r}; expected one of "
            f"{', '.join(map(str, PROGRAM_VERSIONS))}"
        )


def _executor_options(config: RecordConfig, accumulation: str | None) -> dict[str, Any]:
    if config.kernel == "subgroup-matrix":
        raise UnsupportedDeviceError(
            "kernel 3 (subgroup-matrix) is not implemented by oidn-gpu; use 0 (auto), "
            "1 (implicit-gemm), 2 (direct), 4 (spatial) or 5 (subgroup)"
        )
    return {
        "precision": config.precision,
        "kernel": _KERNEL_SETTINGS[config.kernel],
        "accumulation": accumulation,
    }


def kernels_bitmask(executor: Any) -> int:
    """META kernels bitmask of the convolution families an executor runs."""
    bits = 0
    for kernel in executor.kernels:
        if kernel.name.startswith("conv-"):
            bits |= _FAMILY_BITS.get(kernel.name, KernelBit.OTHER)
    return bits


def program_accumulation(executor: Any) -> MetaAccumulation:
    """How an executor's convolutions sum, as META records it (all f32 in fp32)."""
    if executor.precision.value != "fp16":
        return MetaAccumulation()
    gemm = executor.gemm
    layers = gemm.accumulation
    first = gemm.input_accumulation or layers
    final = gemm.final_accumulation or layers
    return MetaAccumulation(layers.value, first.value, final.value)


def _meta(executor: Any, tiles: int, weights: Sequence[Any], frame: Any = None) -> ProgramMeta:
    precision = MetaPrecision.FP16 if executor.precision.value == "fp16" else MetaPrecision.FP32
    return ProgramMeta(
        precision,
        tiles,
        kernels_bitmask(executor),
        None if frame is None else frame.id,
        tuple(b.id for b in weights),
        program_accumulation(executor),
    )


# --- the submissions (shared by recording and direct execution) -----------------------------


def network_input_bytes(model: Any, width: int, height: int) -> int:
    return width * height * model.input_channels * F32_BYTES


def submit_network(executor: Any, input_buffer: Any, width: int, height: int) -> Any:
    """One network execution on ``input_buffer``; returns the executor's output buffer."""
    return executor.execute_buffers(input_buffer, height, width)


# A denoise config resolves to a `DenoisePlan` (processing mode and tile plan).
DenoiseSetup = DenoisePlan


def denoise_setup(model: Any, config: RecordConfig) -> DenoisePlan:
    """The `DenoisePlan` of a denoise config (`backends.plan.plan_denoise`).

    The config's transfer word replaces OIDN's choice; ``default`` (word 0) is
    oidn-webgpu's: PU for HDR, no curve for LDR (`config.transfer_name`). A maximum
    tile edge of 0 plans the whole image as one tile.
    """
    options = config.denoise
    if options is None:
        raise InvalidArgumentError("the config has no denoise words")
    if options.transfer == "default":
        transfer = Transfer.PU if options.hdr else Transfer.LINEAR
    else:
        transfer = Transfer(options.transfer)
    return plan_denoise(
        model,
        config.height,
        config.width,
        DenoiseOptions(
            hdr=options.hdr,
            input_scale=options.input_scale,
            transfer=transfer,
            tile_size=options.max_tile_edge or None,
            whole_image=options.max_tile_edge == 0,
        ),
    )


def submit_denoise(
    denoiser: Any,
    inputs: Sequence[Any],
    output: Any,
    width: int,
    height: int,
    setup: DenoisePlan,
) -> None:
    """One whole denoise of RGBA float32 image buffers into the RGBA ``output`` buffer.

    The color's alpha is copied into ``output`` first; the denoise then writes RGB.
    """
    device = denoiser.executor.device
    encoder = device.create_command_encoder("oidn/denoise/alpha")
    encoder.copy_buffer(inputs[0], 0, output, 0, width * height * RGBA_F32_BYTES)
    device.submit([encoder.finish()])
    images = [GpuImage(b, height, width, 3, pixel_stride=4) for b in inputs]
    denoiser.denoise_buffers(
        images,
        GpuImage(output, height, width, 3, pixel_stride=4),
        mode=setup.mode,
        plan=setup.tiles,
    )


# --- recording ------------------------------------------------------------------------------


def _recording(
    tza: bytes, config_bytes: bytes, accumulation: str | None, *, denoise: bool
) -> tuple[Any, ...]:
    config = parse_config(config_bytes, denoise=denoise)
    model = _load_model(tza)
    device = RecordingDevice(recording_capabilities(config))
    # No `prepare()`: a program holds the pipelines its operations use (prepare would add
    # the unused input-pack and output-unpack kernels); each compiles on first use.
    options = _executor_options(config, accumulation)
    executor = WgpuExecutor(model, device=device, prepare=False, **options)
    # the uploaded weights and biases, in upload order (the program's META lists them)
    weights = tuple(
        buffer
        for entry in executor.weight_buffers.values()
        for buffer in (entry.weights, entry.bias)
    )
    return config, model, device, executor, weights


def record_network(
    tza: bytes,
    config: bytes,
    *,
    accumulation: str | None = None,
    format_version: int = PROGRAM_VERSION,
) -> bytes:
    """Record one network execution at the config's size (see the module doc).

    Raises:
        InvalidArgumentError: bad config or weights (`WeightsFormatError`), a size
            that is not a multiple of 16, an unknown accumulation or format version.
        UnsupportedDeviceError: the config's device cannot run the requested precision.
    """
    check_recording(accumulation, format_version)
    cfg, model, device, executor, weights = _recording(tza, config, accumulation, denoise=False)

    try:
        w, h = cfg.width, cfg.height
        usage = BufferUsage.STORAGE | BufferUsage.COPY_DST
        input_buffer = device.create_buffer(
            "oidn/external/input", network_input_bytes(model, w, h), usage
        )
        output = submit_network(executor, input_buffer, w, h)
        program = device.to_program(
            [input_buffer],
            output,
            output_external=False,
            output_width=w,
            output_height=h,
            output_channels=model.output_channels,
            meta=_meta(executor, 0, weights),
        )
        return write_program(program, version=format_version)
    finally:
        _release(executor, device)


def _release(executor: Any, device: Any) -> None:
    cache = executor.pipeline_cache
    executor.close()
    cache.clear()
    cache.shutdown()  # the recording's compile threads
    device.close()


def record_denoise(
    tza: bytes,
    config: bytes,
    *,
    accumulation: str | None = None,
    format_version: int = PROGRAM_VERSION,
) -> bytes:
    """Record one whole denoise of the config's image size (see the module doc).

    Raises:
        InvalidArgumentError: bad config or weights, a tile edge too small for the
            model's overlap, an unknown accumulation or format version.
        UnsupportedDeviceError: the config's device cannot run the requested precision.
    """
    check_recording(accumulation, format_version)
    cfg, model, device, executor, weights = _recording(tza, config, accumulation, denoise=True)
    denoiser = GpuDenoiser(executor)
    try:
        w, h = cfg.width, cfg.height
        setup = denoise_setup(model, cfg)
        names = IMAGE_NAMES[: model.input_channels // 3]
        size = w * h * RGBA_F32_BYTES
        inputs = [device.create_buffer(f"oidn/external/{n}", size, STORAGE_USAGE) for n in names]
        output = device.create_buffer("oidn/external/output", size, STORAGE_USAGE)
        submit_denoise(denoiser, inputs, output, w, h, setup)
        # The first frame creates the frame uniform with its scales as initial data (no
        # queue write is recorded), so the program holds the config's scale until a host
        # rewrites the buffer.
        frame = denoiser.frame_buffer
        if frame is None or frame.data != frame_data(setup.mode.input_scale):
            raise AssertionError("the denoise did not create the expected frame uniform")
        # The live frame uniform is also a storage buffer (the GPU autoexposure writes it);
        # a program only binds it as a uniform, so it gets oidn-webgpu's usage.
        frame.usage = PROGRAM_FRAME_USAGE
        program = device.to_program(
            inputs,
            output,
            output_external=True,
            output_width=w,
            output_height=h,
            output_channels=4,
            meta=_meta(executor, len(setup.tiles.tiles), weights, frame),
        )
        return write_program(program, version=format_version)
    finally:
        denoiser.close()
        _release(executor, device)


def inspect_model_packet(tza: bytes) -> bytes:
    """``MODL`` packet (version 1, image input count) or the ``ERRO`` packet."""
    try:
        model = _load_model(tza)
        return model_packet(model.input_channels // 3)
    except Exception as err:
        return error_packet(str(err))


def record_network_packet(tza: bytes, config: bytes, **options: Any) -> bytes:
    """`record_network` (and its ``accumulation`` and ``format_version``), with any error
    returned as the ``ERRO`` packet."""
    try:
        return record_network(tza, config, **options)
    except Exception as err:
        return error_packet(str(err))


def record_denoise_packet(tza: bytes, config: bytes, **options: Any) -> bytes:
    """`record_denoise` (and its ``accumulation`` and ``format_version``), with any error
    returned as the ``ERRO`` packet."""
    try:
        return record_denoise(tza, config, **options)
    except Exception as err:
        return error_packet(str(err))


__all__ = [
    "DenoiseSetup",
    "check_recording",
    "denoise_setup",
    "inspect_model_packet",
    "kernels_bitmask",
    "program_accumulation",
    "record_denoise",
    "record_denoise_packet",
    "record_network",
    "record_network_packet",
    "submit_denoise",
    "submit_network",
]
