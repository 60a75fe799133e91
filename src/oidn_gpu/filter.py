"""OIDN-style facade: images and options in, the denoised image out.

`Denoiser` reproduces what Intel OIDN 2.5.1's ``RT`` and ``RTLightmap``
filters compute (see ``oidn-semantics.md``): it validates the images (OIDN's
error messages), picks the weights (``model.weights``), computes the input
scale (autoexposure for HDR), builds the network input in the transfer space
(``image.process``), runs the network tile by tile (``image.tiling``) on a
backend executor, stitches the kept rectangles and applies the output
processing. A `Denoiser` caches loaded models and executors, so one object
serves every frame of a sequence; `denoise` is the one-call form.

The caller's output array is written only after every tile has finished, so a
cancelled or failed execution leaves it untouched, and in-place use (output
aliasing an input) is safe.

Threads: a `Denoiser` may be shared by threads. Its calls are serialized by a
per-denoiser lock (as OIDN serializes the calls of one device), so each call
sees the denoiser's models and buffers alone; separate denoisers run
concurrently. Options are validated when the denoiser is constructed.
"""

from __future__ import annotations

import math
import numbers
import os
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from oidn_gpu.backends import check_backend_options, resolve_backend
from oidn_gpu.errors import (
    CancelledError,
    InvalidArgumentError,
    InvalidOperationError,
    WeightsNotFoundError,
)
from oidn_gpu.image import arrays
from oidn_gpu.model import unet

FilterType = Literal["RT", "RTLightmap"]
Progress = Callable[[float], Any]

# OIDN rejects images wider or taller than this (api/api.cpp, "image size is too large").
MAX_IMAGE_DIM = 65536
# Tile origins and the padded tile size are multiples of this (4 pooling levels).
TILE_ALIGNMENT = 16

_FILTER_TYPES = ("RT", "RTLightmap")
_PREFILTERS = ("none", "fast", "accurate")


@dataclass(frozen=True)
class DenoiserInfo:
    """What ran (or will run) for the last denoise call."""

    backend: str
    device: str
    precision: str
    weights: str
    weights_sha256: str | None
    input_scale: float | None
    tiles: int
    kernels: dict[str, str] = field(default_factory=dict)
    # layer -> why its requested kernel (``kernel=``/``gemm=``) was replaced (wgpu backend)
    kernel_fallbacks: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Images:
    """Validated inputs: float32 RGB-broadcastable arrays, plus the color's alpha."""

    color: np.ndarray | None
    albedo: np.ndarray | None
    normal: np.ndarray | None
    main_channels: int
    alpha: np.ndarray | None
    height: int
    width: int
    dtype: np.dtype


