"""An alpha channel denoised beside the colour (``alpha="denoise"``).

Intel OIDN passes a colour's alpha through with its noise (``alpha="copy"``, the default).
With ``alpha="denoise"`` the alpha is first fitted to the coverage the frame's albedo shows
(`oidn_gpu.image.coverage`: a guided filter; where the albedo was rendered with more samples
than the alpha, as denoising passes are, that removes most of the coverage noise), then
denoised once as a one-channel LDR image with the fast LDR weights and the albedo as its
auxiliary image (`alpha_config`: ``rt_ldr_alb_small``, `ALPHA_INPUT_SCALE`), and clipped to
0..1. Where the albedo shares the alpha's samples the fit returns the alpha as it is, and
the network does what it can alone (docs/benchmarks.md). The normal is left out and
the alpha scaled by 0.75 on its way in (and back on its way out): against the albedo and
normal unscaled, that lowers the error of coverage noise on the frames of
``bench/alpha_quality.py`` (13% on their geometric mean, up to 59% with depth of field or
thin blades; none worse by more than 0.3%), at the same cost (docs/benchmarks.md). A
one-channel image is OIDN's own case: the filter reads it as RGB (the value three times)
and writes the mean of the three channels it computes, so only one channel moves in and
out of a GPU.

`Denoiser.denoise` denoises a frame's alpha with the albedo it denoised the colour with (the
prefiltered one with ``prefilter="accurate"``):
on the host path from the decoded host arrays (read and checked once for both); where the
runner takes a colour with its alpha as one frame (`AlphaRunner`: cuda, wgpu) the RGBA
image goes to the device once and the alpha is computed there beside (cuda) or after
(wgpu, one queue) the colour's network, from the albedo uploaded for the colour
(`alpha_on_device`); with a prefilter, with the device copy of the albedo a
`HostInputsRunner` kept (the alpha plane alone is uploaded); on the device path
(`filter_device`) from the decoded tensors where they are.
The alpha's denoiser is a second `Denoiser` of the same backend and device, made on first
use and closed with the first (`alpha_denoiser`; on wgpu made on the colour runner's
device, whose buffers its runner reads).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from oidn_gpu.backends.runners import (
    BesideRunner,
    BufferAlphaRunner,
    CoverageRunner,
    HostCoverageRunner,
    HostInputsRunner,
)
from oidn_gpu.config import DenoiserConfig
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.checks import Images, validate_images
from oidn_gpu.image.coverage import fit_coverage, fit_coverage_tensor

ALPHA_MODES = ("copy", "denoise")
# The alpha's input scale (OIDN's inputScale: the output is divided by it): chosen on the
# frames of bench/alpha_quality.py, where 0.6 to 0.85 all beat 1 on every frame.
ALPHA_INPUT_SCALE = 0.75


def check_alpha_mode(alpha: Any) -> str:
    """``alpha`` if it is one of `ALPHA_MODES`.

    Raises:
        InvalidArgumentError: another value.
    """
    if not isinstance(alpha, str) or alpha not in ALPHA_MODES:
        raise InvalidArgumentError(f"alpha is {alpha!r}; expected one of {ALPHA_MODES}")
    return alpha


def alpha_config(config: DenoiserConfig) -> DenoiserConfig:
    """The config that denoises an alpha channel: the backend of ``config``, the ``RT``
    filter on LDR with the fast weights and `ALPHA_INPUT_SCALE` (no custom weights, no
    prefilter)."""
    fast = dataclasses.replace(
        config.filter,
        filter_type="RT",
        hdr=False,
        srgb=False,
        clean_aux=False,
        quality="fast",
        input_scale=ALPHA_INPUT_SCALE,
        directional=False,
        prefilter="none",
        weights=None,
    )
    return dataclasses.replace(config, filter=fast)


def alpha_denoiser(helpers: dict[str, Any], denoiser: Any, runner: Any = None) -> Any:
    """The alpha's denoiser of ``denoiser``, kept in ``helpers`` (the denoiser's
    sub-denoisers, closed with it) under ``"alpha"``; made on first use. ``runner``: the
    colour's runner where the alpha runs on its device as a second runner
    (`BufferAlphaRunner`, wgpu): the alpha's denoiser is made on that device, one per
    device."""
    config, key = alpha_config(denoiser.config), "alpha"
    if isinstance(runner, BufferAlphaRunner):
        options = runner.on_device(config.backend_options)
        config = dataclasses.replace(config, backend_options=options)
        key = f"alpha@{id(options.device)}"  # kept alive by the denoiser's options
    made = helpers.get(key)
    if made is None:
        made = helpers[key] = type(denoiser).from_config(config)
    return made


def denoise_alpha(
    denoiser: Any, alpha: Any, albedo: Any = None, fit: Callable[[Any, Any], Any] = fit_coverage
) -> np.ndarray:
    """``alpha`` (``H x W`` or ``H x W x 1``) denoised by ``denoiser`` (one made from
    `alpha_config`) with the frame's ``albedo``: clipped to 0..1, fitted to the albedo's
    coverage (``fit``: `fit_coverage` or a runner's form of it, with an albedo), denoised
    once as a one-channel image and clipped to 0..1 again; returned float32 in the shape
    given."""
    values = np.asarray(alpha, dtype=np.float32)
    if values.ndim == 3 and values.shape[2] == 1:
        plane = values[:, :, 0]
    elif values.ndim == 2:
        plane = values
    else:
        raise InvalidArgumentError(
            f"the alpha image is {values.shape}; expected H x W or H x W x 1"
        )
    one = np.clip(plane, 0.0, 1.0)
    if albedo is not None:
        one = np.clip(fit(one, albedo), 0.0, 1.0)
    denoised = np.asarray(denoiser.denoise(one[:, :, None], albedo), dtype=np.float32)
    return np.clip(denoised[:, :, 0], 0.0, 1.0).reshape(values.shape)


def denoise_frame_alpha(denoiser: Any, images: Images, runner: Any) -> np.ndarray:
    """The alpha of host ``images`` (`Images` with an alpha) denoised by ``denoiser``
    after the colour ran on ``runner``: where the runner keeps the device copies of the
    frame's images (`HostInputsRunner`, cuda), only the alpha is uploaded and the albedo
    is read where it is; else from the host arrays (`denoise_alpha`, fitted on the
    runner's device where it can: `HostCoverageRunner`, wgpu)."""
    assert images.alpha is not None
    shared = runner.host_inputs() if isinstance(runner, HostInputsRunner) else {}
    if "main" not in shared or ("albedo" in shared) != (images.albedo is not None):
        fit = runner.fit_coverage_host if isinstance(runner, HostCoverageRunner) else fit_coverage
        return denoise_alpha(denoiser, images.alpha, images.albedo, fit)
    main, albedo = shared["main"], shared.get("albedo")
    alpha = main.new_tensor(np.asarray(images.alpha, dtype=np.float32))  # one channel uploaded
    return _denoise_alpha_tensor(denoiser, alpha, albedo, runner).cpu().numpy()


def alpha_on_device(denoiser: Any, runner: Any, images: Images) -> Callable[[Any, Any], Any]:
    """How an `AlphaRunner` computes the alpha of host ``images`` on its device:
    ``(plane, albedo) -> alpha`` of its images there (the alpha plane of the uploaded
    colour, the uploaded albedo or None), queued where the runner calls it (beside or
    after the colour's network). ``denoiser``: one made from `alpha_config` (on the
    runner's device: `alpha_denoiser` with the runner). On torch tensors (cuda)
    `denoise_alpha_tensor`'s work; on buffers (`BufferAlphaRunner`, wgpu) the runner's
    clipped fit, then the network on the alpha denoiser's runner into a plane of the
    runner's, which the runner clips into the result."""
    if not isinstance(runner, BufferAlphaRunner):
        return lambda plane, albedo: _denoise_alpha_tensor(denoiser, plane, albedo, runner)
    assert images.alpha is not None
    frame = denoiser._frames.plan(validate_images(images.alpha, images.albedo, None))
    return lambda plane, albedo: _denoise_alpha_buffers(frame, runner, plane, albedo)


def _denoise_alpha_buffers(frame: Any, runner: Any, plane: Any, albedo: Any) -> Any:
    """The alpha's fit on ``runner`` and its network on ``frame``'s runner (the alpha
    denoiser's planned frame), queued; returns the network's plane (not yet clipped)."""
    fitted = runner.fit_alpha(plane, albedo)
    denoised = runner.plane("alpha-denoised", plane.height, plane.width)
    inputs = [fitted] if albedo is None else [fitted, albedo]
    frame.runner.denoise_buffers(inputs, denoised, mode=frame.plan.mode, plan=frame.plan.tiles)
    return denoised


def _clipped_fit(runner: Any, alpha: Any, albedo: Any) -> Any:
    """The alpha tensor clipped to 0..1, fitted to the albedo's coverage and clipped again,
    on ``runner``'s device: in its own kernels (`CoverageRunner`, which clip as they read
    and write), else by `fit_coverage_tensor`."""
    if isinstance(runner, CoverageRunner):
        return runner.fit_coverage(alpha, albedo, clip=True)
    return fit_coverage_tensor(alpha.float().clamp(0.0, 1.0), albedo).clamp(0.0, 1.0)


def denoise_alpha_tensor(
    denoiser: Any, alpha: Any, albedo: Any, runner: Any = None, start: Any = None
) -> Any:
    """`denoise_alpha` of an ``H x W`` torch tensor with the frame's (decoded) albedo
    tensor, on their device (``runner``: the colour's, whose coverage fit is used where it
    has one): the float32 ``H x W`` denoised alpha, a tensor there. Where the runner runs
    work beside other work (`BesideRunner`, cuda) the alpha is queued beside the work the
    device queued after ``start`` (a `BesideRunner.queued` mark from before the colour's
    network: the two networks then share the GPU)."""
    if not isinstance(runner, BesideRunner):
        return _denoise_alpha_tensor(denoiser, alpha, albedo, runner)
    with runner.beside(start) as handed_back:
        return handed_back(_denoise_alpha_tensor(denoiser, alpha, albedo, runner))


def _denoise_alpha_tensor(denoiser: Any, alpha: Any, albedo: Any, runner: Any) -> Any:
    one = alpha.float().clamp(0.0, 1.0) if albedo is None else _clipped_fit(runner, alpha, albedo)
    denoised = denoiser.denoise(one.unsqueeze(2), albedo)  # a new tensor: clipped in place
    return denoised[:, :, 0].float().clamp_(0.0, 1.0)
