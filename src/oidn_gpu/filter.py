"""OIDN-style facade: images and options in, the denoised image out.

`Denoiser` reproduces what Intel OIDN 2.5.1's ``RT`` and ``RTLightmap``
filters compute (see ``oidn-semantics.md``) over any registered backend, and
never names one. It is three parts:

- `FilterOptions`: OIDN's filter parameters, frozen and validated once;
- `ModelCache`: which weights the images and options select (``model.weights``),
  loaded once per name;
- the orchestrator (`Denoiser`): validates the images (OIDN's error messages),
  resolves the input scale (autoexposure for HDR), makes the one denoise plan
  (`backends.plan.plan_denoise`: mode and tiles) and hands it to the backend's
  `TileRunner` (the host tile loop, or the wgpu GPU pipeline), built once per
  model from the backend's typed options.

A `Denoiser` caches models, executors and runners, so one object serves every
frame of a sequence; `denoise` is the one-call form.

The caller's output array is written only after every tile has finished, so a
cancelled or failed execution leaves it untouched, and in-place use (output
aliasing an input) is safe.

Threads: a `Denoiser` may be shared by threads. Its calls are serialized by a
per-denoiser lock (as OIDN serializes the calls of one device), so each call
sees the denoiser's models and buffers alone; separate denoisers run
concurrently. Options are validated when the denoiser is constructed.
"""

from __future__ import annotations

import dataclasses
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

from oidn_gpu.backends.base import (
    AUTO,
    AutoexposureRunner,
    BackendOptions,
    DenoiseImages,
    NetworkExecutor,
    SequenceRunner,
    TileRunner,
    get_backend,
    make_options,
    resolve_backend,
    tile_limits,
)
from oidn_gpu.backends.host_runner import report_progress
from oidn_gpu.backends.plan import DenoiseOptions, plan_denoise, plan_mode
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError, WeightsNotFoundError
from oidn_gpu.filter_cache import CACHE
from oidn_gpu.image import arrays, process, tensors
from oidn_gpu.image.autoexposure import autoexposure
from oidn_gpu.model import unet, weights
from oidn_gpu.model.unet import ValidatedModel

FilterType = Literal["RT", "RTLightmap"]
Progress = Callable[[float], Any]

# OIDN rejects images wider or taller than this (api/api.cpp, "image size is too large").
MAX_IMAGE_DIM = 65536

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
    return _split_alpha(name, image)


def _split_alpha(name: str, image: Any) -> tuple[Any, Any]:
    """Check the shape of one image (a NumPy array or a tensor); returns (pixels with at
    most 3 channels, alpha or None), views of ``image``."""
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


def _validate_images(color: Any, albedo: Any, normal: Any, check: Any = _check_image) -> _Images:
    named = (("color", color), ("albedo", albedo), ("normal", normal))
    given = {n: a for n, a in named if a is not None}
    if not given:
        raise InvalidOperationError("input image not specified")
    checked = {n: check(n, a) for n, a in given.items()}
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
    _check_output_shape(tuple(output.shape), images)
    if not output.flags.writeable:
        raise InvalidArgumentError("output array is read-only; pass a writeable array")
    return output


def _check_output_shape(shape: tuple[int, ...], images: _Images) -> None:
    """The output's size and channel count must be the main input's."""
    if len(shape) not in (2, 3):
        raise InvalidOperationError(f"unsupported output image format: shape {shape}")
    shape = shape if len(shape) == 3 else (*shape, 1)
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


