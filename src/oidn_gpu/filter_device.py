"""The facade's device path: `Denoiser.denoise` of tensors where they already are.

When every image (and the output) of a call is a torch tensor or a CUDA array
(`image.tensors.as_device_call`) and the backend's runner is a
`backends.base.DeviceRunner` on the tensors' device, the call never leaves the
device: the images are validated with `Denoiser`'s messages, integers decoded
and the result encoded on the device (`image.tensors`), the runner stages the
tensors into its own buffers and replays its captured frame on the caller's
current stream, and nothing is read back: the autoexposure scale stays on the
device until `Denoiser.info` reads it.

Otherwise the call takes the NumPy path (`denoise` returns None): backends that
denoise host arrays (reference, wgpu), and CPU tensors given to a GPU backend.
A CUDA tensor on another device than the runner's is an error, never copied.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from oidn_gpu.backends.base import BesideRunner, DeviceRunner
from oidn_gpu.backends.host_runner import report_progress
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.filter_alpha import denoise_alpha_tensor
from oidn_gpu.filter_frame import FramePath
from oidn_gpu.filter_images import (
    Progress,
    check_output_shape,
    make_runner_images,
    scaled_progress,
)
from oidn_gpu.image import process
from oidn_gpu.image.checks import Images, split_alpha, validate_images
from oidn_gpu.image.tensors import DeviceCall

if TYPE_CHECKING:
    from oidn_gpu.filter import Denoiser

_device_runner_types: dict[type, bool] = {}  # runner class -> is a DeviceRunner


class _LazyScale:
    """The input scale a runner left on the device; ``float()`` reads it (for `info`) and
    gives the warning of an autoexposure of 0 then."""

    def __init__(self, scale: Any, color: Any) -> None:
        self._scale = scale
        self._color = color

    def __float__(self) -> float:
        value = float(self._scale)
        if value == 0.0:
            color = self._color.float().cpu().numpy()
            process.warn_if_autoexposure_blackens(color, value)
        return value


def denoise(den: Denoiser, call: DeviceCall, progress: Progress | None, alpha: str) -> Any:
    """Denoise ``call`` on ``den``'s device (holding its lock): the caller's answer, or
    None when the call takes the NumPy path. ``alpha="denoise"`` denoises the color's
    alpha there too, with the decoded albedo (`filter_alpha`)."""
    frames = den.frames
    frames.check_open()
    options = den.options
    color, albedo, normal = call.color, call.albedo, call.normal
    dropped = options.filter_type == "RTLightmap" and (albedo is not None or normal is not None)
    if dropped:
        albedo = normal = None
    images = validate_images(color, albedo, normal, check=split_alpha)
    prefilter = (
        options.filter_type == "RT" and images.color is not None and options.prefilter != "none"
    )
    key, model = frames.weights(images)
    if images.height == 0 or images.width == 0:
        return None
    if not _takes(frames.engine(key, model).runner, call):
        return None
    if dropped:
        warnings.warn(
            "the RTLightmap filter takes only a color image; albedo and normal are ignored",
            stacklevel=4,  # the caller of Denoiser.denoise
        )
    if call.output is not None:
        check_output_shape(tuple(call.output.shape), images)
    color_d, albedo_d, normal_d = (
        call.decoded(n) if keep is not None else None
        for n, keep in (("color", color), ("albedo", albedo), ("normal", normal))
    )
    decoded = validate_images(color_d, albedo_d, normal_d, check=split_alpha)
    alpha_too = alpha == "denoise" and decoded.alpha is not None
    runner = frames.engine(key, model).runner
    # the alpha runs beside the colour's network where the runner can (`BesideRunner`);
    # after a prefilter it waits for the prefiltered albedo
    start = None
    if alpha_too and not prefilter and isinstance(runner, BesideRunner):
        start = runner.queued()
    if prefilter:
        result, guide = _prefiltered(den, decoded, progress)
    else:
        result, guide = _run(frames, decoded, progress), decoded.albedo
    alpha_plane = decoded.alpha
    if alpha_plane is None:
        return call.finish(result)  # the runner's buffer: copied by `finish`
    if alpha_too:  # with the colour's albedo
        alpha_denoiser = den._alpha_denoiser()
        alpha_plane = denoise_alpha_tensor(alpha_denoiser, alpha_plane, guide, runner, start)
    # a new tensor (the runner's buffer copied once, by the concatenation): not copied again
    return call.finish(_with_alpha(result, alpha_plane), owned=True)


def _takes(runner: Any, call: DeviceCall) -> bool:
    """Whether ``runner`` denoises the call's tensors where they are.

    Raises:
        InvalidArgumentError: a tensor on a GPU other than the runner's.
    """
    kind = type(runner)
    takes = _device_runner_types.get(kind)
    if takes is None:  # a Protocol's isinstance costs as much as the rest of a call's checks
        takes = _device_runner_types[kind] = isinstance(runner, DeviceRunner)
    if not takes:
        return False
    device = runner.device
    elsewhere = [(name, t.device) for name, t in call.tensors() if t.device != device]
    for name, other in elsewhere:
        if other.type != "cpu":
            raise InvalidArgumentError(
                f"{name} is on {other} but the denoiser runs on {device}; move the tensor "
                f"there (.to('{device}')) or denoise it with a Denoiser on {other} "
                f"(device='{other}')"
            )
    return not elsewhere


def _run(frames: FramePath, images: Images, progress: Progress | None) -> Any:
    """`FramePath.run` on the device: the runner's float32 ``[H, W, C]`` result tensor."""
    frame = frames.plan(images, on_device=True)
    runner: Any = frame.runner  # a DeviceRunner (`_takes`)
    out_channels = images.main_channels - (1 if images.alpha is not None else 0)
    runner_images = make_runner_images(images, out_channels)
    report_progress(progress, 0.0)
    scale: Any = frame.input_scale
    if frame.autoexposes:
        result, device_scale = runner.run_device_autoexposed(runner_images, frame.plan, progress)
        scale = _LazyScale(device_scale, runner_images.main)
    else:
        result = runner.run_device(runner_images, frame.plan, progress)
    frames.record(frame, scale)
    return result


