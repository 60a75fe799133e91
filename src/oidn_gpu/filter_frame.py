"""One frame through the filter: weights, engine, input scale, plan, runner, info.

Every way a `Denoiser` denoises a frame goes through one `FramePath` (as every OIDN
filter's ``execute`` does, Intel OIDN 2.5.1's ``UNetFilter::execute``): `Denoiser.denoise`
of host arrays (`FramePath.run`), the frames of `Denoiser.denoise_many`, the device path
of tensors (`filter_device`) and the frames of a backend's temporal session
(`backends.temporal_seam.FrameSource`, which this class is). For one frame it

1. picks the weights the images and options select (`filter_models.ModelCache`) and the
   engine (executor and runner) built once per weights;
2. decides who computes the input scale: the option, else for HDR the autoexposure of
   the color, computed by the runner on its device where it can (an
   `backends.base.AutoexposureRunner`, and always on a device path), else here;
3. plans the frame (`backends.plan.plan_denoise`: mode and tiles) within the backend's
   `backends.base.TileLimits`, through one plan cache;
4. after the runner ran, records what ran (`DenoiserInfo`, `Denoiser.info`).

It holds the denoiser's lock and its closed state, so a backend's session serializes
with the denoiser's other calls without reading the `Denoiser` itself.
"""

from __future__ import annotations

import dataclasses
import numbers
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oidn_gpu.backends.base import (
    AlphaRunner,
    AutoexposureRunner,
    BackendOptions,
    NetworkExecutor,
    TileRunner,
    check_backend,
    get_backend,
    tile_limits,
)
from oidn_gpu.backends.host_runner import report_progress
from oidn_gpu.backends.lru import LruCache
from oidn_gpu.backends.plan import DenoisePlan, plan_denoise, plan_mode
from oidn_gpu.config import FilterOptions
from oidn_gpu.errors import InvalidOperationError
from oidn_gpu.filter_images import Progress, make_runner_images
from oidn_gpu.filter_models import CUSTOM_WEIGHTS, ModelCache
from oidn_gpu.image import process
from oidn_gpu.image.autoexposure import autoexposure
from oidn_gpu.image.checks import Images
from oidn_gpu.model.unet import ValidatedModel

PLANS_KEPT = 16  # (weights, size, options) plans a denoiser remembers


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
    # why this backend: what backend="auto" found here, or that it was asked for by name
    backend_reason: str = ""


@dataclass
class Engine:
    """One model on the backend: its executor and the runner that denoises with it."""

    executor: NetworkExecutor
    runner: TileRunner

    def close(self) -> None:
        self.runner.close()
        self.executor.close()


@dataclass(frozen=True)
class PlannedFrame:
    """One frame planned (`backends.temporal_seam.NetworkFrame`).

    Attributes:
        key, model: the weights' name and network.
        engine: the model's executor and runner.
        plan: the mode and tiles, within the backend's tile limits.
        autoexposes: the runner computes the input scale (the autoexposure) itself.
        input_scale: the input scale, a placeholder 1.0 where ``autoexposes``.
    """

    key: str
    model: ValidatedModel
    engine: Engine
    plan: DenoisePlan
    autoexposes: bool
    input_scale: float

    @property
    def runner(self) -> TileRunner:
        return self.engine.runner


