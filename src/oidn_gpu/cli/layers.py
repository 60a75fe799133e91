"""``oidn-gpu denoise --list-layers``: what a file holds and what a denoise would use."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from oidn_gpu.errors import OIDNGPUError
from oidn_gpu.image import aovs, io
from oidn_gpu.image import motion as motion_passes
from oidn_gpu.temporal.frames import find_depth


def list_layers(files: Sequence[Path], args: argparse.Namespace) -> int:
    """``oidn-gpu denoise --list-layers``: each file's parts and layers, and the layers a
    denoise would use; returns the exit code (1 when a file cannot be read)."""

    status = 0
    for path in files:
        try:
            img_layers = io.list_layers(path)
            parts = io.describe_parts(path)
        except OIDNGPUError as err:
            print(f"error: {err}", file=sys.stderr)
            status = 1
            continue
        for line in _describe_file(path, parts):
            print(line)
        for layer in img_layers:
            part = f" [part {layer.subimage}]" if layer.subimage else ""
            formats = parts[layer.subimage].formats
            channels = _with_formats(layer.components, [formats[c] for c in layer.channels])
            print(f"  {io.layer_label(layer)}: {channels}{part}")
        picks = [
            ("color", args.color_layer, io.COLOR_LAYER_NAMES),
            ("albedo", args.albedo_layer, io.ALBEDO_LAYER_NAMES),
            ("normal", args.normal_layer, io.NORMAL_LAYER_NAMES),
        ]
        found: dict[str, bool] = {}  # whether each aux pass is there
        for kind, named, defaults in picks:
            given = getattr(args, kind, None) if kind != "color" else None
            if given is not None and not args.lightmap:
                print(f"  -> {kind}: file '{given}' (--{kind})")
                found[kind] = True
                continue
            if named is not None:
                print(f"  -> {kind}: '{named}' (--{kind}-layer)")
                continue
            if kind != "color" and (args.no_aux or args.lightmap):
                continue
            layer = io.find_layer(img_layers, defaults)
            found[kind] = layer is not None
            print(f"  -> {kind}: " + (f"'{io.layer_label(layer)}'" if layer else "none found"))
        if found.get("normal") and found.get("albedo") is False:
            print("  (a normal is used only with an albedo: the color would be denoised alone)")
        if getattr(args, "temporal", False):
            for line in _temporal_picks(path, img_layers, args):
                print(line)
        missing = [kind for kind in ("albedo", "normal") if found.get(kind) is False]
        if missing:
            flags = " and ".join(f"--{kind}-layer NAME or --{kind} FILE" for kind in missing)
            print(f"  (name the {' and '.join(missing)} with {flags})")
    return status


def _temporal_picks(path: Path, layers: Sequence[io.Layer], args: argparse.Namespace) -> list[str]:
    """With ``--temporal``: the motion pass and its convention, and the depth pass (or
    that there is none: it is optional)."""
    try:
        found = motion_passes.find_motion_pass(
            path, args.motion_layer, convention=args.motion_convention
        )
        motion = (
            f"'{found.name}' ({found.convention.name})"
            if found is not None
            else f"none found (looked for {', '.join(aovs.MOTION_LAYER_NAMES)}; name one "
            "with --motion-layer NAME:CONVENTION)"
        )
    except OIDNGPUError as err:
        motion = f"cannot be used: {err}"
    depth = find_depth(layers)
    return [
        f"  -> motion: {motion}",
        "  -> depth: "
        + (f"'{io.layer_label(depth)}'" if depth is not None else "none found (optional)"),
    ]


def _window(window: tuple[int, int, int, int]) -> str:
    x, y, width, height = window
    return f"{width}x{height}" + (f" at ({x}, {y})" if x or y else "")


def _describe_file(path: Path, parts: Sequence[io.PartInfo]) -> list[str]:
    """``--list-layers``' header lines of one file: size, pixel types, and for each part
    of an OpenEXR file its windows, tiling and compression."""
    if not parts:
        return [f"{path}: no image"]
    file_format = parts[0].file_format
    types = list(dict.fromkeys(t for part in parts for t in part.formats.values()))
    lines = [
        f"{path}: {_window(parts[0].display)} ({file_format}), "
        f"{' and '.join(types)} channel{'s' if sum(len(p.formats) for p in parts) > 1 else ''}"
    ]
    if file_format != "openexr":
        return lines
    for index, part in enumerate(parts):
        layout = f"{part.tiles[0]}x{part.tiles[1]} tiles" if part.tiles else "scanlines"
        window = f"data window {_window(part.window)}"
        if part.window != part.display:
            window += f", display window {_window(part.display)}"
        compression = f", {part.compression} compression" if part.compression else ""
        lines.append(f"  part {index}: {window}; {layout}{compression}")
    return lines


def _with_formats(components: Sequence[str], formats: Sequence[str]) -> str:
    """``R, G, B, A (half), Z (float)``: each run of one pixel type, then that type."""
    runs: list[tuple[str, list[str]]] = []
    for component, kind in zip(components, formats, strict=True):
        if runs and runs[-1][0] == kind:
            runs[-1][1].append(component)
        else:
            runs.append((kind, [component]))
    return ", ".join(f"{', '.join(names)} ({kind})" for kind, names in runs)
