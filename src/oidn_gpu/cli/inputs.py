"""``oidn-gpu denoise``'s files: the inputs from files, globs, frame patterns and folders
(`expand_inputs`), and each frame's outputs and auxiliary files (`map_path`, `plan_jobs`),
all checked before any work."""

from __future__ import annotations

import argparse
import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from oidn_gpu.cli.usage import UsageError
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.files import OutputFileError, check_outputs
from oidn_gpu.image.io import output_format_name
from oidn_gpu.sequence import (
    AuxSource,
    FrameJob,
    expand_frame_patterns,
    frame_pattern_files,
    has_frame_pattern,
)

IMAGE_SUFFIXES = frozenset(
    {
        ".exr",
        ".pfm",
        ".hdr",
        ".png",
        ".jpg",
        ".jpeg",
        ".tif",
        ".tiff",
        ".ppm",
        ".pnm",
        ".bmp",
        ".tga",
        ".webp",
    }
)
_GLOB_CHARS = re.compile(r"[*?\[]")
_TRAILING_DIGITS = re.compile(r"(\d+)$")


def _natural_key(path: Path) -> list[Any]:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path.name)]


def _images_in(directory: Path) -> list[Path]:
    files = [
        p
        for p in directory.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in IMAGE_SUFFIXES
    ]
    return sorted(files, key=_natural_key)


def expand_inputs(specs: Sequence[str]) -> tuple[list[Path], bool]:
    """Files from files, globs, frame patterns (``render.####.exr``, ``%04d``, ``$F4``)
    and directories, in order, without duplicates.

    Returns:
        (files, is_collection): is_collection is True when a directory or glob was given
        (the output is then a directory even for one file).

    Raises:
        UsageError: an input does not exist, or a directory/glob yields nothing.
    """
    files: list[Path] = []
    collection = False
    for spec in specs:
        path = Path(spec)
        if path.is_dir():
            found = _images_in(path)
            if not found:
                raise UsageError(f"directory '{spec}' holds no image files")
            collection = True
        elif path.exists():
            found = [path]
        elif has_frame_pattern(spec):
            found = sorted(frame_pattern_files(spec), key=_natural_key)
            if not found:
                raise UsageError(f"no files match the frame pattern '{spec}'")
            collection = True
        elif _GLOB_CHARS.search(spec):
            found = sorted(
                (Path(m) for m in glob.glob(spec) if Path(m).is_file()), key=_natural_key
            )
            if not found:
                raise UsageError(f"no files match '{spec}'")
            collection = True
        else:
            raise UsageError(f"input '{spec}' does not exist")
        files.extend(found)
    unique = list(dict.fromkeys(files))
    return unique, collection or len(unique) > 1


def _fields(src: Path) -> dict[str, str]:
    match = _TRAILING_DIGITS.search(src.stem)
    return {
        "stem": src.stem,
        "name": src.name,
        "ext": src.suffix.lstrip("."),
        "frame": match.group(1) if match else "",
        "dir": str(src.parent),
    }


def map_path(spec: str, src: Path, *, many: bool, suffix: str | None = None) -> Path:
    """Where the output for ``src`` goes: template, directory (``many``) or the file itself.

    Raises:
        UsageError: unknown placeholder in a template.
    """
    if has_frame_pattern(spec):
        frame = _fields(src)["frame"]
        try:
            spec = expand_frame_patterns(spec, int(frame) if frame else None, str(src))
        except InvalidArgumentError as err:
            raise UsageError(str(err)) from None
        if "{" not in spec and not spec.endswith(("/", os.sep)):
            return Path(spec)  # one file per frame
    if "{" in spec:
        try:
            return Path(spec.format(**_fields(src)))
        except (KeyError, IndexError, ValueError) as err:
            raise UsageError(
                f"bad template '{spec}' ({err}); placeholders are {{stem}}, {{name}}, "
                "{ext}, {frame} and {dir}"
            ) from None
    path = Path(spec)
    if many or path.is_dir() or spec.endswith(("/", os.sep)):
        return path / (src.stem + (suffix or src.suffix))
    return path