class FramePath:
    """The frame flow of one denoiser: its weights, engines, plan cache and last info.

    Args:
        options: the filter's options.
        backend, backend_options, backend_reason: the resolved backend, its options and
            why it was chosen (for `DenoiserInfo`).
        denoise: the denoiser's own ``denoise`` (a backend session that denoises device
            tensors calls it: `backends.temporal_seam.FrameSource.denoise`).
    """

    def __init__(
        self,
        options: FilterOptions,
        backend: str,
        backend_options: BackendOptions,
        backend_reason: str,
        denoise: Callable[..., Any],
    ) -> None:
        self.options = options
        self.backend = backend
        self.backend_options = backend_options
        self.backend_reason = backend_reason
        self.denoise = denoise
        self.tile_limits = tile_limits(backend)
        self.models = ModelCache(options)
        self.engines: dict[str, Engine] = {}
        # (id(model), H, W, DenoiseOptions) -> (model, plan); the model kept to check identity
        self._plans: LruCache[tuple[Any, ...], tuple[ValidatedModel, DenoisePlan]] = LruCache(
            PLANS_KEPT
        )
        self.last_info: DenoiserInfo | None = None
        # The last call's input scale while it is still on the device (device tensors).
        self.pending_scale: Any = None
        # Serializes denoise and close: the models, executors and their scratch buffers
        # are per denoiser and reused across calls. Reentrant, so that a progress
        # callback calling back into the denoiser gets a clear error, not a deadlock.
        self.lock = threading.RLock()
        self.closed = False

    def check_open(self) -> None:
        """Raises InvalidOperationError: the denoiser is closed."""
        if self.closed:
            raise InvalidOperationError("the denoiser is closed")

    def close(self) -> None:
        """Release every engine and model (the caller holds the lock)."""
        self.closed = True
        for engine in self.engines.values():
            engine.close()
        self.engines.clear()
        self._plans.clear()
        self.models.clear()

    # -- weights and engine -------------------------------------------------------

    def clean_aux(self, images: Images) -> bool:
        """Whether the aux images are noise-free: the option, or with a prefilter (RT with
        a color) whether albedo is given (prefiltered, or declared clean by ``fast``)."""
        options = self.options
        prefiltered = (
            options.filter_type == "RT" and images.color is not None and options.prefilter != "none"
        )
        return images.albedo is not None if prefiltered else options.clean_aux

    def weights(self, images: Images) -> tuple[str, ValidatedModel]:
        """The weights' name and network for ``images``."""
        return self.models.get(images, self.clean_aux(images))

    def engine(self, key: str, model: ValidatedModel) -> Engine:
        """The engine of ``model``, built once.

        Raises:
            UnsupportedDeviceError: the backend cannot run on this machine (the reason,
                and the backends that can: `backends.check_backend`).
        """
        engine = self.engines.get(key)
        if engine is None:
            # a backend named that cannot run here: why, and the backends that can
            check_backend(self.backend, {"device": getattr(self.backend_options, "device", None)})
            backend = get_backend(self.backend)
            executor = backend.create_executor(model, self.backend_options)
            try:
                runner = backend.create_runner(executor)
            except BaseException:
                executor.close()
                raise
            engine = self.engines[key] = Engine(executor, runner)
        return engine

    # -- input scale and plan -------------------------------------------------------

    def autoexposes(self, images: Images) -> bool:
        """Whether the input scale is the autoexposure of the color (HDR, no input_scale)."""
        if self.options.input_scale is not None or images.color is None:
            return False
        return plan_mode(self.options.denoise_options(images)).hdr

    def host_input_scale(self, images: Images) -> float:
        """The input scale computed here: the option, else autoexposure of the color for
        HDR, else 1."""
        if self.options.input_scale is not None:
            return self.options.input_scale
        if self.autoexposes(images):
            assert images.color is not None
            scale = autoexposure(images.color)
            process.warn_if_autoexposure_blackens(images.color, scale)
            return scale
        return 1.0

    def plan(self, images: Images, *, on_device: bool = False) -> PlannedFrame:
        """Plan one non-empty frame: weights, engine, who computes the input scale, and the
        mode and tiles within the backend's tile limits.

        ``on_device``: the frame's images are on the runner's device (device tensors, a
        session's buffers), so the runner computes any autoexposure; otherwise the runner
        does where it can (an `AutoexposureRunner`), else it is computed here.
        """
        key, model = self.weights(images)
        engine = self.engine(key, model)
        autoexposes = self.autoexposes(images) and (
            on_device or isinstance(engine.runner, AutoexposureRunner)
        )
        # With the autoexposure on the runner the plan's scale is a placeholder.
        input_scale = 1.0 if autoexposes else self.host_input_scale(images)
        options = self.options.denoise_options(images, input_scale)
        plan_key = (id(model), images.height, images.width, options)
        with self.lock:
            known = self._plans.get(plan_key)
            if known is None or known[0] is not model:
                plan = plan_denoise(model, images.height, images.width, options, self.tile_limits)
                known = (model, plan)
                self._plans.put(plan_key, known)
        return PlannedFrame(key, model, engine, known[1], autoexposes, input_scale)

    # -- running ------------------------------------------------------------------

    def run(
        self,
        images: Images,
        progress: Progress | None,
        *,
        destination: np.ndarray | None = None,
        scratch: bool = True,
        frame: PlannedFrame | None = None,
        alpha: Callable[[Any, Any], Any] | None = None,
    ) -> np.ndarray:
        """Denoise validated host images; returns HxWxC float32 (C = main channels sans
        alpha), or ``destination`` when the runner wrote the result into it
        (``scratch``: it is a new array, not the caller's, `DenoiseImages.output_is_scratch`;
        ``frame``: the images' `plan` already made).

        ``alpha``: the colour's alpha comes back too (C = main channels), computed on the
        device of ``frame``'s runner (an `AlphaRunner`) by ``alpha(plane, albedo)`` of its
        tensors there (`filter_alpha.alpha_on_device`).
        """
        h, w = images.height, images.width
        out_channels = images.main_channels - (1 if images.alpha is not None else 0)
        if h == 0 or w == 0:
            self.weights(images)  # the weights' errors, as for any frame
            return np.zeros((h, w, out_channels), np.float32)
        if frame is None:
            frame = self.plan(images)
        runner_images = make_runner_images(images, out_channels, destination, scratch=scratch)
        report_progress(progress, 0.0)
        input_scale = frame.input_scale
        if alpha is not None:
            runner = frame.runner
            assert isinstance(runner, AlphaRunner) and images.rgba is not None
            runner_images = dataclasses.replace(runner_images, main=images.rgba)
            result, scale = runner.run_with_alpha(
                runner_images, frame.plan, alpha, progress, autoexposure=frame.autoexposes
            )
            if frame.autoexposes:
                input_scale = scale
                process.warn_if_autoexposure_blackens(runner_images.main, scale)
        elif frame.autoexposes:
            runner = frame.runner
            assert isinstance(runner, AutoexposureRunner)
            result, input_scale = runner.run_autoexposed(runner_images, frame.plan, progress)
            if isinstance(input_scale, numbers.Real):  # else read later by `Denoiser.info`
                process.warn_if_autoexposure_blackens(runner_images.main, input_scale)
        else:
            result = frame.runner.run(runner_images, frame.plan, progress)
        self.record(frame, input_scale)
        return result

    def record(self, frame: Any, input_scale: Any) -> None:
        """Record what ran for `Denoiser.info` (``frame``: a `PlannedFrame`); an
        ``input_scale`` that is not a number is read by `Denoiser.info`."""
        pending = None if isinstance(input_scale, numbers.Real) else input_scale
        self.pending_scale = pending
        info = frame.engine.executor.info()
        key, model = frame.key, frame.model
        self.last_info = DenoiserInfo(
            backend=info.backend,
            device=info.device,
            precision=info.precision,
            weights=key if key != CUSTOM_WEIGHTS else (model.name or CUSTOM_WEIGHTS),
            weights_sha256=model.sha256,
            input_scale=float(input_scale) if pending is None else None,
            tiles=len(frame.plan.tiles.tiles),
            kernels=dict(info.kernels),
            kernel_fallbacks=dict(info.fallbacks),
            backend_reason=self.backend_reason,
        )
