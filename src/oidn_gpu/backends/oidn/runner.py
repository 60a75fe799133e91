"""The oidn backend's runner: the caller's images through one Intel OIDN filter.

OIDN does the whole denoise itself (autoexposure, input processing, tiling by
``maxMemoryMB``, the network, output processing), so the runner does not follow the
facade's tile plan: it hands the images to one OIDN filter (on OIDN's CPU device where
they are; on its GPU devices copied into OIDN buffers in the device's memory, kept
across frames of one size: `uses_device_buffers`, `images.DeviceBuffers`), kept across
calls (its images and parameters set again only where they change, committed only
then), with OIDN's parameters from the plan's options (`filter_params`) and the model's
weights. The result is the image of a direct Intel OIDN call with the same images and
options, bit for bit.

It is an `AutoexposureRunner`: with HDR input and no ``input_scale`` OIDN computes the
scale itself (``inputScale`` NaN); the scale reported beside the result is oidn-gpu's
port of OIDN's CPU autoexposure (`image.autoexposure`, bit for bit the one OIDN's CPU
device uses; OIDN's GPU devices may differ in the last bits), computed only when
`Denoiser.info` reads it (`DeferredScale`).

Progress and cancel go through OIDN's progress monitor: ``progress`` hears OIDN's own
fractions (every operation of every tile), and returning False cancels OIDN's run
(`CancelledError`). OIDN writes the result into a new array, or into the caller's
``output`` only when it is scratch (`DenoiseImages.output_is_scratch`), so a cancelled
or failed run leaves the caller's array untouched.

`OidnTensorRunner` (on OIDN's CUDA device, where torch sees that GPU) is also a
`DeviceRunner`: torch tensors on that GPU are handed to OIDN by their device pointers.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oidn_gpu.backends.base import DenoiseImages, Progress
from oidn_gpu.backends.oidn.devices import OidnDevice
from oidn_gpu.backends.oidn.executor import OidnExecutor
from oidn_gpu.backends.oidn.images import (
    DeviceBuffers,
    ImageDesc,
    host_image,
    set_image,
    tensor_image,
)
from oidn_gpu.backends.plan import DenoisePlan
from oidn_gpu.errors import CancelledError, InvalidArgumentError, InvalidOperationError
from oidn_gpu.image.autoexposure import autoexposure


class TileSizeIgnoredWarning(UserWarning):
    """``tile_size`` given to the oidn backend, which lets Intel OIDN plan its tiles."""


QUALITY = {"fast": 4, "balanced": 5, "high": 6}  # OIDNQuality
SLOTS = ("color", "albedo", "normal", "output")


def filter_params(plan: DenoisePlan, autoexposed: bool) -> dict[str, Any]:
    """OIDN's filter parameters of a plan (name -> bool, int or float).

    A ``tile_size`` is not one of OIDN's parameters (OIDN plans its tiles by
    ``maxMemoryMB`` alone, and its tiles give the image of no tiles): it is ignored, with
    a `TileSizeIgnoredWarning`.

    Raises:
        InvalidArgumentError: a plan without its options.
    """
    options = plan.options
    if options is None:
        raise InvalidArgumentError(
            "the oidn backend needs the plan's options; make the plan with plan_denoise"
        )
    if options.tile_size is not None:
        warnings.warn(
            f"tile_size={options.tile_size} is ignored on the oidn backend: Intel OIDN plans "
            "its tiles itself, bounded by max_memory_mb",
            TileSizeIgnoredWarning,
            stacklevel=2,
        )
    params: dict[str, Any] = {}
    if options.filter_type == "RT":
        params.update(hdr=options.hdr, srgb=options.srgb)
    else:
        params["directional"] = options.directional
    params["quality"] = QUALITY[options.quality]
    params["inputScale"] = math.nan if autoexposed else float(plan.mode.input_scale)
    params["maxMemoryMB"] = -1 if options.max_memory_mb is None else int(options.max_memory_mb)
    return params


def uses_device_buffers(device: OidnDevice) -> bool:
    """Whether host images go to ``device`` through OIDN buffers in its own memory
    (`images.DeviceBuffers`): on OIDN's GPU devices, also those that can read host memory
    (slower there than one copy each way: `images`); OIDN's CPU device reads the
    caller's arrays where they are."""
    return device.on_gpu


