"""The wgpu runner's device frame: images in GPU buffers and the per-tile bind groups.

`GpuImage` describes an image in a GPU buffer (any pixel and row stride, 1-3
channels read or written). `TileSet` is the device frame of one configuration
(images, output, mode passes, frame uniform, tile plan): every tile's params
uniforms and input/output bind groups, built once, and `TileSet.submit`, which
encodes one tile (input pass, network, output pass) into one submission.
`PendingFrame` is a submitted host frame waiting for its read back; `frame_of_item`
checks the host frame of one item of a sequence of frames.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from oidn_gpu.backends.frame_runner import HostFrame, host_frame
from oidn_gpu.backends.gpu_device import BufferUsage
from oidn_gpu.backends.wgpu.resources import BUFFER
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels import io_passes
from oidn_gpu.kernels.spec import Kernel

F32_BYTES = 4

ROLES = (io_passes.ImageRole.MAIN, io_passes.ImageRole.ALBEDO, io_passes.ImageRole.NORMAL)


class FrameOwner(Protocol):
    """What a `TileSet` uses of its runner: the device, executor and resource tracker."""

    _device: Any
    _resources: Any
    executor: Any


@dataclass(frozen=True)
class GpuImage:
    """An image in a GPU buffer (STORAGE usage; COPY_SRC to read it back).

    Strides and offset are in elements of ``dtype`` (``"float32"``, or ``"float16"``
    for inputs: the input pass and autoexposure widen halves on the GPU; outputs are
    float32); defaults describe a dense ``[height, width, channels]`` image. Only the
    first ``channels`` (1..3) values of a pixel are read or written, so RGBA data with
    ``pixel_stride=4, channels=3`` keeps its alpha.
    """

    buffer: Any
    height: int
    width: int
    channels: int = 3
    pixel_stride: int | None = None
    row_stride: int | None = None
    offset: int = 0
    dtype: str = "float32"

    @property
    def element_bytes(self) -> int:
        return 2 if self.dtype == "float16" else F32_BYTES

    @property
    def pixel_stride_elems(self) -> int:
        return self.pixel_stride if self.pixel_stride is not None else self.channels

    @property
    def row_stride_elems(self) -> int:
        if self.row_stride is not None:
            return self.row_stride
        return self.width * self.pixel_stride_elems

    def check(self, what: str) -> None:
        if self.dtype not in ("float32", "float16"):
            raise InvalidArgumentError(
                f"{what} image has dtype {self.dtype!r}; expected 'float32' or 'float16'"
            )
        if not 1 <= self.channels <= 3:
            raise InvalidArgumentError(
                f"{what} image has {self.channels} channels; expected 1 to 3"
            )
        if self.pixel_stride_elems < self.channels:
            raise InvalidArgumentError(f"{what} image: pixel stride is smaller than pixel size")
        if self.row_stride_elems < self.width * self.pixel_stride_elems:
            raise InvalidArgumentError(
                f"{what} image: row stride is smaller than width * pixel stride"
            )
        last = (
            self.offset
            + (self.height - 1) * self.row_stride_elems
            + (self.width - 1) * self.pixel_stride_elems
            + self.channels
        )
        size = int(getattr(self.buffer, "size", 0))
        if last * self.element_bytes > size:
            raise InvalidArgumentError(
                f"{what} image needs {last * self.element_bytes} bytes but its buffer has {size}"
            )

    def params(self, prefix: str) -> dict[str, int]:
        return {
            f"{prefix}_offset": self.offset,
            f"{prefix}_pixel_stride": self.pixel_stride_elems,
            f"{prefix}_row_stride": self.row_stride_elems,
            f"{prefix}_channels": self.channels,
        }


@dataclass(frozen=True)
class TileRect:
    """A finished rectangle of the output image (interactive mode)."""

    index: int
    count: int
    y: int
    x: int
    height: int
    width: int
    elapsed_ms: float


@dataclass(frozen=True)
class PendingFrame:
    """A submitted host frame: its readback buffer, the checked host images, host times."""

    readback: Any
    host: HostFrame
    upload_ms: float
    submit_ms: float
    uploads: tuple[Any, ...] = ()  # upload buffers to map again once the frame is done


@dataclass(frozen=True)
class Passes:
    """The input and output pass kernels of one mode, with their compiled pipelines."""

    input_kernel: Kernel
    output_kernel: Kernel
    input_pipeline: Any
    output_pipeline: Any


class TileSet:
    """Per-tile params uniforms and bind groups of one (buffers, plan, mode); submits tiles."""

    def __init__(
        self,
        owner: FrameOwner,
        images: list[GpuImage],
        output: GpuImage,
        passes: Passes,
        frame: Any,
        plan: Any,
        network_input: Any,
        network_output: Any,
    ) -> None:
        self.device = owner._device
        self.executor = owner.executor
        self.passes = passes
        self.plan = plan
        self.tile_h, self.tile_w = int(plan.tile_h), int(plan.tile_w)
        self.frame = frame
        # Strong references: the cache key holds these objects, so their ids stay unique.
        self.images = images
        self.output = output
        self.uniforms: list[Any] = []
        self.groups: list[tuple[Any, Any]] = []
        image_params: dict[str, int] = {}
        for image, role in zip(images, ROLES, strict=False):
            image_params.update(image.params(role.value))
        for index, tile in enumerate(plan.tiles):
            in_params = passes.input_kernel.pack_params(
                tensor_height=self.tile_h,
                tensor_width=self.tile_w,
                dst_y=tile.buf_y,
                dst_x=tile.buf_x,
                src_y=tile.in_y,
                src_x=tile.in_x,
                copy_height=tile.in_h,
                copy_width=tile.in_w,
                **image_params,
            )
            out_params = passes.output_kernel.pack_params(
                tensor_width=self.tile_w,
                src_y=tile.src_y,
                src_x=tile.src_x,
                dst_y=tile.out_y,
                dst_x=tile.out_x,
                height=tile.out_h,
                width=tile.out_w,
                out_offset=output.offset,
                out_pixel_stride=output.pixel_stride_elems,
                out_row_stride=output.row_stride_elems,
                out_channels=output.channels,
            )
            label = f"oidn/tile/{index}"
            in_uniform = self._uniform(owner, f"{label}/input/params", in_params)
            out_uniform = self._uniform(owner, f"{label}/output/params", out_params)
            in_group = self.device.create_bind_group(
                f"{label}/input",
                passes.input_pipeline,
                [*(img.buffer for img in images), network_input, in_uniform, frame],
            )
            out_group = self.device.create_bind_group(
                f"{label}/output",
                passes.output_pipeline,
                [network_output, output.buffer, out_uniform, frame],
            )
            self.groups.append((in_group, out_group))

    def _uniform(self, owner: FrameOwner, label: str, data: bytes) -> Any:
        buffer = owner._resources.track(
            BUFFER, self.device.create_buffer_with_data(label, data, BufferUsage.UNIFORM)
        )
        self.uniforms.append(buffer)
        return buffer

    def submit(self, index: int, prelude: Callable[[Any], None] | None = None) -> None:
        """Encode and submit tile ``index``: ``prelude(encoder)`` (the frame's autoexposure),
        input pass, network, output pass."""
        tile = self.plan.tiles[index]
        in_group, out_group = self.groups[index]
        passes = self.passes
        label = f"oidn/tile/{index}"
        encoder = self.device.create_command_encoder(label)
        if prelude is not None:
            prelude(encoder)
        encoder.dispatch(
            passes.input_pipeline,
            in_group,
            passes.input_kernel.grid(0, self.tile_h, self.tile_w),
            label=f"{label}/input",
        )
        self.executor.encode(encoder, self.tile_h, self.tile_w)
        encoder.dispatch(
            passes.output_pipeline,
            out_group,
            passes.output_kernel.grid(0, tile.out_h, tile.out_w),
            label=f"{label}/output",
        )
        self.device.submit([encoder.finish()])


def frame_of_item(images: tuple[Any, ...], out_channels: int | None) -> HostFrame:
    """The checked host frame of a `GpuDenoiser.denoise_many` item: ``(main, albedo,
    normal)``, optionally followed by an ``output`` array."""
    if len(images) > 4:
        raise InvalidArgumentError(
            f"a frame has {len(images)} arrays; expected (main, albedo, normal[, output])"
        )
    padded = (*images, None, None, None)[:4]
    return host_frame(padded[:3], out_channels=out_channels, output=padded[3])
