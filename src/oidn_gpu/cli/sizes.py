"""Image sizes the benchmarks take: named (``720p``, ``1080p``, ``4k``) or ``WIDTHxHEIGHT``."""

from __future__ import annotations

from oidn_gpu.errors import InvalidArgumentError

# (height, width) of the named sizes.
SIZES = {"720p": (720, 1280), "1080p": (1080, 1920), "4k": (2160, 3840)}


def parse_size(size: str | tuple[int, int]) -> tuple[int, int]:
    """``"720p"``, ``"1080p"``, ``"4k"``, ``"WxH"`` or ``(height, width)`` -> ``(height, width)``.

    Raises:
        InvalidArgumentError: an unknown name, a malformed or non-positive size.
    """
    if isinstance(size, tuple):
        height, width = size
    else:
        text = str(size).strip().lower()
        if text in SIZES:
            return SIZES[text]
        parts = text.split("x")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise InvalidArgumentError(
                f"unknown size {size!r}; expected '720p', '1080p', '4k' or WIDTHxHEIGHT"
            )
        width, height = int(parts[0]), int(parts[1])
    if height < 1 or width < 1:
        raise InvalidArgumentError(f"size {width}x{height} must be positive")
    return int(height), int(width)
