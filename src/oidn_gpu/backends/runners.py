"""The tile runners' part of the backend seam (re-exported by `backends.base`): the
images of one denoise (`DenoiseImages`) and what a `Backend.create_runner` makes: a
`TileRunner`, and the optional abilities a runner may add (`AutoexposureRunner`,
`DeviceRunner`, `HostInputsRunner`, `CoverageRunner`, `HostCoverageRunner`,
`BesideRunner`, `AlphaRunner`, `BufferAlphaRunner`, `SequenceRunner`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from oidn_gpu.backends.plan import DenoisePlan

Progress = Callable[[float], Any]


@dataclass(frozen=True)
class DenoiseImages:
    """The images of one denoise, as a `TileRunner` takes them.

    The arrays are whatever the runner works on (NumPy arrays for the host
    runner and the wgpu runner, a device backend may take its own tensors):
    ``[H, W]`` or ``[H, W, C]`` with C 1..3, alpha already split off.

    Attributes:
        main: the color image, or the albedo or normal image filtered alone.
        albedo, normal: auxiliary images given together with color (else None).
        out_channels: channels of the result (1..3, the main image's).
        output: None, or an ``[H, W, out_channels]`` float16/float32 NumPy array the
            runner may write the result into (converting as ``astype`` does) and return,
            instead of a new array; a runner that does not returns a new array, which
            the caller then copies.
        output_is_scratch: ``output`` is a new array that nobody sees when the run
            fails or is cancelled, so a runner may fill it tile by tile; False (the
            caller's own array): it is written only once the whole result is there.
        main_name: which of OIDN's images ``main`` is: ``"color"``, or ``"albedo"`` or
            ``"normal"`` filtered alone (a runner that hands the images to Intel OIDN's
            own filter sets that image).
    """

    main: Any
    albedo: Any = None
    normal: Any = None
    out_channels: int = 3
    output: Any = None
    output_is_scratch: bool = False
    main_name: str = "color"


@runtime_checkable
class TileRunner(Protocol):
    """Denoises whole images over a `DenoisePlan` on one executor: input processing, the
    network per tile, stitching and output processing.

    `run` reports the finished fraction after every tile through ``progress``;
    returning False cancels with `CancelledError` before any result is produced.
    """

    def run(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> Any:
        """The denoised ``[H, W, out_channels]`` float32 image (a runner's array type)."""
        ...

    def close(self) -> None:
        """Release what the runner owns (not the executor); idempotent."""
        ...


@runtime_checkable
class AutoexposureRunner(Protocol):
    """A `TileRunner` that computes OIDN's autoexposure on its device (wgpu, cuda).

    `run_autoexposed` denoises with the autoexposure scale of ``images.main`` (the
    color) computed where the image already is, instead of ``plan.mode.input_scale``,
    and returns it beside the result: no scale crosses to the host first.
    """

    def run_autoexposed(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> tuple[Any, float]:
        """``(denoised image, the input scale used)``."""
        ...


@runtime_checkable
class DeviceRunner(Protocol):
    """A `TileRunner` that denoises tensors where they already are (cuda): no host copies.

    The images of `DenoiseImages` are torch tensors on `device` (float16, float32,
    float64 or bfloat16, ``[H, W]`` or ``[H, W, C]`` with C 1..3, any strides); the
    runner copies them into buffers of its own (converting to float32 as NumPy's
    ``astype`` does, float16 kept), so fresh tensors every call reuse its captured
    work. The result is a float32 ``[H, W, out_channels]`` tensor the runner owns,
    valid until its next call; the work is queued on the caller's current stream,
    and nothing waits for it. ``progress`` hears 1.0 when the work is queued.
    """

    @property
    def device(self) -> Any:
        """The torch device the runner computes on."""
        ...

    def run_device(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> Any:
        """The denoised image, with ``plan.mode.input_scale``."""
        ...

    def run_device_autoexposed(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> tuple[Any, Any]:
        """``(denoised image, input scale)`` with OIDN's autoexposure of ``images.main``
        computed on the device; the scale is an object whose ``float()`` reads it (and
        waits for the frame), so nothing is read back unless asked for."""
        ...


@runtime_checkable
class HostInputsRunner(Protocol):
    """A `DeviceRunner` that keeps the device copies of its last NumPy frame's images
    (cuda): a second denoise on its device reads them there instead of uploading them
    again (`Denoiser.denoise` with ``alpha="denoise"`` and a prefilter: the alpha's albedo)."""

    def host_inputs(self) -> dict[str, Any]:
        """The last NumPy frame's images on the device by role (``"main"``,
        ``"albedo"``, ``"normal"``), valid until the runner's next call; empty when its
        last call was not a NumPy frame."""
        ...


@runtime_checkable
class CoverageRunner(Protocol):
    """A `DeviceRunner` with its own form of `image.coverage.fit_coverage_tensor` (cuda:
    two Triton kernels instead of dozens of torch ones)."""

    def fit_coverage(self, alpha: Any, guide: Any, *, clip: bool = False) -> Any:
        """The ``H x W`` alpha tensor fitted to the ``H x W x C`` guide tensor on the
        runner's device: a float32 ``H x W`` tensor there; with ``clip`` the fit of the
        alpha clipped to 0..1, clipped to 0..1 itself."""
        ...


@runtime_checkable
class HostCoverageRunner(Protocol):
    """A `TileRunner` that computes `image.coverage.fit_coverage` of host arrays on its
    device (wgpu: two compute passes instead of NumPy on the host's cores)."""

    def fit_coverage_host(self, alpha: Any, guide: Any) -> Any:
        """The ``H x W`` alpha array fitted to the ``H x W x C`` guide array: a float32
        ``H x W`` NumPy array."""
        ...


@runtime_checkable
class BesideRunner(Protocol):
    """A `DeviceRunner` whose device runs work beside other work it queued (cuda: on a side
    stream), as `Denoiser.denoise` runs an alpha's fit and network beside the colour's
    network."""

    def queued(self) -> Any:
        """A mark of the work the runner's device has queued so far (for `beside`)."""
        ...

    def beside(self, start: Any = None) -> AbstractContextManager[Callable[[Any], Any]]:
        """A context in which device work is queued beside other work: it starts once the
        work before ``start`` (a `queued` mark; default: all work queued so far) is done,
        and work queued after the context waits for it. It gives a function to pass each
        tensor made inside and used after it (the tensor, then safe to use and free)."""
        ...


@runtime_checkable
class AlphaRunner(Protocol):
    """A `TileRunner` that denoises a colour and its alpha as one frame of host images
    (cuda, wgpu): the ``H x W x 4`` image goes to the device at once, the alpha is computed there
    beside the colour's network, and the four channels come back at once."""

    def run_with_alpha(
        self,
        images: DenoiseImages,
        plan: DenoisePlan,
        alpha: Callable[[Any, Any], Any],
        progress: Progress | None = None,
        *,
        autoexposure: bool = False,
    ) -> tuple[Any, Any]:
        """``(denoised H x W x 4 image, input scale)``: ``images.main`` is the colour with
        its alpha (``H x W x 4``), ``images.output`` None or an ``H x W x 4`` array, and
        the result's alpha is ``alpha(plane, albedo)`` of the alpha plane and the albedo
        (or None) as the runner's tensors on its device; it returns an ``H x W`` float32
        tensor there. ``autoexposure``: the scale is the colour's autoexposure computed on
        the device (`AutoexposureRunner`), else ``plan.mode.input_scale``."""
        ...


@runtime_checkable
class BufferAlphaRunner(Protocol):
    """An `AlphaRunner` whose device images are buffers (wgpu's `GpuImage`): the alpha's
    network runs on a runner of the alpha's denoiser made on this runner's device
    (`on_device`), between this runner's fit (`fit_alpha`) and the clip of its result."""

    def on_device(self, options: Any) -> Any:
        """The backend ``options`` of a denoiser that runs on this runner's device."""
        ...

    def fit_alpha(self, plane: Any, albedo: Any) -> Any:
        """The alpha ``plane`` (one channel of the uploaded image) clipped to 0..1, fitted
        to the ``albedo`` image's coverage and clipped again (None: clipped only): a
        dense ``H x W x 1`` float32 image on the device; queued, not waited for."""
        ...

    def plane(self, name: str, height: int, width: int) -> Any:
        """A dense float32 ``H x W x 1`` image of this runner's buffer ``name``."""
        ...


@runtime_checkable
class SequenceRunner(Protocol):
    """A `TileRunner` that overlaps consecutive frames of one plan (wgpu): `run_many`
    submits frame ``i + 1`` before it returns frame ``i``."""

    def run_many(
        self, frames: Iterable[DenoiseImages], plan: DenoisePlan, *, autoexposure: bool = False
    ) -> Iterator[tuple[Any, float]]:
        """``(denoised image, input scale)`` per frame, in order (``autoexposure``: each
        frame's scale computed on the device, as `AutoexposureRunner.run_autoexposed`)."""
        ...