@dataclass(frozen=True)
class FilterOptions:
    """OIDN's filter parameters, validated on creation (see `Denoiser` for each one).

    Booleans must be booleans (NumPy's too), ``quality`` is normalized to its name,
    a NaN ``input_scale`` to None (autoexposure), and ``hdr``/``srgb`` of an
    ``RTLightmap`` filter are dropped with a warning, as OIDN ignores them. Custom
    ``weights`` are loaded by the `ModelCache` when the denoiser is built.

    Raises:
        InvalidArgumentError: an unknown filter type, quality or prefilter, or an
            invalid value (``invalid value for parameter 'NAME': ...``).
    """

    filter_type: FilterType = "RT"
    hdr: bool = False
    srgb: bool = False
    clean_aux: bool = False
    quality: str = "high"
    input_scale: float | None = None
    directional: bool = False
    prefilter: str = "none"
    weights: str | os.PathLike[str] | bytes | None = None
    weights_dir: str | os.PathLike[str] | None = None
    max_memory_mb: int | None = None
    tile_size: int | None = None

    def __post_init__(self) -> None:
        if self.filter_type not in _FILTER_TYPES:
            raise InvalidArgumentError(
                f"unknown filter type: '{self.filter_type}'; expected 'RT' or 'RTLightmap'"
            )
        if self.prefilter not in _PREFILTERS:
            raise InvalidArgumentError(
                f"unknown prefilter '{self.prefilter}'; expected 'none', 'fast' or 'accurate'"
            )
        hdr = _check_bool("hdr", self.hdr)
        srgb = _check_bool("srgb", self.srgb)
        weights_dir = self.weights_dir
        if weights_dir is not None and not isinstance(weights_dir, (str, os.PathLike)):
            raise InvalidArgumentError(
                f"invalid value for parameter 'weights_dir': a {type(weights_dir).__name__}; "
                "expected a folder path or None"
            )
        if self.filter_type == "RTLightmap" and (hdr or srgb):
            warnings.warn(
                "hdr and srgb are not parameters of the RTLightmap filter and are ignored",
                stacklevel=4,  # the caller of Denoiser(...)
            )
            hdr = srgb = False
        set_field = object.__setattr__
        set_field(self, "hdr", hdr)
        set_field(self, "srgb", srgb)
        set_field(self, "clean_aux", _check_bool("clean_aux", self.clean_aux))
        set_field(self, "directional", _check_bool("directional", self.directional))
        set_field(self, "quality", weights.parse_quality(self.quality).value)
        set_field(self, "input_scale", _check_input_scale(self.input_scale))
        set_field(self, "max_memory_mb", _check_max_memory_mb(self.max_memory_mb))
        set_field(self, "tile_size", _check_tile_size(self.tile_size))

    def denoise_options(self, images: _Images, input_scale: float = 1.0) -> DenoiseOptions:
        """The `DenoiseOptions` of a denoise of ``images`` with a resolved input scale."""
        return DenoiseOptions(
            filter_type=self.filter_type,
            hdr=self.hdr,
            srgb=self.srgb,
            directional=self.directional,
            normal_only=images.color is None and images.albedo is None,
            input_scale=input_scale,
            tile_size=self.tile_size,
            max_memory_mb=self.max_memory_mb,
        )


CUSTOM_WEIGHTS = "custom"
_OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(FilterOptions))
# Keyword options of `Denoiser` besides the backend's (named when an option is unknown).
_DENOISER_OPTIONS = (*_OPTION_NAMES, "backend", "backend_options")


class ModelCache:
    """The model the images and options select, each loaded once.

    Built-in weights are keyed by their official name; custom weights (``weights=``)
    by ``"custom"``.
    """

    def __init__(self, options: FilterOptions) -> None:
        self.options = options
        self._models: dict[str, ValidatedModel] = {}
        if options.weights is not None:
            # Loaded now, so that a missing or malformed file fails at construction.
            self._models[CUSTOM_WEIGHTS] = _load_custom_weights(options.weights)

    def get(self, images: _Images, clean_aux: bool) -> tuple[str, ValidatedModel]:
        """``(key, model)`` for ``images``; raises OIDN's errors for unsupported combinations."""
        options = self.options
        # Validates the combination of inputs and flags with OIDN's messages even when
        # custom weights replace the built-in choice.
        name: str | None = None
        try:
            name = weights.select_weights(
                options.filter_type,
                color=images.color is not None,
                albedo=images.albedo is not None,
                normal=images.normal is not None,
                hdr=options.hdr,
                srgb=options.srgb,
                clean_aux=clean_aux,
                quality=options.quality,
                directional=options.directional,
            )
        except InvalidOperationError as err:
            if options.weights is None or "unsupported combination" not in str(err):
                raise
        if options.weights is not None:
            return CUSTOM_WEIGHTS, self._custom(images)
        assert name is not None
        if name not in self._models:
            self._models[name] = weights.load_builtin(name, options.weights_dir)
        return name, self._models[name]

    def _custom(self, images: _Images) -> ValidatedModel:
        model = self._models[CUSTOM_WEIGHTS]
        count = sum(x is not None for x in (images.color, images.albedo, images.normal))
        if model.input_channels != 3 * count:
            raise InvalidArgumentError(
                f"the custom weights take {model.input_channels} input channels but "
                f"{count} image(s) = {3 * count} channels were given"
            )
        return model

    def clear(self) -> None:
        """Forget the built-in models (custom weights stay: they belong to the options)."""
        for key in [k for k in self._models if k != CUSTOM_WEIGHTS]:
            del self._models[key]


