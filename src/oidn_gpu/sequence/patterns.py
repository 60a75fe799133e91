"""Frame numbers in file names: ``####`` (Nuke, Arnold, V-Ray; one ``#`` per digit),
``%04d`` (printf, Nuke, ffmpeg) and ``$F4`` / ``$F`` (Houdini)."""

from __future__ import annotations

import glob
import re
from pathlib import Path

from oidn_gpu.errors import InvalidArgumentError

_FRAME_PATTERN = re.compile(r"(#+)|%(0?\d*)d|\$F(\d?)")


def has_frame_pattern(spec: str) -> bool:
    """Whether a file name holds a frame-number pattern (``####``, ``%04d``, ``$F4``)."""
    return _FRAME_PATTERN.search(spec) is not None


def expand_frame_patterns(spec: str, frame: int | None, source: str = "") -> str:
    """Replace ``####``, ``%04d``/``%d`` and ``$F4``/``$F`` in ``spec`` by ``frame``,
    zero-padded to the pattern's width (``render.####.exr`` -> ``render.0007.exr``).

    Raises:
        InvalidArgumentError: ``spec`` has a pattern but ``frame`` is None (the input
            ``source`` has no frame number).
    """

    def number(match: re.Match[str]) -> str:
        if frame is None:
            raise InvalidArgumentError(
                f"'{spec}' needs a frame number, but '{source}' has none (expected digits "
                "at the end of its name, such as 'render.0001.exr')"
            )
        hashes, printf, houdini = match.groups()
        if hashes is not None:
            width = len(hashes)
        elif printf is not None:
            width = int(printf) if printf else 0
        else:
            width = int(houdini) if houdini else 0
        return f"{frame:0{width}d}"

    return _FRAME_PATTERN.sub(number, spec)


def frame_pattern_files(spec: str) -> list[Path]:
    """The existing files that ``spec``'s frame-number patterns (``####``, ``%04d``,
    ``$F4``) match: each pattern stands for a frame number of at least its width
    (``render.####.exr`` matches ``render.0007.exr`` and ``render.12345.exr``)."""
    pieces, last = [], 0
    for match in _FRAME_PATTERN.finditer(spec):
        hashes, printf, houdini = match.groups()
        width = len(hashes) if hashes is not None else int((printf or houdini) or 0)
        pieces += [re.escape(spec[last : match.start()]), rf"\d{{{max(width, 1)},}}"]
        last = match.end()
    regex = re.compile("".join([*pieces, re.escape(spec[last:])]))
    candidates = glob.glob(glob.escape(_FRAME_PATTERN.sub("\0", spec)).replace("\0", "*"))
    return [Path(p) for p in candidates if regex.fullmatch(p) and Path(p).is_file()]
