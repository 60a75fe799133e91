"""An alpha channel denoised beside the colour (``alpha="denoise"``).

Intel OIDN passes a colour's alpha through with its noise (``alpha="copy"``, the default).
With ``alpha="denoise"`` the alpha is denoised once as a one-channel linear LDR image with
the fast LDR weights (`alpha_config`: ``rt_ldr_alb_nrm_small`` with an albedo and a
normal), the frame's albedo and normal as its auxiliary images, and clipped to 0..1. A
one-channel image is OIDN's own case: the filter reads it as RGB (the value three times)
and writes the mean of the three channels it computes, so only one channel moves in and
out of a GPU.

`Denoiser.denoise` denoises a frame's alpha from the images it denoised the colour from:
on the host path from the decoded host arrays (read and checked once for both), on the
device path (`filter_device`) from the decoded tensors where they are, so the albedo and
normal never leave the device. The alpha's
denoiser is a second `Denoiser` of the same backend and device, made on first use and
closed with the first (`alpha_denoiser`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from oidn_gpu.backends.runners import HostInputsRunner
from oidn_gpu.config import DenoiserConfig
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.checks import Images

ALPHA_MODES = ("copy", "denoise")


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
    filter on linear LDR with the fast weights (no custom weights, no prefilter)."""
    fast = dataclasses.replace(
        config.filter,
        filter_type="RT",
        hdr=False,
        srgb=False,
        clean_aux=False,
        quality="fast",
        input_scale=None,
        directional=False,
        prefilter="none",
        weights=None,
    )
    return dataclasses.replace(config, filter=fast)


def alpha_denoiser(helpers: dict[str, Any], denoiser: Any) -> Any:
    """The alpha's denoiser of ``denoiser``, kept in ``helpers`` (the denoiser's
    sub-denoisers, closed with it) under ``"alpha"``; made on first use."""
    made = helpers.get("alpha")
    if made is None:
        made = helpers["alpha"] = type(denoiser).from_config(alpha_config(denoiser.config))
    return made


def denoise_alpha(denoiser: Any, alpha: Any, albedo: Any = None, normal: Any = None) -> np.ndarray:
    """``alpha`` (``H x W`` or ``H x W x 1``) denoised by ``denoiser`` (one made from
    `alpha_config`): clipped to 0..1, denoised once as a one-channel image and clipped to
    0..1 again; returned float32 in the shape given."""
    values = np.asarray(alpha, dtype=np.float32)
    if values.ndim == 3 and values.shape[2] == 1:
        plane = values[:, :, 0]
    elif values.ndim == 2:
        plane = values
    else:
        raise InvalidArgumentError(
            f"the alpha image is {values.shape}; expected H x W or H x W x 1"
        )
    one = np.clip(plane, 0.0, 1.0)[:, :, None]
    denoised = np.asarray(denoiser.denoise(one, albedo, normal), dtype=np.float32)
    return np.clip(denoised[:, :, 0], 0.0, 1.0).reshape(values.shape)


def denoise_frame_alpha(denoiser: Any, images: Images, runner: Any) -> np.ndarray:
    """The alpha of host ``images`` (`Images` with an alpha) denoised by ``denoiser``
    after the colour ran on ``runner``: where the runner keeps the device copies of the
    frame's images (`HostInputsRunner`, cuda), only the alpha is uploaded and the albedo
    and normal are read where they are; else from the host arrays (`denoise_alpha`)."""
    assert images.alpha is not None
    shared = runner.host_inputs() if isinstance(runner, HostInputsRunner) else {}
    given = {"albedo": images.albedo, "normal": images.normal}
    if "main" not in shared or any(
        (role in shared) != (image is not None) for role, image in given.items()
    ):
        return denoise_alpha(denoiser, images.alpha, images.albedo, images.normal)
    main = shared["main"]
    plane = np.clip(np.asarray(images.alpha, dtype=np.float32), 0.0, 1.0)
    alpha = main.new_tensor(plane[:, :, None]).float()  # one channel uploaded
    denoised = denoiser.denoise(alpha, shared.get("albedo"), shared.get("normal"))
    values = denoised[:, :, 0].float().cpu().numpy()
    return np.clip(values, 0.0, 1.0).astype(np.float32, copy=False)


def denoise_alpha_tensor(denoiser: Any, alpha: Any, albedo: Any, normal: Any) -> Any:
    """`denoise_alpha` of an ``H x W`` torch tensor with the frame's (decoded) albedo and
    normal tensors, on their device: the float32 ``H x W`` denoised alpha, a tensor there."""
    one = alpha.float().clamp(0.0, 1.0).unsqueeze(2)
    denoised = denoiser.denoise(one, albedo, normal)
    return denoised[:, :, 0].float().clamp(0.0, 1.0)