def _check_image(name: str, image: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """Validate one image; returns (pixels with at most 3 channels, alpha or None)."""
    if not isinstance(image, np.ndarray):
        raise InvalidOperationError(
            f"unsupported input image format: {name} is a {type(image).__name__}; "
            "expected a numpy array"
        )
    if image.dtype not in (np.float32, np.float16):
        raise InvalidOperationError(
            f"unsupported input image format: {name} has dtype {image.dtype}; "
            "expected float32 or float16"
        )
    if image.ndim == 2:
        image = image[:, :, None]
    if image.ndim != 3 or not 1 <= image.shape[2] <= 4:
        raise InvalidOperationError(
            f"unsupported input image format: {name} has shape {image.shape}; "
            "expected HxW or HxWxC with C from 1 to 4"
        )
    h, w = image.shape[:2]
    if h > MAX_IMAGE_DIM or w > MAX_IMAGE_DIM:
        raise InvalidArgumentError(
            f"image size is too large: {name} is {w}x{h}; at most {MAX_IMAGE_DIM} per side"
        )
    if image.shape[2] == 4:
        return image[:, :, :3], image[:, :, 3]
    return image, None


def _validate_images(color: Any, albedo: Any, normal: Any) -> _Images:
    named = (("color", color), ("albedo", albedo), ("normal", normal))
    given = {n: a for n, a in named if a is not None}
    if not given:
        raise InvalidOperationError("input image not specified")
    checked = {n: _check_image(n, a) for n, a in given.items()}
    main_name = next(iter(checked))
    main, alpha = checked[main_name]
    h, w = main.shape[:2]
    for name, (pixels, _) in checked.items():
        if pixels.shape[:2] != (h, w):
            raise InvalidOperationError(
                f"image size mismatch: {name} is {pixels.shape[1]}x{pixels.shape[0]}, "
                f"{main_name} is {w}x{h}"
            )
    return _Images(
        color=checked["color"][0] if "color" in checked else None,
        albedo=checked["albedo"][0] if "albedo" in checked else None,
        normal=checked["normal"][0] if "normal" in checked else None,
        main_channels=main.shape[2] + (1 if alpha is not None else 0),
        alpha=alpha,
        height=h,
        width=w,
        dtype=given[main_name].dtype,
    )


def _check_output(output: Any, images: _Images) -> np.ndarray | None:
    if output is None:
        return None
    if not isinstance(output, np.ndarray) or output.dtype not in (np.float32, np.float16):
        raise InvalidOperationError(
            "unsupported output image format: expected a float32 or float16 numpy array, "
            f"got {getattr(output, 'dtype', type(output).__name__)}"
        )
    shape = output.shape if output.ndim == 3 else (*output.shape, 1)
    if output.ndim not in (2, 3):
        raise InvalidOperationError(f"unsupported output image format: shape {output.shape}")
    if shape[:2] != (images.height, images.width):
        raise InvalidOperationError(
            f"image size mismatch: output is {shape[1]}x{shape[0]}, "
            f"input is {images.width}x{images.height}"
        )
    if shape[2] != images.main_channels:
        raise InvalidOperationError(
            f"input/output image channel count mismatch: input has {images.main_channels}, "
            f"output has {shape[2]}"
        )
    if not output.flags.writeable:
        raise InvalidArgumentError("output array is read-only; pass a writeable array")
    return output


def _check_bool(name: str, value: Any) -> bool:
    """A boolean option: True or False (NumPy booleans too), never 1 or "yes"."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidArgumentError(
            f"invalid value for parameter '{name}': {value!r} ({type(value).__name__}); "
            "expected True or False"
        )
    return bool(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _check_input_scale(value: Any) -> float | None:
    """None or NaN: automatic (autoexposure for HDR, else 1); else a finite number >= 0.

    OIDN 2.5.1 accepts any float, but an infinite scale gives NaN or zero pixels and a
    negative one flips the sign of the image, so those are refused here.
    """
    if value is None:
        return None
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        raise InvalidArgumentError(
            f"invalid value for parameter 'input_scale': {value!r} ({type(value).__name__}); "
            "expected a number or None"
        )
    scale = float(value)
    if math.isnan(scale):
        return None
    if math.isinf(scale) or scale < 0:
        raise InvalidArgumentError(
            f"invalid value for parameter 'input_scale': {scale}; expected a finite number "
            ">= 0 (or None/NaN for automatic)"
        )
    return scale


def _check_max_memory_mb(value: Any) -> int | None:
    """None or an int: OIDN's ``maxMemoryMB`` (>= 0 a budget in MiB, < 0 the default)."""
    if value is None:
        return None
    if not _is_int(value):
        raise InvalidArgumentError(
            f"invalid value for parameter 'max_memory_mb': {value!r} ({type(value).__name__}); "
            "expected an int (MiB) or None"
        )
    return int(value)


def _check_tile_size(value: Any) -> int | None:
    if value is None:
        return None
    if not _is_int(value) or value < 1:
        raise InvalidArgumentError(
            f"invalid value for parameter 'tile_size': {value!r}; expected a positive int "
            "(pixels) or None"
        )
    return int(value)


def _load_custom_weights(source: Any):  # -> ValidatedModel
    """Load a custom ``.tza`` (path or bytes) now, so a bad file fails at construction."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise WeightsNotFoundError(f"weights file not found: '{path}'")
        try:
            return unet.load_model(path)
        except OSError as err:
            raise InvalidArgumentError(
                f"cannot read weights file '{path}': {err.strerror or err}"
            ) from None
    if isinstance(source, (bytes, bytearray, memoryview)):
        return unet.load_model(source)
    raise InvalidArgumentError(
        f"invalid value for parameter 'weights': a {type(source).__name__}; "
        "expected a .tza path or its bytes"
    )


def _normalize_quality(quality: Any) -> str:
    from oidn_gpu.model.weights import parse_quality

    return parse_quality(quality).value


class Denoiser:
    """A reusable OIDN filter (``RT`` or ``RTLightmap``) over one backend.

    Args:
        filter_type: ``"RT"`` (renders) or ``"RTLightmap"`` (lightmaps).
        hdr: the color image is HDR (RT only).
        srgb: the LDR color image is sRGB-encoded already (RT only).
        clean_aux: albedo and normal are noise-free (selects the ``calb_cnrm`` weights).
        quality: ``"fast"``, ``"balanced"`` or ``"high"`` (OIDN's default).
        input_scale: multiplies the main input; None means autoexposure for HDR, else 1.
        directional: RTLightmap only: the input holds directional coefficients.
        prefilter: ``"none"``; ``"fast"`` treats the aux images as clean;
            ``"accurate"`` first denoises albedo and normal with OIDN's
            ``rt_alb``/``rt_nrm`` networks, then the color with clean-aux weights.
        weights: a custom ``.tza`` file (path or bytes) replacing the built-in choice.
        weights_dir: where the large (quality ``high``) weights live; see
            `oidn_gpu.model.weights.weights_path`.
        backend: ``"auto"``, ``"reference"`` (NumPy) or ``"wgpu"``.
        precision, kernel, gemm: wgpu backend options (``"auto"``, ``"fp16"``, ``"fp32"``; ...).
        max_memory_mb: OIDN's memory budget; None or negative: at most 2160x2160 px per tile.
        tile_size: if set, tiles of at most this edge (px) instead of OIDN's plan.
        device: a ``wgpu.GPUDevice`` to run on (wgpu backend; with ``backend="auto"`` a
            device selects wgpu).

    Every option is validated here (`InvalidArgumentError` naming the parameter, the
    value and what is expected): booleans must be ``bool``, ``input_scale`` finite and
    >= 0, ``tile_size`` and ``max_memory_mb`` ints; a custom ``weights`` file is read
    and checked now. ``kernel``, ``gemm`` and ``precision="fp16"`` are refused when the
    backend (also as picked by ``"auto"``) is ``reference``.

    Threads: one denoiser may be shared by threads. Its calls are serialized (one
    `denoise` at a time; `close` waits for a running call), so results equal those of
    sequential calls; separate denoisers run concurrently. Denoisers given the same
    ``device`` take turns on its queue.
    """

    def __init__(
        self,
        *,
        filter_type: FilterType = "RT",
        hdr: bool = False,
        srgb: bool = False,
        clean_aux: bool = False,
        quality: Any = "high",
        input_scale: float | None = None,
        directional: bool = False,
        prefilter: str = "none",
        weights: str | os.PathLike[str] | bytes | None = None,
        weights_dir: str | os.PathLike[str] | None = None,
        backend: str = "auto",
        precision: str = "auto",
        kernel: str = "auto",
        gemm: Any = None,
        max_memory_mb: int | None = None,
        tile_size: int | None = None,
        device: Any = None,
    ) -> None:
        if filter_type not in _FILTER_TYPES:
            raise InvalidArgumentError(
                f"unknown filter type: '{filter_type}'; expected 'RT' or 'RTLightmap'"
            )
        if prefilter not in _PREFILTERS:
            raise InvalidArgumentError(
                f"unknown prefilter '{prefilter}'; expected 'none', 'fast' or 'accurate'"
            )
        hdr = _check_bool("hdr", hdr)
        srgb = _check_bool("srgb", srgb)
        clean_aux = _check_bool("clean_aux", clean_aux)
        directional = _check_bool("directional", directional)
        tile_size = _check_tile_size(tile_size)
        max_memory_mb = _check_max_memory_mb(max_memory_mb)
        input_scale = _check_input_scale(input_scale)
        if weights_dir is not None and not isinstance(weights_dir, (str, os.PathLike)):
            raise InvalidArgumentError(
                f"invalid value for parameter 'weights_dir': a {type(weights_dir).__name__}; "
                "expected a folder path or None"
            )
        if filter_type == "RTLightmap" and (hdr or srgb):
            warnings.warn(
                "hdr and srgb are not parameters of the RTLightmap filter and are ignored",
                stacklevel=2,
            )
            hdr = srgb = False
        self.filter_type: FilterType = filter_type
        self.hdr = hdr
        self.srgb = srgb
        self.clean_aux = clean_aux
        self.quality = _normalize_quality(quality)
        self.input_scale = input_scale
        self.directional = directional
        self.prefilter = prefilter
        self.weights_dir = weights_dir
        self.max_memory_mb = max_memory_mb
        self.tile_size = tile_size
        self._custom_weights = weights
        # A device given with backend "auto" asks for the wgpu backend on that device.
        if backend == "auto" and device is not None:
            self.backend = "wgpu"
        else:
            self.backend = resolve_backend(backend)
        check_backend_options(
            self.backend,
            precision=precision,
            kernel=kernel,
            gemm=gemm,
            device=device,
            requested=backend,
        )
        self._backend_options = {
            "backend": self.backend,
            "precision": precision,
            "kernel": kernel,
            "gemm": gemm,
            "device": device,
        }
        self._models: dict[str, Any] = {}
        if weights is not None:
            self._models["custom"] = _load_custom_weights(weights)
        self._executors: dict[str, Any] = {}
        self._gpu_pipelines: dict[str, Any] = {}
        self._prefilters: dict[str, Denoiser] = {}
        self._last_info: DenoiserInfo | None = None
        # Serializes denoise and close: the models, executors and their scratch buffers
        # are per denoiser and reused across calls. Reentrant, so that a progress
        # callback calling back into this denoiser gets a clear error, not a deadlock.
        self._lock = threading.RLock()
        self._running = False
        self._closed = False

    # -- lifetime -------------------------------------------------------------

    def close(self) -> None:
        """Release every executor (and its GPU resources); idempotent.

        Waits for a `denoise` running in another thread to finish first.

        Raises:
            InvalidOperationError: called from inside this denoiser's running call
                (a progress callback).
        """
        with self._lock:
            self._check_not_running("close")
            self._closed = True
            for pipeline in self._gpu_pipelines.values():
                pipeline.close()
            self._gpu_pipelines.clear()
            for executor in self._executors.values():
                executor.close()
            self._executors.clear()
            for sub in self._prefilters.values():
                sub.close()
            self._prefilters.clear()

    def __enter__(self) -> Denoiser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def info(self) -> DenoiserInfo | None:
        """What the last `denoise` call (of any thread) ran: backend, device, precision,
        weights, tiles."""
        return self._last_info

    def _check_not_running(self, what: str) -> None:
        # Only the thread holding the lock gets here while a call runs: the caller is
        # that call's own progress callback.
        if self._running:
            raise InvalidOperationError(
                f"{what}() was called from inside a running denoise of the same Denoiser "
                "(from its progress callback); use another Denoiser, or call it after "
                "denoise returns"
            )

    # -- model and executor ---------------------------------------------------

    def _model(self, images: _Images, clean_aux: bool):  # -> ValidatedModel
        from oidn_gpu.model import weights

        count = sum(x is not None for x in (images.color, images.albedo, images.normal))
        # Validates the combination of inputs and flags with OIDN's messages even when
        # custom weights replace the built-in choice.
        name: str | None = None
        try:
            name = weights.select_weights(
                self.filter_type,
                color=images.color is not None,
                albedo=images.albedo is not None,
                normal=images.normal is not None,
                hdr=self.hdr,
                srgb=self.srgb,
                clean_aux=clean_aux,
                quality=self.quality,
                directional=self.directional,
            )
        except InvalidOperationError as err:
            if self._custom_weights is None or "unsupported combination" not in str(err):
                raise
        if self._custom_weights is not None:
            key = "custom"
            model = self._models[key]  # loaded at construction
            if model.input_channels != 3 * count:
                raise InvalidArgumentError(
                    f"the custom weights take {model.input_channels} input channels but "
                    f"{count} image(s) = {3 * count} channels were given"
                )
            return key, model
        assert name is not None
        if name not in self._models:
            self._models[name] = weights.load_builtin(name, self.weights_dir)
        return name, self._models[name]

    def _executor(self, key: str, model: Any):  # -> NetworkExecutor
        if key not in self._executors:
            from oidn_gpu.backends import create_executor

            executor = create_executor(model, **self._backend_options)
            self._executors[key] = executor
            if self.backend == "wgpu":
                from oidn_gpu.backends.wgpu.pipeline import GpuDenoiser

                self._gpu_pipelines[key] = GpuDenoiser(executor)
        return self._executors[key]

    # -- denoising --------------------------------------------------------------

    def denoise(
        self,
        color: Any = None,
        albedo: Any = None,
        normal: Any = None,
        *,
        output: Any = None,
        progress: Progress | None = None,
    ) -> Any:
        """Denoise one image; see the class docstring for the options.

        Args:
            color, albedo, normal: HxW or HxWxC images of one size (C 1..4, a 4th channel
                is alpha and is passed through): NumPy arrays, torch tensors, PIL images
                (modes L, RGB, RGBA, I;16, F), or arrays with ``__array__`` or
                ``__dlpack__``; float16, float32, float64, or uint8/uint16 holding LDR
                values (``v / 255``, ``v / 65535``; for the normal ``2 v / max - 1``).
                Integer colors are refused with ``hdr`` and by RTLightmap. torch CUDA
                tensors are copied to the host and back.
            output: optional image to write into (may alias an input); same size and
                channel count as the main input. NumPy and CPU torch float16/float32
                outputs are written in place; other types get the result copied in.
            progress: called with the finished fraction (0..1) before the first and after
                every tile; returning ``False`` cancels with `CancelledError` and leaves
                ``output`` untouched.

        Returns:
            The denoised image: ``output`` if given, else of the main input's type, shape
            and dtype (the main input is the color, else the albedo, else the normal);
            integers are rounded and clipped, an HxW input gives an HxW result.

        Calls on one denoiser from several threads run one at a time.

        Raises:
            InvalidOperationError, InvalidArgumentError: OIDN's errors.
            WeightsNotFoundError: a large weights file is not installed.
            CancelledError: ``progress`` returned False.
        """
        lightmap = self.filter_type == "RTLightmap"
        call = arrays.as_call(color, albedo, normal, output, hdr=self.hdr or lightmap)
        with self._lock:
            self._check_not_running("denoise")
            self._running = True
            try:
                result = self._denoise(call.color, call.albedo, call.normal, call.output, progress)
            finally:
                self._running = False
        return call.finish(result)

    def denoise_many(self, frames: Iterable[Any]) -> Iterator[Any]:
        """Denoise a sequence of frames, yielding each result as `denoise` returns it.

        Args:
            frames: each item is a color image, a ``(color, albedo, normal)`` tuple
                (None for an image not given) or a mapping with those keys; images as
                `denoise` takes them.

        On the wgpu backend, consecutive frames of one size with the same images are
        overlapped: frame ``i + 1`` is uploaded and submitted to the GPU before frame
        ``i`` is read back, so the host's transfers hide behind the GPU's work. Each
        result is the image `denoise` gives for that frame (`info` describes the frame
        last yielded). Other backends, and prefiltering, denoise one frame at a time.

        Raises:
            The errors of `denoise`. Frames are read one ahead, so a frame's error
            can come before the previous frame's result.
        """
        items = (_frame_images(frame) for frame in frames)
        if self.backend != "wgpu" or self.prefilter != "none":
            for color, albedo, normal in items:
                yield self.denoise(color, albedo, normal)
            return
        lightmap = self.filter_type == "RTLightmap"
        queue: deque[_Frame] = deque()

        def prepared() -> Iterator[_Frame]:
            for color, albedo, normal in items:
                call = arrays.as_call(color, albedo, normal, None, hdr=self.hdr or lightmap)
                with self._lock:
                    frame = self._prepare_frame(call)
                yield frame

        source = _Peekable(prepared())
        while source.peek() is not None:
            first = source.peek()
            if first.inputs[0].size == 0:  # an empty image: nothing for the GPU
                source.next()
                yield first.call.finish(_store(self._run(first.images, None), first.images, None))
                continue

            def batch(signature: tuple[Any, ...] = first.signature) -> Iterator[tuple]:
                while (frame := source.peek()) is not None and frame.signature == signature:
                    queue.append(source.next())
                    yield frame.inputs

            pipeline = self._gpu_pipelines[first.key]
            results = pipeline.denoise_many(
                batch(),
                mode=first.mode,
                plan=first.plan,
                out_channels=first.out_channels,
                autoexposure=first.autoexposure,
            )
            for result in _locked(results, self._lock):
                frame = queue.popleft()
                yield frame.call.finish(self._finish_frame(frame, result, pipeline))

    def _prepare_frame(self, call: Any) -> _Frame:
        """Validate one frame of `denoise_many` and what its GPU denoise takes."""
        if self._closed:
            raise InvalidOperationError("the denoiser is closed")
        color, albedo, normal = call.color, call.albedo, call.normal
        if self.filter_type == "RTLightmap":
            albedo = normal = None
        images = _validate_images(color, albedo, normal)
        key, model = self._model(images, self.clean_aux)
        h, w = images.height, images.width
        on_gpu = self.input_scale is None and images.color is not None
        mode = self._mode(images, device_autoexposure=on_gpu and h > 0 and w > 0)
        out_channels = images.main_channels - (1 if images.alpha is not None else 0)
        self._executor(key, model)
        plan = self._tile_plan(max(h, 1), max(w, 1), model)
        main = next(a for a in (images.color, images.albedo, images.normal) if a is not None)
        aux = (images.albedo, images.normal) if images.color is not None else (None, None)
        signature = (key, h, w, out_channels, tuple(a is None for a in aux), mode)
        return _Frame(call, images, key, model, mode, plan, out_channels,
                      on_gpu and bool(mode.hdr), (main, *aux), signature)  # fmt: skip

    def _finish_frame(self, frame: _Frame, result: np.ndarray, pipeline: Any) -> np.ndarray:
        mode = frame.mode
        if frame.autoexposure:
            from oidn_gpu.image import process

            mode = process.Mode(mode.transfer, mode.hdr, mode.snorm, pipeline.last_input_scale)
            process.warn_if_autoexposure_blackens(frame.inputs[0], mode.input_scale)
        self._record_info(frame.key, frame.model, mode, frame.plan)
        return _store(result, frame.images, None)

    def _record_info(self, key: str, model: Any, mode: Any, plan: Any) -> None:
        info = self._executors[key].info()
        self._last_info = DenoiserInfo(
            backend=info.backend,
            device=info.device,
            precision=info.precision,
            weights=key if key != "custom" else (model.name or "custom"),
            weights_sha256=getattr(model, "sha256", None),
            input_scale=mode.input_scale,
            tiles=len(plan.tiles),
            kernels=dict(info.kernels),
            kernel_fallbacks=dict(getattr(info, "fallbacks", {})),
        )

    def _denoise(
        self,
        color: Any,
        albedo: Any,
        normal: Any,
        output: Any,
        progress: Progress | None,
    ) -> np.ndarray:
        if self._closed:
            raise InvalidOperationError("the denoiser is closed")
        if self.filter_type == "RTLightmap" and (albedo is not None or normal is not None):
            warnings.warn(
                "the RTLightmap filter takes only a color image; albedo and normal are ignored",
                stacklevel=3,
            )
            albedo = normal = None
        images = _validate_images(color, albedo, normal)
        out = _check_output(output, images)
        if self.filter_type == "RT" and images.color is not None and self.prefilter != "none":
            return self._denoise_prefiltered(images, color, albedo, normal, out, progress)
        result = self._run(images, progress)
        return _store(result, images, out)

    def _denoise_prefiltered(
        self,
        images: _Images,
        color: Any,
        albedo: Any,
        normal: Any,
        out: np.ndarray | None,
        progress: Progress | None,
    ) -> np.ndarray:
        """Blender-style prefiltering of noisy aux images, then clean-aux color denoising."""
        if self.prefilter == "accurate":
            stages = [n for n, a in (("albedo", albedo), ("normal", normal)) if a is not None]
            total = len(stages) + 1
            for index, name in enumerate(stages):
                sub = self._prefilter_denoiser(name)
                part = _scaled_progress(progress, index / total, 1 / total)
                clean = sub.denoise(**{name: images.albedo if name == "albedo" else images.normal},
                                    progress=part)
                if name == "albedo":
                    albedo = clean
                else:
                    normal = clean
            progress = _scaled_progress(progress, len(stages) / total, 1 / total)
        clean_images = _validate_images(color, albedo, normal)
        # The aux images are clean now (prefiltered, or declared clean by "fast").
        result = self._run(clean_images, progress, clean_aux=clean_images.albedo is not None)
        return _store(result, images, out)

    def _prefilter_denoiser(self, name: str) -> Denoiser:
        if name not in self._prefilters:
            options = dict(self._backend_options)
            self._prefilters[name] = Denoiser(
                quality=self.quality,
                weights_dir=self.weights_dir,
                max_memory_mb=self.max_memory_mb,
                tile_size=self.tile_size,
                **options,
            )
        return self._prefilters[name]

    def _mode(self, images: _Images, *, device_autoexposure: bool = False):  # -> process.Mode
        """The processing mode; with ``device_autoexposure`` an automatic scale is left
        at 1 for the GPU pipeline to compute (see `_needs_autoexposure`)."""
        from oidn_gpu.image import autoexposure, process, transfer

        if self.filter_type == "RT":
            hdr = self.hdr
            snorm = images.color is None and images.albedo is None
        else:
            hdr = not self.directional
            snorm = self.directional
        tf = transfer.transfer_for(
            self.filter_type,
            hdr=hdr,
            srgb=self.srgb,
            snorm=snorm,
            directional=self.directional,
        )
        if self.input_scale is not None:
            scale = self.input_scale
        elif hdr and device_autoexposure:
            scale = 1.0  # placeholder: the GPU pipeline writes the frame's scale itself
        elif hdr:
            assert images.color is not None
            scale = autoexposure.autoexposure(images.color)
            process.warn_if_autoexposure_blackens(images.color, scale)
        else:
            scale = 1.0
        return process.Mode(transfer=tf, hdr=hdr, snorm=snorm, input_scale=scale)

    def _run(
        self, images: _Images, progress: Progress | None, *, clean_aux: bool | None = None
    ) -> np.ndarray:
        """Denoise validated images; returns HxWxC float32 (C = main channels sans alpha)."""
        key, model = self._model(images, self.clean_aux if clean_aux is None else clean_aux)
        h, w = images.height, images.width
        # The wgpu pipeline computes the autoexposure on the GPU from the uploaded colour.
        on_gpu = self.backend == "wgpu" and self.input_scale is None and images.color is not None
        mode = self._mode(images, device_autoexposure=on_gpu and h > 0 and w > 0)
        autoexposure_on_gpu = on_gpu and mode.hdr
        out_channels = images.main_channels - (1 if images.alpha is not None else 0)
        if h == 0 or w == 0:
            return np.zeros((h, w, out_channels), np.float32)
        executor = self._executor(key, model)
        plan = self._tile_plan(h, w, model)
        main = next(a for a in (images.color, images.albedo, images.normal) if a is not None)
        aux_albedo = images.albedo if images.color is not None else None
        aux_normal = images.normal if images.color is not None else None
        pipeline = self._gpu_pipelines.get(key)
        if pipeline is not None:
            # Input pass, network and output pass per tile on the GPU queue.
            result = pipeline.denoise(
                main, aux_albedo, aux_normal, mode=mode, plan=plan,
                out_channels=out_channels, progress=progress, autoexposure=autoexposure_on_gpu,
            )
            if autoexposure_on_gpu:
                from oidn_gpu.image import process

                mode = process.Mode(mode.transfer, mode.hdr, mode.snorm, pipeline.last_input_scale)
                process.warn_if_autoexposure_blackens(main, mode.input_scale)
        else:
            result = self._run_host_tiles(executor, plan, main, aux_albedo, aux_normal, mode,
                                          out_channels, progress)
        self._record_info(key, model, mode, plan)
        return result

    @staticmethod
    def _run_host_tiles(
        executor: Any,
        plan: Any,
        main: np.ndarray,
        albedo: np.ndarray | None,
        normal: np.ndarray | None,
        mode: Any,
        out_channels: int,
        progress: Progress | None,
    ) -> np.ndarray:
        """Input processing on the host, the network per tile, stitching, output processing."""
        from oidn_gpu.image import process

        x = process.build_input(main, albedo, normal, mode)
        h, w = x.shape[1:]
        y = np.empty((3, h, w), np.float32)
        total = len(plan.tiles)
        _report(progress, 0.0)
        buffer = np.zeros((x.shape[0], plan.tile_h, plan.tile_w), np.float32)
        for done, tile in enumerate(plan.tiles, start=1):
            buffer.fill(0.0)
            buffer[
                :, tile.buf_y : tile.buf_y + tile.in_h, tile.buf_x : tile.buf_x + tile.in_w
            ] = x[:, tile.in_y : tile.in_y + tile.in_h, tile.in_x : tile.in_x + tile.in_w]
            result = executor.run(buffer)
            y[:, tile.out_y : tile.out_y + tile.out_h, tile.out_x : tile.out_x + tile.out_w] = (
                result[
                    :, tile.src_y : tile.src_y + tile.out_h, tile.src_x : tile.src_x + tile.out_w
                ]
            )
            _report(progress, done / total)
        return process.finish_output(y, mode, out_channels)

    def _tile_plan(self, h: int, w: int, model: Any):  # -> tiling.TilePlan
        from oidn_gpu.image import tiling

        overlap = unet.tile_overlap(model.spec, TILE_ALIGNMENT)
        if self.tile_size is not None:
            return tiling.plan_tiles_max_edge(
                h, w, max_edge=self.tile_size, overlap=overlap, alignment=TILE_ALIGNMENT
            )
        if self.max_memory_mb is None or self.max_memory_mb < 0:
            return tiling.plan_tiles(h, w, overlap=overlap, alignment=TILE_ALIGNMENT)
        from oidn_gpu.graph.plan import plan

        budget = self.max_memory_mb * 1024 * 1024

        def fits(tile_h: int, tile_w: int) -> bool:
            # The planner's activation memory of one tile (fp32, unfused: an upper bound of
            # what the backends allocate; OIDN's own estimate is device-specific).
            return plan(model.graph, tile_h, tile_w).peak_bytes <= budget

        return tiling.plan_tiles(
            h, w, overlap=overlap, alignment=TILE_ALIGNMENT, max_tile_px=None, fits=fits
        )


@dataclass(frozen=True)
class _Frame:
    """One validated frame of `Denoiser.denoise_many` and its GPU denoise's arguments."""

    call: Any  # arrays.Call: how to answer in the caller's type
    images: _Images
    key: str
    model: Any
    mode: Any
    plan: Any
    out_channels: int
    autoexposure: bool  # computed on the GPU
    inputs: tuple[np.ndarray | None, ...]  # main, albedo, normal as the pipeline takes them
    signature: tuple[Any, ...]  # frames with equal signatures share one GPU sequence


class _Peekable:
    """An iterator whose next item can be looked at without taking it."""

    _END = object()

    def __init__(self, iterator: Iterator[Any]) -> None:
        self._iterator = iterator
        self._head: Any = None
        self._has_head = False

    def peek(self) -> Any:
        """The next item, or None at the end."""
        if not self._has_head:
            self._head = next(self._iterator, None)
            self._has_head = True
        return self._head

    def next(self) -> Any:
        item = self.peek()
        self._has_head = False
        return item


def _locked(iterator: Iterator[Any], lock: Any) -> Iterator[Any]:
    """Yield the items of ``iterator``, each computed holding ``lock`` (not across a yield)."""
    while True:
        with lock:
            item = next(iterator, _Peekable._END)
        if item is _Peekable._END:
            return
        yield item


def _frame_images(frame: Any) -> tuple[Any, Any, Any]:
    """``(color, albedo, normal)`` of one `Denoiser.denoise_many` item."""
    if isinstance(frame, Mapping):
        unknown = set(frame) - {"color", "albedo", "normal"}
        if unknown:
            raise InvalidArgumentError(
                f"unknown image name(s) {sorted(unknown)} in a frame; expected 'color', "
                "'albedo' and 'normal'"
            )
        return frame.get("color"), frame.get("albedo"), frame.get("normal")
    if isinstance(frame, tuple):
        if not 1 <= len(frame) <= 3:
            raise InvalidArgumentError(
                f"a frame tuple has {len(frame)} images; expected (color, albedo, normal)"
            )
        padded = (*frame, None, None)[:3]
        return padded[0], padded[1], padded[2]
    return frame, None, None


def _report(progress: Progress | None, fraction: float) -> None:
    if progress is not None and progress(fraction) is False:
        raise CancelledError("execution was cancelled by the progress callback")


def _scaled_progress(progress: Progress | None, start: float, span: float) -> Progress | None:
    if progress is None:
        return None
    return lambda fraction: progress(start + span * fraction)


def _store(result: np.ndarray, images: _Images, out: np.ndarray | None) -> np.ndarray:
    """Write the result (plus alpha) into ``out`` or a new array of the input's dtype."""
    if images.alpha is not None:
        result = np.concatenate([result, images.alpha[:, :, None].astype(np.float32)], axis=2)
    if out is None:
        return result.astype(images.dtype, copy=False)
    target = out if out.ndim == 3 else out[:, :, None]
    target[...] = result.astype(out.dtype, copy=False)
    return out


class RTFilter(Denoiser):
    """OIDN's ``RT`` filter: path-traced renders with optional albedo and normal."""

    def __init__(self, **options: Any) -> None:
        super().__init__(filter_type="RT", **options)


class RTLightmapFilter(Denoiser):
    """OIDN's ``RTLightmap`` filter: HDR or directional lightmaps."""

    def __init__(self, **options: Any) -> None:
        super().__init__(filter_type="RTLightmap", **options)


def denoise(
    color: Any = None,
    albedo: Any = None,
    normal: Any = None,
    *,
    output: Any = None,
    progress: Progress | None = None,
    **options: Any,
) -> Any:
    """Denoise one image in one call; options as for `Denoiser`, images as `Denoiser.denoise`.

    For a sequence of frames, keep one `Denoiser`: it caches models and plans.
    """
    with Denoiser(**options) as denoiser:
        return denoiser.denoise(color, albedo, normal, output=output, progress=progress)