def _prefiltered(den: Denoiser, images: Images, progress: Progress | None) -> tuple[Any, Any]:
    """`Denoiser._denoise_prefiltered` on the device: aux images denoised first
    (``accurate``) or declared clean (``fast``), then the color; ``(result, the albedo
    it was denoised with)``."""
    import torch

    albedo, normal = images.albedo, images.normal
    if den.options.prefilter == "accurate":
        stages = [n for n, a in (("albedo", albedo), ("normal", normal)) if a is not None]
        total = len(stages) + 1
        for index, name in enumerate(stages):
            sub = den._prefilter_denoiser(name)
            part = scaled_progress(progress, index / total, 1 / total)
            aux_albedo, aux_normal = (albedo, None) if name == "albedo" else (None, normal)
            aux = validate_images(None, aux_albedo, aux_normal, check=split_alpha)
            with sub.frames.lock:
                clean = _run(sub.frames, aux, part)
            # As the NumPy path: the cleaned image in the dtype it computes the aux image
            # in (float16 kept, others float32).
            given = albedo if name == "albedo" else normal
            assert given is not None  # a stage of a given image
            clean = clean.half() if given.dtype == torch.float16 else clean
            if name == "albedo":
                albedo = clean
            else:
                normal = clean
        progress = scaled_progress(progress, len(stages) / total, 1 / total)
    # The color without its alpha: the result has the same channels (alpha is appended
    # afterwards).
    # The aux images are clean now: `FramePath.clean_aux`.
    clean_images = validate_images(images.color, albedo, normal, check=split_alpha)
    return _run(den.frames, clean_images, progress), clean_images.albedo


def _with_alpha(result: Any, alpha: Any) -> Any:
    """A new float32 tensor: the result with ``alpha`` (an ``H x W`` tensor) appended as
    float32 (as the NumPy path does)."""
    import torch

    return torch.cat([result, alpha.to(torch.float32).unsqueeze(2)], dim=2)