def _aux_path(spec: str, src: Path, many: bool) -> Path:
    if "{" in spec or has_frame_pattern(spec):
        return map_path(spec, src, many=many)
    path = Path(spec)
    if path.is_dir():
        return path / src.name
    if many:
        raise UsageError(
            f"one aux file '{spec}' for {src.parent}/... several inputs; give a directory "
            "or a template such as 'albedo.{frame}.exr'"
        )
    return path


def plan_jobs(args: argparse.Namespace, files: list[Path], many: bool) -> list[Any]:
    """Build the `FrameJob` list and check outputs and aux files before any work."""

    if many:
        for flag, spec in (("-o", args.output), ("--side-by-side", args.side_by_side)):
            _check_folder_spec(flag, spec, len(files))
    jobs = []
    for src in files:
        output = map_path(args.output, src, many=many)
        side = (
            map_path(args.side_by_side, src, many=many, suffix=".png")
            if args.side_by_side
            else None
        )
        albedo = normal = None
        if args.albedo:
            albedo = AuxSource(_aux_path(args.albedo, src, many), args.albedo_layer)
        if args.normal:
            normal = AuxSource(_aux_path(args.normal, src, many), args.normal_layer)
        jobs.append(FrameJob(src, output, albedo, normal, side))

    seen: dict[Path, Path] = {}
    for job in jobs:
        for target in (job.output, job.side_by_side):
            if target is None:
                continue
            key = target.resolve()
            if key in seen:
                raise UsageError(
                    f"'{seen[key]}' and '{job.color}' would both write '{target}'; use a "
                    "template such as 'out/{stem}.exr'"
                )
            seen[key] = job.color
        for aux in (job.albedo, job.normal):
            if aux is not None and not aux.path.is_file():
                raise UsageError(f"auxiliary file '{aux.path}' does not exist")
    for target in {job.output.suffix.lower(): job.output for job in jobs}.values():
        try:
            output_format_name(target)
        except InvalidArgumentError as err:
            raise UsageError(str(err)) from None
    inputs = [job.color for job in jobs] + [
        aux.path for job in jobs for aux in (job.albedo, job.normal) if aux is not None
    ]
    targets = [t for job in jobs for t in (job.output, job.side_by_side) if t is not None]
    try:
        check_outputs(targets, inputs, create_folders=args.mkdir)
    except OutputFileError as err:
        raise UsageError(str(err)) from None
    if args.aovs or args.aovs_sum or args.layer_name is not None:
        flag = "--aovs" if args.aovs else ("--aovs-sum" if args.aovs_sum else "--layer-name")
        for job in jobs:
            if job.output.suffix.lower() != ".exr" or job.color.suffix.lower() != ".exr":
                raise UsageError(
                    f"{flag} writes layers into an EXR: '{job.color}' -> '{job.output}' "
                    "needs an .exr input and output"
                )
    if not (args.overwrite or args.skip_existing):
        for job in jobs:
            for target in (job.output, job.side_by_side):
                # a link counts even when it dangles: replacing it would lose it
                if target is not None and (target.exists() or target.is_symlink()):
                    raise UsageError(
                        f"output '{target}' exists; pass --overwrite or --skip-existing"
                    )
    return jobs


def _check_folder_spec(flag: str, spec: str | None, count: int) -> None:
    """Several inputs need a folder or a template: ``-o x.exr`` is refused (else --mkdir
    would make a folder named ``x.exr``)."""
    if spec is None or "{" in spec or has_frame_pattern(spec) or spec.endswith(("/", os.sep)):
        return
    path = Path(spec)
    if path.suffix.lower() in IMAGE_SUFFIXES and not path.is_dir():
        raise UsageError(
            f"{flag} '{spec}' names one file but {count} inputs are given; give a folder "
            f"('{path.with_suffix('')}/') or a template such as "
            f"'{path.parent / ('{stem}' + path.suffix)}'"
        )
