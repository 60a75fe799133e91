"""The exception hierarchy of oidn-gpu.

Each class mirrors one of OIDN's error codes (``OIDNError`` in
``include/OpenImageDenoise/oidn.h``: None 0, Unknown 1, InvalidArgument 2,
InvalidOperation 3, OutOfMemory 4, UnsupportedHardware 5, Cancelled 6) and also
subclasses the natural Python builtin, so callers can catch either.
Messages are one lowercase sentence without a trailing period; where OIDN has
a verbatim message for the same condition, that message starts ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


class OIDNGPUError(Exception):
    """Base class of every error raised by oidn-gpu."""

    code: int = 1  # OIDN_ERROR_UNKNOWN


class InvalidArgumentError(OIDNGPUError, ValueError):
    """A value passed by the caller is invalid (OIDN_ERROR_INVALID_ARGUMENT)."""

    code = 2


class InvalidOperationError(OIDNGPUError, RuntimeError):
    """The call is not valid in this state or combination (OIDN_ERROR_INVALID_OPERATION)."""

    code = 3


class OutOfMemoryError(OIDNGPUError, MemoryError):
    """A host or device allocation failed (OIDN_ERROR_OUT_OF_MEMORY)."""

    code = 4


class UnsupportedDeviceError(OIDNGPUError, RuntimeError):
    """The device lacks a needed feature or limit (OIDN_ERROR_UNSUPPORTED_HARDWARE)."""

    code = 5


class CancelledError(OIDNGPUError, RuntimeError):
    """The progress callback asked to stop (OIDN_ERROR_CANCELLED)."""

    code = 6


class DeadlineExceededError(CancelledError, TimeoutError):
    """Work ran past its wall-clock deadline (a replayed program); OIDN_ERROR_CANCELLED."""


class WeightsFormatError(InvalidArgumentError):
    """A ``.tza`` blob is malformed or does not match a known U-Net descriptor."""


class WeightsNotFoundError(InvalidArgumentError, FileNotFoundError):
    """A weights file needed for the requested mode is not on disk."""


class ShaderCompileError(OIDNGPUError, RuntimeError):
    """A generated WGSL kernel failed to compile; carries the kernel name and spec."""


class MissingDependencyError(OIDNGPUError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class NonFiniteInputWarning(RuntimeWarning):
    """HDR color with infinite (or float32-overflowing) pixels drove autoexposure to 0,
    so the output is black, as in OIDN; pass an input scale or fix the pixels."""


class NonFiniteOutputWarning(RuntimeWarning):
    """A denoised image holds NaN or infinite pixels (broken weights or input); OIDN
    returns such pixels without a word, the command-line tool counts them."""


def require(module: str, extra: str) -> Any:  # returns a module
    """Import an optional dependency or raise `MissingDependencyError` naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingDependencyError(
            f"the optional dependency '{module}' is not installed; "
            f"install it with: pip install 'oidn-gpu[{extra}]'"
        ) from err


def one_of(values: Iterable[object]) -> str:
    """The allowed values of a message, quoted: ``'a'``, ``'a' or 'b'``, ``'a', 'b' or 'c'``."""
    quoted = [f"'{v}'" for v in values]
    if len(quoted) < 2:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}"


def did_you_mean(given: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the candidate closest to a misspelt name (difflib), or
    an empty string when none is close."""
    import difflib

    close = difflib.get_close_matches(given, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def channels_first_hint(shape: Sequence[int]) -> str:
    """For an image shape that looks channels-first (``C x H x W``, C 1..4, the last axis
    longer), how to pass it channels-last; otherwise ``''``."""
    if len(shape) == 3 and 1 <= shape[0] <= 4 and shape[2] > 4:
        return (
            f" (it looks channels-first, {shape[0]} x {shape[1]} x {shape[2]}: pass "
            "image.permute(1, 2, 0) for a torch tensor, image.transpose(1, 2, 0) for a "
            "NumPy array)"
        )
    return ""
