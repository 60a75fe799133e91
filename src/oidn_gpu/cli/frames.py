"""``oidn-gpu denoise --frames RANGE``: the frames a render-farm task is handed
(``1001-1100``, ``1001-1100x2``, ``1001,1005,1010-1012``; parsed by fileseq's
``FrameSet``) picked out of frame patterns, globs and folders, and the frames of the
range that no file holds (`FrameSelection.missing`, reported by `missing_report`).

A frame pattern (``render.####.exr``, ``%04d``, ``$F4``; one ``#`` per digit) names one
file per frame; a glob or folder gives the files whose name ends in one of the frames'
numbers (``render.1001.exr``: 1001); a plain file is kept when its number is in the range.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oidn_gpu.cli.inputs import expand_inputs
from oidn_gpu.cli.usage import UsageError
from oidn_gpu.sequence import expand_frame_patterns, has_frame_pattern

MAX_FRAMES = 1_000_000
_TRAILING_DIGITS = re.compile(r"(\d+)$")


def parse_frames(text: str) -> tuple[int, ...]:
    """The frame numbers of a range, in the range's order, each once.

    Raises:
        UsageError: not a range of whole frame numbers (or more than `MAX_FRAMES`).
    """
    import fileseq

    try:
        frames = fileseq.FrameSet(text.strip())
        numbers = [float(f) for f in frames]
    except (ValueError, fileseq.FileSeqException) as err:
        detail = str(err).splitlines()[0]
        raise UsageError(
            f"--frames '{text}' is not a frame range ({detail}); expected e.g. 1001-1100, "
            "1001-1100x2 or 1001,1005,1010-1012"
        ) from None
    if not numbers:
        raise UsageError(f"--frames '{text}' names no frame; expected e.g. 1001-1100")
    if len(numbers) > MAX_FRAMES or any(not n.is_integer() for n in numbers):
        raise UsageError(
            f"--frames '{text}' must name whole frame numbers (at most {MAX_FRAMES:,}); "
            "expected e.g. 1001-1100"
        )
    return tuple(int(n) for n in numbers)


def compact(frames: Sequence[int]) -> str:
    """Frame numbers as a short range (``1003,1007-1009``)."""
    import fileseq

    return str(fileseq.FrameSet(sorted(set(frames))).frange)


@dataclass(frozen=True)
class FrameSelection:
    """The files of the frames asked for, and per input the frames it lacks.

    Attributes:
        files: the files, in the range's order per input, without duplicates.
        many: the output is a folder or template (as for a glob or folder).
        missing: per input (as given), the frames of the range it has no file for.
    """

    files: list[Path]
    many: bool
    missing: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def missing_count(self) -> int:
        return sum(len(frames) for frames in self.missing.values())


def _frame_of(path: Path) -> int | None:
    match = _TRAILING_DIGITS.search(path.stem)
    return int(match.group(1)) if match else None


def select_frames(specs: Sequence[str], text: str) -> FrameSelection:
    """The frames of ``text`` (`parse_frames`) from each input (module doc).

    Raises:
        UsageError: a bad range, an input that does not exist, or no file at all.
    """
    frames = parse_frames(text)
    files: list[Path] = []
    missing: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        if has_frame_pattern(spec) and not Path(spec).exists():
            named = {f: Path(expand_frame_patterns(spec, f, spec)) for f in frames}
            found = {f: p for f, p in named.items() if p.is_file()}
        else:
            listed, _ = expand_inputs([spec])
            by_frame: dict[int, Path] = {}
            for path in listed:
                number = _frame_of(path)
                if number is not None:
                    by_frame.setdefault(number, path)
            found = {f: by_frame[f] for f in frames if f in by_frame}
            if Path(spec).is_file() and not found:
                continue  # a plain file outside the range: left out, not missing
        files.extend(found[f] for f in frames if f in found)
        lacking = tuple(f for f in frames if f not in found)
        if lacking and not Path(spec).is_file():
            missing[spec] = lacking
    unique = list(dict.fromkeys(files))
    if not unique:
        raise UsageError(
            f"no input file holds a frame of --frames {text}: "
            + "; ".join(f"'{spec}'" for spec in specs)
        )
    many = len(unique) > 1 or any(not Path(spec).is_file() for spec in specs)
    return FrameSelection(unique, many, missing)


def missing_report(selection: FrameSelection, asked: int) -> list[str]:
    """One line per input that lacks frames: how many of the range, and which."""
    return [
        f"{len(frames)} of {asked} frames missing from '{spec}': {compact(frames)}"
        for spec, frames in selection.missing.items()
    ]