@dataclass
class _Engine:
    """One model on the backend: its executor and the runner that denoises with it."""

    executor: NetworkExecutor
    runner: TileRunner

    def close(self) -> None:
        self.runner.close()
        self.executor.close()


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
        max_memory_mb: OIDN's memory budget; None or negative: at most 2160x2160 px per tile.
        tile_size: if set, tiles of at most this edge (px) instead of OIDN's plan.
        backend: ``"auto"`` or a registered backend (``"reference"``: NumPy, ``"wgpu"``;
            `oidn_gpu.backends.backend_names`).
        backend_options: the backend's typed options (its ``Options`` class, e.g.
            `oidn_gpu.backends.wgpu.backend.WgpuOptions`).
        **options: the backend's options as keywords, validated by its ``Options`` when
            the denoiser is built (wgpu: ``precision`` ``"auto"``/``"fp16"``/``"fp32"``,
            ``kernel``, ``gemm``, ``device``, ``conv_pool``; reference: ``precision`` ``"fp32"``,
            ``threads``, OIDN's ``numThreads``). An
            option of another backend is an error, also when ``"auto"`` picked this
            one; a ``device`` with ``backend="auto"`` asks for wgpu on that device.

    The filter parameters read back as attributes (``den.hdr``, ``den.quality``);
    ``den.options`` holds them all (`FilterOptions`).
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
        max_memory_mb: int | None = None,
        tile_size: int | None = None,
        backend: str = AUTO,
        backend_options: BackendOptions | None = None,
        **options: Any,
    ) -> None:
        self.options = FilterOptions(
            filter_type=filter_type,
            hdr=hdr,
            srgb=srgb,
            clean_aux=clean_aux,
            quality=quality,
            input_scale=input_scale,
            directional=directional,
            prefilter=prefilter,
            weights=weights,
            weights_dir=weights_dir,
            max_memory_mb=max_memory_mb,
            tile_size=tile_size,
        )
        self.backend = resolve_backend(backend, options)
        self.backend_options = make_options(
            self.backend, backend_options, requested=backend,
            filter_options=_DENOISER_OPTIONS, **options
        )
        self._tile_limits = tile_limits(self.backend)
        self._models = ModelCache(self.options)
        self._engines: dict[str, _Engine] = {}
        self._prefilters: dict[str, Denoiser] = {}
        self._last_info: DenoiserInfo | None = None
        # The last call's input scale while it is still on the device (device tensors).
        self._pending_scale: Any = None
        # Serializes denoise and close: the models, executors and their scratch buffers
        # are per denoiser and reused across calls. Reentrant, so that a progress
        # callback calling back into this denoiser gets a clear error, not a deadlock.
        self._lock = threading.RLock()
        self._running = False
        self._closed = False

    def __getattr__(self, name: str) -> Any:
        # The filter parameters read as attributes (``den.hdr``), from the frozen options.
        if name in _OPTION_NAMES:
            return getattr(self.options, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    # -- lifetime -------------------------------------------------------------

    def close(self) -> None:
        """Release every executor and runner (and their GPU resources); idempotent.

        Waits for a `denoise` running in another thread to finish first.

        Raises:
            InvalidOperationError: called from inside this denoiser's running call
                (a progress callback).
        """
        with self._lock:
            self._check_not_running("close")
            self._closed = True
            for engine in self._engines.values():
                engine.close()
            self._engines.clear()
            for sub in self._prefilters.values():
                sub.close()
            self._prefilters.clear()
            self._models.clear()

    def __enter__(self) -> Denoiser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def info(self) -> DenoiserInfo | None:
        """What the last `denoise` call (of any thread) ran: backend, device, precision,
        weights, tiles.

        After a denoise of device tensors, the autoexposure scale is read from the device
        here, on the first call (waiting for that denoise to finish), and the warning of
        an autoexposure of 0 (a black image) is given then.
        """
        if self._pending_scale is not None:
            with self._lock:
                pending, self._pending_scale = self._pending_scale, None
                if pending is not None and self._last_info is not None:
                    scale = float(pending)
                    self._last_info = dataclasses.replace(self._last_info, input_scale=scale)
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

    # -- backend --------------------------------------------------------------

    def _engine(self, key: str, model: ValidatedModel) -> _Engine:
        engine = self._engines.get(key)
        if engine is None:
            backend = get_backend(self.backend)
            executor = backend.create_executor(model, self.backend_options)
            try:
                runner = backend.create_runner(executor)
            except BaseException:
                executor.close()
                raise
            engine = self._engines[key] = _Engine(executor, runner)
        return engine

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
                Integer colors are refused with ``hdr`` and by RTLightmap. On a backend
                that takes device tensors (cuda), torch CUDA tensors and CUDA arrays are
                denoised on their device with no host copy (`oidn_gpu.filter_device`);
                elsewhere they are copied to the host and back.
            output: optional image to write into (may alias an input); same size and
                channel count as the main input. NumPy and CPU torch float16/float32
                outputs are written in place, and device tensors on the device path;
                other types get the result copied in.
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
        lightmap = self.options.filter_type == "RTLightmap"
        hdr = self.options.hdr or lightmap
        device_call = tensors.as_device_call(color, albedo, normal, output, hdr=hdr)
        if device_call is not None:
            answer = self._denoise_device(device_call, progress)
            if answer is not None:
                return answer
        call = arrays.as_call(color, albedo, normal, output, hdr=hdr)
        with self._lock:
            self._check_not_running("denoise")
            self._running = True
            try:
                result = self._denoise(call.color, call.albedo, call.normal, call.output, progress)
            finally:
                self._running = False
        return call.finish(result)

    def _denoise_device(self, call: Any, progress: Progress | None) -> Any:
        """The call on the backend's device (`filter_device`), or None: the host path."""
        with self._lock:
            self._check_not_running("denoise")
            self._running = True
            try:
                return filter_device.denoise(self, call, progress)
            finally:
                self._running = False

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
        options = self.options
        if options.filter_type == "RTLightmap" and (albedo is not None or normal is not None):
            warnings.warn(
                "the RTLightmap filter takes only a color image; albedo and normal are ignored",
                stacklevel=3,
            )
            albedo = normal = None
        images = _validate_images(color, albedo, normal)
        out = _check_output(output, images)
        if options.filter_type == "RT" and images.color is not None and options.prefilter != "none":
            return self._denoise_prefiltered(images, color, albedo, normal, out, progress)
        destination = _destination(images, out)
        result = self._run(images, progress, destination=destination, scratch=out is None)
        return _store(result, images, out, destination)

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
        if self.options.prefilter == "accurate":
            stages = [n for n, a in (("albedo", albedo), ("normal", normal)) if a is not None]
            total = len(stages) + 1
            for index, name in enumerate(stages):
                sub = self._prefilter_denoiser(name)
                part = _scaled_progress(progress, index / total, 1 / total)
                clean = sub.denoise(
                    **{name: images.albedo if name == "albedo" else images.normal}, progress=part
                )
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
            options = self.options
            self._prefilters[name] = Denoiser(
                quality=options.quality,
                weights_dir=options.weights_dir,
                max_memory_mb=options.max_memory_mb,
                tile_size=options.tile_size,
                backend=self.backend,
                backend_options=self.backend_options,
            )
        return self._prefilters[name]

    def _autoexposes(self, images: _Images) -> bool:
        """Whether the input scale is the autoexposure of the color (HDR, no input_scale)."""
        if self.options.input_scale is not None or images.color is None:
            return False
        return plan_mode(self.options.denoise_options(images)).hdr

    def _input_scale(self, images: _Images) -> float:
        """The input scale: the option, else autoexposure of the color for HDR, else 1."""
        if self.options.input_scale is not None:
            return self.options.input_scale
        if self._autoexposes(images):
            assert images.color is not None
            scale = autoexposure(images.color)
            process.warn_if_autoexposure_blackens(images.color, scale)
            return scale
        return 1.0

    def _device_autoexposure(self, images: _Images, engine: _Engine) -> bool:
        """Whether the runner computes the autoexposure itself, on its device."""
        return isinstance(engine.runner, AutoexposureRunner) and self._autoexposes(images)

    def _run(
        self,
        images: _Images,
        progress: Progress | None,
        *,
        clean_aux: bool | None = None,
        destination: np.ndarray | None = None,
        scratch: bool = True,
    ) -> np.ndarray:
        """Denoise validated images; returns HxWxC float32 (C = main channels sans alpha),
        or ``destination`` when the runner wrote the result into it (see `_destination`;
        ``scratch``: it is a new array, not the caller's, `DenoiseImages.output_is_scratch`)."""
        key, model = self._models.get(
            images, self.options.clean_aux if clean_aux is None else clean_aux
        )
        h, w = images.height, images.width
        out_channels = images.main_channels - (1 if images.alpha is not None else 0)
        if h == 0 or w == 0:
            return np.zeros((h, w, out_channels), np.float32)
        engine = self._engine(key, model)
        on_device = self._device_autoexposure(images, engine)
        # With the autoexposure on the device the plan's scale is a placeholder.
        input_scale = 1.0 if on_device else self._input_scale(images)
        options = self.options.denoise_options(images, input_scale)
        plan = plan_denoise(model, h, w, options, self._tile_limits)
        runner_images = _runner_images(images, out_channels, destination, scratch=scratch)
        report_progress(progress, 0.0)
        if on_device:
            runner = engine.runner
            assert isinstance(runner, AutoexposureRunner)
            result, input_scale = runner.run_autoexposed(runner_images, plan, progress)
            process.warn_if_autoexposure_blackens(runner_images.main, input_scale)
        else:
            result = engine.runner.run(runner_images, plan, progress)
        self._record_info(key, model, engine, plan, input_scale)
        return result

    def _record_info(
        self, key: str, model: ValidatedModel, engine: _Engine, plan: Any, input_scale: Any
    ) -> None:
        """Record what ran; an ``input_scale`` that is not a number is read by `info`."""
        pending = None if isinstance(input_scale, numbers.Real) else input_scale
        self._pending_scale = pending
        info = engine.executor.info()
        self._last_info = DenoiserInfo(
            backend=info.backend,
            device=info.device,
            precision=info.precision,
            weights=key if key != CUSTOM_WEIGHTS else (model.name or CUSTOM_WEIGHTS),
            weights_sha256=model.sha256,
            input_scale=float(input_scale) if pending is None else None,
            tiles=len(plan.tiles.tiles),
            kernels=dict(info.kernels),
            kernel_fallbacks=dict(info.fallbacks),
        )

    # -- sequences --------------------------------------------------------------

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
        if self.options.prefilter != "none":
            for color, albedo, normal in items:
                yield self.denoise(color, albedo, normal)
            return
        lightmap = self.options.filter_type == "RTLightmap"
        queue: deque[_Frame] = deque()

        def prepared() -> Iterator[_Frame]:
            for color, albedo, normal in items:
                call = arrays.as_call(color, albedo, normal, None, hdr=self.options.hdr or lightmap)
                with self._lock:
                    frame = self._prepare_frame(call)
                yield frame

        source = _Peekable(prepared())
        while (first := source.peek()) is not None:
            runner = first.engine.runner if first.plan is not None else None
            if not isinstance(runner, SequenceRunner):  # one frame the usual way
                source.next()
                destination = _destination(first.images, None)
                with self._lock:
                    result = self._run(first.images, None, destination=destination)
                yield first.call.finish(_store(result, first.images, None, destination))
                continue

            def batch(signature: tuple[Any, ...] = first.signature) -> Iterator[DenoiseImages]:
                while (frame := source.peek()) is not None and frame.signature == signature:
                    queue.append(source.next())
                    yield frame.runner_images

            results = runner.run_many(batch(), first.plan, autoexposure=first.on_device)
            for result, input_scale in _locked(results, self._lock):
                frame = queue.popleft()
                if frame.on_device:
                    process.warn_if_autoexposure_blackens(frame.runner_images.main, input_scale)
                self._record_info(frame.key, frame.model, frame.engine, frame.plan, input_scale)
                stored = _store(result, frame.images, None, frame.runner_images.output)
                yield frame.call.finish(stored)

    def _prepare_frame(self, call: Any) -> _Frame:
        """Validate one frame of `denoise_many` and plan its denoise (no plan when empty)."""
        if self._closed:
            raise InvalidOperationError("the denoiser is closed")
        albedo, normal = call.albedo, call.normal
        if self.options.filter_type == "RTLightmap":
            albedo = normal = None
        images = _validate_images(call.color, albedo, normal)
        key, model = self._models.get(images, self.options.clean_aux)
        out_channels = images.main_channels - (1 if images.alpha is not None else 0)
        runner_images = _runner_images(images, out_channels, _destination(images, None))
        if images.height == 0 or images.width == 0:
            return _Frame(call, images, runner_images, key, model, None, None, False, ())
        engine = self._engine(key, model)
        on_device = self._device_autoexposure(images, engine)
        input_scale = 1.0 if on_device else self._input_scale(images)
        options = self.options.denoise_options(images, input_scale)
        plan = plan_denoise(model, images.height, images.width, options, self._tile_limits)
        given = tuple(a is not None for a in (runner_images.albedo, runner_images.normal))
        # Frames with one signature share a plan and run as one sequence on the device.
        signature = (key, images.height, images.width, out_channels, given, plan.mode)
        return _Frame(call, images, runner_images, key, model, engine, plan, on_device, signature)


def _runner_images(
    images: _Images,
    out_channels: int,
    destination: np.ndarray | None = None,
    *,
    scratch: bool = True,
) -> DenoiseImages:
    """The images a `TileRunner` takes: the main one, and aux images given with color."""
    main = next(a for a in (images.color, images.albedo, images.normal) if a is not None)
    with_color = images.color is not None
    return DenoiseImages(
        main=main,
        albedo=images.albedo if with_color else None,
        normal=images.normal if with_color else None,
        out_channels=out_channels,
        output=destination,
        output_is_scratch=destination is not None and scratch,
    )


def _destination(images: _Images, out: np.ndarray | None) -> np.ndarray | None:
    """Where a runner may write the result itself (`DenoiseImages.output`): the output
    array (``HxWxC``), else a new array of the input's dtype, so the result is converted
    while it is copied out; None when the color has alpha (appended afterwards)."""
    if images.alpha is not None:
        return None
    if out is None:
        channels = images.main_channels
        return np.empty((images.height, images.width, channels), images.dtype)
    return out if out.ndim == 3 else out[:, :, None]


@dataclass(frozen=True)
class _Frame:
    """One validated frame of `Denoiser.denoise_many` and its plan."""

    call: Any  # arrays.Call: how to answer in the caller's type
    images: _Images
    runner_images: DenoiseImages
    key: str
    model: ValidatedModel
    engine: _Engine | None  # None: an empty image
    plan: Any  # DenoisePlan, None for an empty image
    on_device: bool  # autoexposure computed by the runner
    signature: tuple[Any, ...]  # frames with equal signatures share one device sequence


class _Peekable:
    """An iterator whose next item can be looked at without taking it."""

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


_END = object()


def _locked(iterator: Iterator[Any], lock: Any) -> Iterator[Any]:
    """Yield the items of ``iterator``, each computed holding ``lock`` (not across a yield)."""
    while True:
        with lock:
            item = next(iterator, _END)
        if item is _END:
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


def _scaled_progress(progress: Progress | None, start: float, span: float) -> Progress | None:
    if progress is None:
        return None
    return lambda fraction: progress(start + span * fraction)


def _store(
    result: np.ndarray,
    images: _Images,
    out: np.ndarray | None,
    destination: np.ndarray | None = None,
) -> np.ndarray:
    """Write the result (plus alpha) into ``out`` or a new array of the input's dtype;
    a result the runner already wrote into ``destination`` (see `_destination`) is final."""
    if destination is not None and result is destination:
        return out if out is not None else result
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

    Calls with the same options reuse a warm `Denoiser` from a small process-wide cache
    (`oidn_gpu.filter_cache`): the second call is as fast as a kept denoiser's, with the
    same result. Concurrent calls each use their own. `clear_denoiser_cache` frees the
    cached denoisers (the interpreter's exit does too); options that are not hashable
    are not cached.

    Images on a CUDA device (torch tensors, CUDA arrays) are denoised on that device by
    the cuda backend unless ``device`` (or ``backend_options``) says otherwise. For a
    sequence of frames, `Denoiser.denoise_many` overlaps frames on the wgpu backend.
    """
    options = _on_tensor_device(options, color, albedo, normal)
    return CACHE.run(
        options,
        lambda: Denoiser(**options),
        lambda den: den.denoise(color, albedo, normal, output=output, progress=progress),
    )


def _on_tensor_device(options: dict[str, Any], *images: Any) -> dict[str, Any]:
    """``options`` with ``device`` set to the main image's CUDA device when the cuda
    backend will denoise it and no device was asked for."""
    if "device" in options or options.get("backend_options") is not None:
        return options
    main = next((image for image in images if image is not None), None)
    device = tensors.cuda_device(main) if main is not None else None
    if device is None:
        return options
    try:
        backend = resolve_backend(options.get("backend", AUTO), options)
    except InvalidArgumentError:  # Denoiser(**options) reports it, after its own checks
        return options
    return {**options, "device": device} if backend == "cuda" else options


# The device path builds on this module's validation, so it is imported once this module
# is complete (it imports the names above).
from oidn_gpu import filter_device  # noqa: E402
