"""OIDN-style facade: images and options in, the denoised image out.

`Denoiser` reproduces what Intel OIDN 2.5.1's ``RT`` and ``RTLightmap``
filters compute (see ``oidn-semantics.md``) over any registered backend, and
never names one. It is three parts:

- `FilterOptions`: OIDN's filter parameters, frozen and validated once;
- `ModelCache`: which weights the images and options select (``model.weights``),
  loaded once per name;
- the orchestrator (`Denoiser`): validates the images (OIDN's error messages) and
  hands each frame to its `filter_frame.FramePath`, the one frame flow of every
  entry (weights, engine, input scale, the plan within the backend's tile limits,
  the backend's `TileRunner`, info).

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
import os
import warnings
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu import filter_alpha, filter_aovs, filter_device, filter_temporal
from oidn_gpu.backends.base import (
    AUTO,
    AlphaRunner,
    BackendOptions,
    DenoiseImages,
    SequenceRunner,
    auto_choice,
    make_options,
    resolve_backend,
)
from oidn_gpu.config import OPTION_NAMES, DenoiserConfig, FilterOptions, FilterType
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.filter_cache import CACHE, on_tensor_device
from oidn_gpu.filter_frame import DenoiserInfo, Engine, FramePath, PlannedFrame
from oidn_gpu.filter_images import (
    Peekable,
    Progress,
    check_output,
    frame_images,
    locked,
    make_runner_images,
    output_destination,
    scaled_progress,
    store_result,
)
from oidn_gpu.filter_models import CUSTOM_WEIGHTS, ModelCache
from oidn_gpu.image import arrays, process, tensors
from oidn_gpu.image.checks import MAX_IMAGE_DIM, Images, validate_images
from oidn_gpu.image.result_pool import ResultPool

__all__ = [  # and, for older imports, what moved to `config` and `filter_models`
    "CUSTOM_WEIGHTS",
    "MAX_IMAGE_DIM",
    "Denoiser",
    "DenoiserConfig",
    "DenoiserInfo",
    "FilterOptions",
    "FilterType",
    "ModelCache",
    "RTFilter",
    "RTLightmapFilter",
    "TemporalDenoiser",
    "denoise",
]


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
            ``threads``, OIDN's ``numThreads``; oidn: ``device``, Intel OIDN's ``"cpu"``,
            ``"cuda"``, ``"hip"``, ``"sycl"``, and ``threads``). An
            option of another backend is an error, also when ``"auto"`` picked this
            one; a ``device`` with ``backend="auto"`` asks for wgpu on that device.

    ``temporal=True`` makes an `oidn_gpu.TemporalDenoiser` instead (animations: its
    ``denoise`` takes each frame's ``motion`` and ``depth``; ``history`` and the other
    `oidn_gpu.TemporalParams` names are its parameters, an error without it).

    The filter parameters read back as attributes (``den.hdr``, ``den.quality``);
    ``den.options`` holds them all (`FilterOptions`), and ``den.config`` every option as
    one `DenoiserConfig` (`Denoiser.from_config` builds a denoiser of one).
    """

    def __new__(cls, *args: Any, temporal: Any = False, **options: Any) -> Any:
        # Denoiser(temporal=True, ...) is an oidn_gpu.TemporalDenoiser
        if not filter_temporal.temporal_requested(temporal, options):
            return super().__new__(cls)
        if cls is not Denoiser:
            raise InvalidArgumentError(
                f"temporal=True is an option of oidn_gpu.Denoiser, not of {cls.__name__}"
            )
        return TemporalDenoiser(**options)

    def __init__(
        self,
        *,
        temporal: bool = False,
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
        filter_options = FilterOptions(
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
        config = DenoiserConfig.create(
            filter_options, backend=backend, backend_options=backend_options, **options
        )
        self._setup(config)

    @classmethod
    def from_config(cls, config: DenoiserConfig) -> Denoiser:
        """A denoiser of a `DenoiserConfig` (checked when it was made; ``backend="auto"``
        is resolved here)."""
        if not isinstance(config, DenoiserConfig):
            raise InvalidArgumentError(
                f"the config is a {type(config).__name__}; expected oidn_gpu.DenoiserConfig"
            )
        denoiser = cls.__new__(cls)
        Denoiser._setup(denoiser, config)
        return denoiser

    def _setup(self, config: DenoiserConfig) -> None:
        self.options = config.filter
        if config.backend == AUTO:
            choice = auto_choice()
            self.backend, self.backend_reason = choice.name, choice.reason
        else:
            self.backend = resolve_backend(config.backend)
            self.backend_reason = f"backend='{self.backend}' was asked for"
        self.backend_options = make_options(
            self.backend, config.backend_options, requested=config.backend
        )
        # The frame flow of every entry, with the denoiser's lock, models and engines.
        self._frames = FramePath(
            self.options, self.backend, self.backend_options, self.backend_reason, self.denoise
        )
        self._lock = self._frames.lock
        self._models: ModelCache = self._frames.models
        self._engines: dict[str, Engine] = self._frames.engines
        # Sub-denoisers, closed with this one: the aux prefilters by image name, and
        # "alpha" (`filter_alpha.alpha_denoiser`).
        self._prefilters: dict[str, Denoiser] = {}
        # Arrays for results with alpha, reused once the caller drops them (`ResultPool`).
        self._results = ResultPool()
        self._running = False

    @property
    def _closed(self) -> bool:
        return self._frames.closed

    @property
    def frames(self) -> FramePath:
        """The denoiser's frame path (`filter_frame.FramePath`): what a backend's temporal
        session denoises its frames with."""
        return self._frames

    @property
    def config(self) -> DenoiserConfig:
        """The denoiser's options as one value (its backend resolved): another
        `Denoiser.from_config` of it denoises the same."""
        return DenoiserConfig(self.options, self.backend, self.backend_options)

    def __getattr__(self, name: str) -> Any:
        # The filter parameters read as attributes (``den.hdr``), from the frozen options.
        if name in OPTION_NAMES:
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
            # sub-denoisers first: the alpha's may run on this one's device (wgpu)
            for sub in self._prefilters.values():
                sub.close()
            self._prefilters.clear()
            self._frames.close()

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait for the kernels the backend compiles in the background (cuda: Triton's,
        while cuDNN serves the frames); True when none is left compiling."""
        with self._lock:
            runners = [engine.runner for engine in self._engines.values()]
        return all(r.wait_compiled(timeout) for r in runners if hasattr(r, "wait_compiled"))

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
        frames = self._frames
        if frames.pending_scale is not None:
            with self._lock:
                pending, frames.pending_scale = frames.pending_scale, None
                if pending is not None and frames.last_info is not None:
                    scale = float(pending)
                    frames.last_info = dataclasses.replace(frames.last_info, input_scale=scale)
        return frames.last_info

    def _check_not_running(self, what: str) -> None:
        # Only the thread holding the lock gets here while a call runs: the caller is
        # that call's own progress callback.
        if self._running:
            raise InvalidOperationError(
                f"{what}() was called from inside a running denoise of the same Denoiser "
                "(from its progress callback); use another Denoiser, or call it after "
                "denoise returns"
            )

    # -- denoising --------------------------------------------------------------

    def denoise(
        self,
        color: Any = None,
        albedo: Any = None,
        normal: Any = None,
        *,
        output: Any = None,
        progress: Progress | None = None,
        alpha: str = "copy",
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
            alpha: what becomes of the color's alpha (a 4th channel): ``"copy"`` passes
                it through, as Intel OIDN does; ``"denoise"`` fits it to the coverage the
                albedo shows, then denoises it once more with the fast LDR weights and the
                same albedo (`oidn_gpu.filter_alpha`).

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
        alpha = filter_alpha.check_alpha_mode(alpha)
        lightmap = self.options.filter_type == "RTLightmap"
        hdr = self.options.hdr or lightmap
        device_call = tensors.as_device_call(color, albedo, normal, output, hdr=hdr)
        if device_call is not None:
            answer = self._denoise_device(device_call, progress, alpha)
            if answer is not None:
                return answer
        call = arrays.as_call(color, albedo, normal, output, hdr=hdr)
        with self._lock:
            self._check_not_running("denoise")
            self._running = True
            try:
                result = self._denoise(
                    call.color, call.albedo, call.normal, call.output, progress, alpha
                )
            finally:
                self._running = False
        return call.finish(result)

    denoise_aovs = filter_aovs.denoise_aovs  # light-path passes that sum to the beauty

    def _denoise_device(self, call: Any, progress: Progress | None, alpha: str) -> Any:
        """The call on the backend's device (`filter_device`), or None: the host path."""
        with self._lock:
            self._check_not_running("denoise")
            self._running = True
            try:
                return filter_device.denoise(self, call, progress, alpha)
            finally:
                self._running = False

    def _denoise(
        self,
        color: Any,
        albedo: Any,
        normal: Any,
        output: Any,
        progress: Progress | None,
        alpha: str = "copy",
    ) -> np.ndarray:
        self._frames.check_open()
        options = self.options
        if options.filter_type == "RTLightmap" and (albedo is not None or normal is not None):
            warnings.warn(
                "the RTLightmap filter takes only a color image; albedo and normal are ignored",
                stacklevel=3,
            )
            albedo = normal = None
        images = validate_images(color, albedo, normal)
        out = check_output(output, images)
        # the alpha denoised from the same checked host arrays as the colour
        alpha_too = alpha == "denoise" and images.alpha is not None and images.alpha.size > 0
        if options.filter_type == "RT" and images.color is not None and options.prefilter != "none":
            return self._denoise_prefiltered(
                images, color, albedo, normal, out, progress, alpha_too
            )
        frame = self._frames.plan(images) if alpha_too else None
        if frame is not None and isinstance(frame.runner, AlphaRunner):
            return self._denoise_with_alpha(images, out, progress, frame)
        destination = output_destination(images, out, self._results)
        result = self._frames.run(
            images, progress, destination=destination, scratch=out is None, frame=frame
        )
        if frame is not None:  # after the colour: its device copy of the albedo, if kept
            denoised = filter_alpha.denoise_frame_alpha(
                self._alpha_denoiser(), images, frame.runner
            )
            images = dataclasses.replace(images, alpha=denoised)
        return store_result(result, images, out, destination)

    def _denoise_with_alpha(
        self, images: Images, out: np.ndarray | None, progress: Progress | None, frame: PlannedFrame
    ) -> np.ndarray:
        """A colour and its alpha denoised as one frame on the device of an `AlphaRunner`
        (cuda, wgpu): the alpha computed there with the colour
        (`filter_alpha.alpha_on_device`), the result read back with its alpha."""
        alpha = filter_alpha.alpha_on_device(
            self._alpha_denoiser(frame.runner), frame.runner, images
        )
        whole = dataclasses.replace(images, alpha=None)  # the result carries its alpha
        destination = output_destination(whole, out)
        result = self._frames.run(
            images, progress, destination=destination, scratch=out is None, frame=frame, alpha=alpha
        )
        return store_result(result, whole, out, destination)

    def _denoise_prefiltered(
        self,
        images: Images,
        color: Any,
        albedo: Any,
        normal: Any,
        out: np.ndarray | None,
        progress: Progress | None,
        alpha_too: bool = False,
    ) -> np.ndarray:
        """Blender-style prefiltering of noisy aux images, then clean-aux color denoising
        (``alpha_too``: then the alpha, with the albedo the colour was denoised with)."""
        if self.options.prefilter == "accurate":
            stages = [n for n, a in (("albedo", albedo), ("normal", normal)) if a is not None]
            total = len(stages) + 1
            for index, name in enumerate(stages):
                sub = self._prefilter_denoiser(name)
                part = scaled_progress(progress, index / total, 1 / total)
                if name == "albedo":
                    albedo = sub.denoise(albedo=images.albedo, progress=part)
                else:
                    normal = sub.denoise(normal=images.normal, progress=part)
            progress = scaled_progress(progress, len(stages) / total, 1 / total)
        clean_images = validate_images(color, albedo, normal)
        # The aux images are clean now (prefiltered, or declared clean by "fast"):
        # `FramePath.clean_aux`.
        frame = self._frames.plan(clean_images)
        result = self._frames.run(clean_images, progress, frame=frame)
        if alpha_too:  # the prefiltered albedo guides the alpha too, at no extra cost
            denoised = filter_alpha.denoise_frame_alpha(
                self._alpha_denoiser(), clean_images, frame.runner
            )
            images = dataclasses.replace(images, alpha=denoised)
        return store_result(result, images, out)

    def _alpha_denoiser(self, runner: Any = None) -> Denoiser:
        """The denoiser of this one's alpha channels (`filter_alpha.alpha_config`; on the
        device of the colour's ``runner`` where it must be: `filter_alpha.alpha_denoiser`)."""
        return filter_alpha.alpha_denoiser(self._prefilters, self, runner)

    def _prefilter_denoiser(self, name: str) -> Denoiser:
        if name not in self._prefilters:
            options = self.options
            prefilter = FilterOptions(
                quality=options.quality,
                weights_dir=options.weights_dir,
                max_memory_mb=options.max_memory_mb,
                tile_size=options.tile_size,
            )
            config = DenoiserConfig(prefilter, self.backend, self.backend_options)
            self._prefilters[name] = Denoiser.from_config(config)
        return self._prefilters[name]

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
        items = (frame_images(frame) for frame in frames)
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

        source = Peekable(prepared())
        while (first := source.peek()) is not None:
            planned = first.planned
            runner = planned.runner if planned is not None else None
            if planned is None or not isinstance(runner, SequenceRunner):  # the usual way
                source.next()
                destination = first.runner_images.output
                with self._lock:
                    result = self._frames.run(
                        first.images, None, destination=destination, frame=planned
                    )
                yield first.call.finish(store_result(result, first.images, None, destination))
                continue

            def batch(signature: tuple[Any, ...] = first.signature) -> Iterator[DenoiseImages]:
                while (frame := source.peek()) is not None and frame.signature == signature:
                    queue.append(source.next())
                    yield frame.runner_images

            results = runner.run_many(batch(), planned.plan, autoexposure=planned.autoexposes)
            for result, input_scale in locked(results, self._lock):
                frame = queue.popleft()
                if planned.autoexposes:
                    process.warn_if_autoexposure_blackens(frame.runner_images.main, input_scale)
                assert frame.planned is not None
                self._frames.record(frame.planned, input_scale)
                stored = store_result(result, frame.images, None, frame.runner_images.output)
                yield frame.call.finish(stored)

    def _prepare_frame(self, call: Any) -> _Frame:
        """Validate one frame of `denoise_many` and plan its denoise (no plan when empty)."""
        self._frames.check_open()
        albedo, normal = call.albedo, call.normal
        if self.options.filter_type == "RTLightmap":
            albedo = normal = None
        images = validate_images(call.color, albedo, normal)
        out_channels = images.main_channels - (1 if images.alpha is not None else 0)
        runner_images = make_runner_images(images, out_channels, output_destination(images, None))
        if images.height == 0 or images.width == 0:
            self._frames.weights(images)  # the weights' errors, as for any frame
            return _Frame(call, images, runner_images, None, ())
        planned = self._frames.plan(images)
        given = tuple(a is not None for a in (runner_images.albedo, runner_images.normal))
        # Frames with one signature share a plan and run as one sequence on the device.
        size = (images.height, images.width)
        signature = (planned.key, *size, out_channels, given, planned.plan.mode)
        return _Frame(call, images, runner_images, planned, signature)


@dataclass(frozen=True)
class _Frame:
    """One validated frame of `Denoiser.denoise_many` and its plan."""

    call: Any  # arrays.Call: how to answer in the caller's type
    images: Images
    runner_images: DenoiseImages
    planned: PlannedFrame | None  # None: an empty image
    signature: tuple[Any, ...]  # frames with equal signatures share one device sequence


class RTFilter(Denoiser):
    """OIDN's ``RT`` filter: path-traced renders with optional albedo and normal."""

    def __init__(self, **options: Any) -> None:
        super().__init__(filter_type="RT", **options)


class RTLightmapFilter(Denoiser):
    """OIDN's ``RTLightmap`` filter: HDR or directional lightmaps."""

    def __init__(self, **options: Any) -> None:
        super().__init__(filter_type="RTLightmap", **options)


class TemporalDenoiser(filter_temporal.TemporalDenoiser):
    __doc__ = filter_temporal.TemporalDenoiser.__doc__

    def _make_denoiser(self, options: dict[str, Any]) -> Denoiser:
        return Denoiser(**options)


def denoise(
    color: Any = None,
    albedo: Any = None,
    normal: Any = None,
    *,
    output: Any = None,
    progress: Progress | None = None,
    alpha: str = "copy",
    **options: Any,
) -> Any:
    """Denoise one image in one call; options as for `Denoiser`, images (and ``alpha``) as
    `Denoiser.denoise`.

    Calls with the same options reuse a warm `Denoiser` from a small process-wide cache
    (`oidn_gpu.filter_cache`): the second call is as fast as a kept denoiser's, with the
    same result. Concurrent calls each use their own. `clear_denoiser_cache` frees the
    cached denoisers (the interpreter's exit does too); options that are not hashable
    are not cached.

    Images on a CUDA device (torch tensors, CUDA arrays) are denoised on that device by
    the cuda backend unless ``device`` (or ``backend_options``) says otherwise. For a
    sequence of frames, `Denoiser.denoise_many` overlaps frames on the wgpu backend.
    """
    options = on_tensor_device(options, color, albedo, normal)
    return CACHE.run(
        options,
        lambda: Denoiser(**options),
        lambda den: den.denoise(
            color, albedo, normal, output=output, progress=progress, alpha=alpha
        ),
    )
