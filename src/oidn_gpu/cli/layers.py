"""``oidn-gpu denoise --list-layers``: what a file holds and what a denoise would use."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from oidn_gpu.cli.json_output import document, write_document
from oidn_gpu.errors import OIDNGPUError
from oidn_gpu.image import aovs, io
from oidn_gpu.image import motion as motion_passes
from oidn_gpu.sequence.temporal_frames import find_depth

_LOG = logging.getLogger("oidn_gpu.cli")

# How a denoise would get each input: a layer found by its renderers' names, or named
LAYER_FLAG, FILE_FLAG = "layer flag", "file flag"  # by --KIND-layer NAME or --KIND FILE


def list_layers(files: Sequence[Path], args: argparse.Namespace) -> int:
    """``oidn-gpu denoise --list-layers``: each file's parts and layers, and the layers a
    denoise would use (with ``--temporal`` its motion and depth passes too; with
    ``--json``, the ``oidn-gpu.layers`` document on stdout); returns the exit code (1 when
    a file cannot be read)."""

    status = 0
    described: list[dict[str, Any]] = []
    for path in files:
        try:
            img_layers = io.list_layers(path)
            parts = io.describe_parts(path)
        except OIDNGPUError as err:
            _LOG.error("%s", err)
            described.append({"file": str(path), "error": str(err)})
            status = 1
            continue
        picks = _picks(img_layers, args)
        temporal = (
            _temporal_picks(path, img_layers, args) if getattr(args, "temporal", False) else None
        )
        if args.json:
            described.append(_file_json(path, img_layers, parts, picks, temporal))
            continue
        for line in _describe_file(path, parts):
            print(line)
        for layer in img_layers:
            part = f" [part {layer.subimage}]" if layer.subimage else ""
            formats = parts[layer.subimage].formats
            channels = _with_formats(layer.components, [formats[c] for c in layer.channels])
            print(f"  {io.layer_label(layer)}: {channels}{part}")
        for line in _pick_lines(picks, temporal):
            print(line)
    if args.json:
        write_document(document("oidn-gpu.layers", {"files": described}))
    return status


NORMAL_ALONE = "a normal is used only with an albedo: the color would be denoised alone"


def _picks(
    img_layers: Sequence[Any], args: argparse.Namespace
) -> dict[str, tuple[str | None, str | None]]:
    """What a denoise would use per input: ``{kind: (layer label or file, how)}`` with
    ``how`` `LAYER_FLAG`, `FILE_FLAG` or None (found by the renderers' names; the label
    None: none found)."""
    picks = [
        ("color", args.color_layer, io.COLOR_LAYER_NAMES),
        ("albedo", args.albedo_layer, io.ALBEDO_LAYER_NAMES),
        ("normal", args.normal_layer, io.NORMAL_LAYER_NAMES),
    ]
    out: dict[str, tuple[str | None, str | None]] = {}
    for kind, named, defaults in picks:
        given = getattr(args, kind, None) if kind != "color" else None
        if given is not None and not args.lightmap:
            out[kind] = (str(given), FILE_FLAG)
        elif named is not None:
            out[kind] = (named, LAYER_FLAG)
        elif kind == "color" or not (args.no_aux or args.lightmap):
            layer = io.find_layer(img_layers, defaults)
            out[kind] = (io.layer_label(layer) if layer else None, None)
    return out


def _pick_lines(
    picks: dict[str, tuple[str | None, str | None]], temporal: dict[str, str] | None
) -> list[str]:
    """The text lines of what a denoise would use, and how to name what is missing."""
    lines = []
    for kind, (name, how) in picks.items():
        if how == FILE_FLAG:
            lines.append(f"  -> {kind}: file '{name}' (--{kind})")
        elif how == LAYER_FLAG:
            lines.append(f"  -> {kind}: '{name}' (--{kind}-layer)")
        else:
            lines.append(f"  -> {kind}: " + (f"'{name}'" if name is not None else "none found"))
    if _normal_alone(picks):
        lines.append(f"  ({NORMAL_ALONE})")
    if temporal is not None:
        lines.append(f"  -> motion: {temporal['motion']}")
        lines.append(f"  -> depth: {temporal['depth']}")
    missing = [k for k in ("albedo", "normal") if k in picks and picks[k] == (None, None)]
    if missing:
        flags = " and ".join(f"--{kind}-layer NAME or --{kind} FILE" for kind in missing)
        lines.append(f"  (name the {' and '.join(missing)} with {flags})")
    return lines


def _normal_alone(picks: dict[str, tuple[str | None, str | None]]) -> bool:
    found = {k: name is not None for k, (name, how) in picks.items() if how is None}
    return bool(found.get("normal")) and found.get("albedo") is False


def _temporal_picks(
    path: Path, layers: Sequence[io.Layer], args: argparse.Namespace
) -> dict[str, str]:
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
    shown = f"'{io.layer_label(depth)}'" if depth is not None else "none found (optional)"
    return {"motion": motion, "depth": shown}


def _file_json(
    path: Path,
    img_layers: Sequence[Any],
    parts: Sequence[io.PartInfo],
    picks: dict[str, tuple[str | None, str | None]],
    temporal: dict[str, str] | None,
) -> dict[str, Any]:
    """One file of the ``oidn-gpu.layers`` document (docs/json.md)."""
    return {
        "file": str(path),
        "format": parts[0].file_format if parts else None,
        "parts": [
            {
                "data_window": list(p.window),
                "display_window": list(p.display),
                "tiles": list(p.tiles) if p.tiles else None,
                "compression": p.compression or None,
                "channels": dict(p.formats),
            }
            for p in parts
        ],
        "layers": [
            {
                "name": io.layer_label(layer),
                "part": layer.subimage,
                "channels": list(layer.channels),
                "components": list(layer.components),
            }
            for layer in img_layers
        ],
        "denoise_uses": {
            kind: {
                "layer": name if how != FILE_FLAG else None,
                "file": name if how == FILE_FLAG else None,
                "named_by_flag": how is not None,
            }
            for kind, (name, how) in picks.items()
        },
        "normal_ignored": _normal_alone(picks),
        "temporal": temporal,
    }


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