@dataclass
class _Filter:
    """One OIDN filter and what it was last told (so only changes are set again)."""

    handle: Any
    filter_type: str
    images: dict[str, ImageDesc | None] = field(default_factory=dict)
    params: str = ""  # repr of the parameters (NaN compares equal as text)


class OidnRunner:
    """A `TileRunner` and `AutoexposureRunner` on an `OidnExecutor`'s device; see the
    module docstring.

    Args:
        executor: the device and weights (not owned: `close` leaves it open).
    """

    def __init__(self, executor: OidnExecutor) -> None:
        self.executor = executor
        self.oidn = executor.device.oidn
        self._filter: _Filter | None = None
        self._progress: Progress | None = None
        self._error: BaseException | None = None
        self._monitor = self.oidn.ffi.callback("OIDNProgressMonitorFunction", self._on_progress)
        device = executor.device
        self._buffers = DeviceBuffers(device) if uses_device_buffers(device) else None

    # -- the runner protocols ------------------------------------------------------------

    def run(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> np.ndarray:
        """The denoised ``[H, W, out_channels]`` image with ``plan.mode.input_scale``."""
        return self._run_host(images, plan, progress, autoexposed=False)

    def run_autoexposed(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> tuple[np.ndarray, float]:
        """The image with OIDN's own autoexposure, and that scale: a `DeferredScale`,
        computed when `Denoiser.info` first reads it, not beside OIDN's run (the host's
        autoexposure of a 1080p image takes longer than OIDN's whole denoise on its GPU
        devices, and competes with it for the cores on its CPU device)."""
        result = self._run_host(images, plan, progress, autoexposed=True)
        return result, DeferredScale(images.main)

    def close(self) -> None:
        """Release the filter and the device buffers (idempotent)."""
        self._release_filter()
        if self._buffers is not None:
            self._buffers.release()

    # -- one denoise ---------------------------------------------------------------------

    def _run_host(
        self,
        images: DenoiseImages,
        plan: DenoisePlan,
        progress: Progress | None,
        *,
        autoexposed: bool,
    ) -> np.ndarray:
        params = filter_params(plan, autoexposed)
        kept, descs = [], {}
        for slot, image in self._inputs(images).items():
            array, descs[slot] = host_image(image, slot)
            kept.append(array)
        given = images.output
        if given is not None and images.output_is_scratch:
            # the channels past the result's (an alpha) are left untouched
            out = given[:, :, : images.out_channels] if given.ndim == 3 else given
        else:
            dtype = np.float32 if given is None else given.dtype
            out = np.empty((plan.height, plan.width, images.out_channels), dtype)
        out_array, descs["output"] = host_image(out, "output")
        buffers = self._buffers
        if buffers is not None:  # OIDN's GPU devices: the images copied to its memory
            for slot, array in zip(list(descs)[:-1], kept, strict=True):
                descs[slot] = buffers.write(slot, array, descs[slot])
            descs["output"] = buffers.place("output", descs["output"])
        self._execute(plan.options.filter_type, params, descs, progress)
        if buffers is not None:
            out_array = buffers.read(descs["output"], out_array)
        if out_array is not out:  # OIDN wrote a dense copy (an odd output layout)
            out[...] = out_array.reshape(out.shape)
        return given if given is not None and images.output_is_scratch else out

    @staticmethod
    def _inputs(images: DenoiseImages) -> dict[str, Any]:
        inputs = {images.main_name: images.main}
        for name in ("albedo", "normal"):
            image = getattr(images, name)
            if image is not None:
                inputs[name] = image
        return inputs

    def _execute(
        self,
        filter_type: str,
        params: dict[str, Any],
        descs: dict[str, ImageDesc],
        progress: Progress | None,
    ) -> None:
        """Set what changed, commit if anything did, run OIDN's filter."""
        device = self.executor.device
        try:
            flt = self._filter_for(filter_type)
            changed = False
            for slot in SLOTS:
                desc = descs.get(slot)
                if flt.images.get(slot) != desc:
                    set_image(self.oidn, flt.handle, slot, desc)
                    flt.images[slot] = desc
                    changed = True
            if repr(params) != flt.params:
                self._set_params(flt, params)
                changed = True
            if changed:
                self.oidn.lib.oidnCommitFilter(flt.handle)
                device.check("commit the filter")
        except BaseException:
            self._release_filter()  # a filter left half set is made anew next time
            raise
        self._progress, self._error = progress, None
        try:
            self.oidn.lib.oidnExecuteFilter(flt.handle)
        finally:
            self._progress = None
        error, self._error = self._error, None
        try:
            device.check("run the filter")
        except CancelledError:  # by the callback's False, or its exception
            if error is not None:
                raise error from None
            raise
        except BaseException:
            self._release_filter()
            raise

    def _filter_for(self, filter_type: str) -> _Filter:
        flt = self._filter
        if flt is not None and flt.filter_type == filter_type:
            return flt
        self._release_filter()
        lib, ffi = self.oidn.lib, self.oidn.ffi
        handle = lib.oidnNewFilter(self.executor.device.handle, filter_type.encode())
        self.executor.device.check("create the filter")
        weights = self.executor.weights
        lib.oidnSetSharedFilterData(
            handle, b"weights", ffi.cast("void*", weights.ctypes.data), weights.nbytes
        )
        lib.oidnSetFilterProgressMonitorFunction(handle, self._monitor, ffi.NULL)
        self._filter = _Filter(handle, filter_type)
        return self._filter

    def _set_params(self, flt: _Filter, params: dict[str, Any]) -> None:
        lib = self.oidn.lib
        for name, value in params.items():
            key = name.encode()
            if isinstance(value, bool):
                lib.oidnSetFilterBool(flt.handle, key, value)
            elif isinstance(value, int):
                lib.oidnSetFilterInt(flt.handle, key, value)
            else:
                lib.oidnSetFilterFloat(flt.handle, key, value)
        self.executor.device.check("set the filter's parameters")
        flt.params = repr(params)

    def _on_progress(self, user: Any, fraction: float) -> bool:
        """OIDN's progress monitor: False cancels OIDN's run."""
        progress = self._progress
        if progress is None:
            return True
        try:
            return progress(float(fraction)) is not False
        except BaseException as err:  # raised by _execute once OIDN has stopped
            self._error = err
            return False

    def _release_filter(self) -> None:
        flt, self._filter = self._filter, None
        if flt is not None and self.executor.device.handle is not None:
            self.oidn.lib.oidnReleaseFilter(flt.handle)


class DeferredScale:
    """The autoexposure of a color image, computed on the first ``float()`` and kept.

    It reads the color as it is then: `Denoiser.info` reads it after the denoise that
    used it (an image changed in place in between gives that image's scale)."""

    def __init__(self, color: np.ndarray) -> None:
        self._color: np.ndarray | None = color
        self._scale = math.nan

    def __float__(self) -> float:
        if self._color is not None:
            self._scale, self._color = float(autoexposure(self._color)), None
        return self._scale


class OidnTensorRunner(OidnRunner):
    """`OidnRunner` on OIDN's CUDA device that is also a `DeviceRunner`: torch tensors on
    that GPU go to OIDN by their device pointers, the result is a new float32 tensor.

    OIDN runs on its own CUDA stream: the caller's current stream is waited for before
    OIDN reads the tensors, and OIDN's run is finished when the call returns. OIDN does
    not report the autoexposure scale it computed, and reading it here would copy the
    color to the host: `run_device_autoexposed` reports NaN.
    """

    @property
    def device(self) -> Any:
        import torch  # only for a caller's tensors

        return torch.device("cuda", self.executor.device.index)

    def run_device(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> Any:
        return self._run_tensors(images, plan, progress, autoexposed=False)

    def run_device_autoexposed(
        self, images: DenoiseImages, plan: DenoisePlan, progress: Progress | None = None
    ) -> tuple[Any, Any]:
        return self._run_tensors(images, plan, progress, autoexposed=True), math.nan

    def _run_tensors(
        self,
        images: DenoiseImages,
        plan: DenoisePlan,
        progress: Progress | None,
        *,
        autoexposed: bool,
    ) -> Any:
        import torch

        if self.executor.device.kind != "cuda":
            raise InvalidOperationError("torch tensors need the oidn backend's CUDA device")
        params = filter_params(plan, autoexposed)
        kept, descs = [], {}
        for slot, image in self._inputs(images).items():
            tensor, descs[slot] = tensor_image(image, slot)
            kept.append(tensor)
        out = torch.empty(
            (plan.height, plan.width, images.out_channels),
            dtype=torch.float32,
            device=self.device,
        )
        _, descs["output"] = tensor_image(out, "output")
        torch.cuda.current_stream(self.device).synchronize()  # the inputs are written
        self._execute(plan.options.filter_type, params, descs, progress)
        return out
