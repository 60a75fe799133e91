"""``oidn-gpu inspect WEIGHTS``: what a weights file holds (official or not, the
network it makes, its tensors)."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

from oidn_gpu.cli.usage import EXIT_OK, UsageError, add_verbose
from oidn_gpu.errors import OIDNGPUError, one_of
from oidn_gpu.model.tza import parse_tza
from oidn_gpu.model.unet import flops_per_pixel, load_model
from oidn_gpu.model.weights import is_official, official_sha256, weights_path


def add_inspect_parser(sub: Any) -> None:
    inspect = sub.add_parser("inspect", help="describe a .tza weights file")
    inspect.add_argument(
        "weights",
        metavar="WEIGHTS",
        help="the weights to describe: a .tza file, or a built-in name such as rt_hdr_alb_nrm "
        "(as 'oidn-gpu bench --weights' takes)",
    )
    add_verbose(inspect)


_INPUT_MEANING = {
    3: "color (or a lone albedo or normal)",
    6: "color + albedo",
    9: "color + albedo + normal",
}


def describe_inputs(name: str | None, channels: int) -> str:
    """What the network's input channels mean, from the official name when known."""
    if name:
        if name.startswith("rtlightmap"):
            return "HDR lightmap (3)" if "hdr" in name else "directional lightmap coefficients (3)"
        if name.startswith("rt_alb"):
            return "albedo (3), prefiltering"
        if name.startswith("rt_nrm"):
            return "normal (3), prefiltering"
        parts = name.split("_")
        rng = "HDR" if "hdr" in parts else "LDR"
        words = [f"{rng} color (3)"]
        if "alb" in parts:
            words.append("albedo (3)")
        if "calb" in parts:
            words.append("clean albedo (3)")
        if "nrm" in parts:
            words.append("normal (3)")
        if "cnrm" in parts:
            words.append("clean normal (3)")
        return " + ".join(words)
    return _INPUT_MEANING.get(channels, f"{channels} channels")


def _weights_file(given: str) -> Path:
    """The file of ``given``: a path, else a built-in weights name (`weights_path`)."""
    path = Path(given)
    if path.is_file():
        return path
    if path.suffix != ".tza" and path.name == given:  # a plain name such as rt_hdr_alb_nrm
        try:
            return weights_path(given)
        except OIDNGPUError as err:
            raise UsageError(
                f"'{given}' is neither a file nor built-in weights ({err}); the built-in "
                f"names are {one_of(official_sha256())}"
            ) from None
    raise UsageError(f"weights file '{path}' does not exist")


def cmd_inspect(args: argparse.Namespace) -> int:
    """``oidn-gpu inspect WEIGHTS`` (a .tza file or a built-in weights name)."""

    path = _weights_file(args.weights)
    blob = path.read_bytes()
    sha = hashlib.sha256(blob).hexdigest()
    official = is_official(sha)
    tensors = parse_tza(blob)
    print(f"file:            {path} ({len(blob):,} bytes)")
    print(f"sha-256:         {sha}")
    print("official:        " + (f"yes, {official}.tza (OIDN 2.5.1)" if official else "no"))
    try:

        model = load_model(blob, name=official or path.stem)
    except OIDNGPUError as err:
        print(f"topology:        not recognised ({err})")
        model = None
    if model is not None:
        flops = flops_per_pixel(model)
        print(f"topology:        {model.topology.value} U-Net ({len(model.convs)} convolutions)")
        print(
            f"input:           {model.input_channels} channels: "
            f"{describe_inputs(official, model.input_channels)}"
        )
        print(f"output:          {model.output_channels} channels")
        print(f"receptive field: {model.receptive_field} px")
        print(
            f"flops per pixel: {flops / 1e6:.2f} M ({flops * 1920 * 1080 / 1e12:.2f} TFLOP "
            "per 1920x1080 frame)"
        )
    total = sum(int(t.size) for t in tensors.values())
    print(f"tensors:         {len(tensors)} ({total:,} values)")
    width = max((len(n) for n in tensors), default=4)
    for name, tensor in tensors.items():
        shape = "x".join(str(d) for d in tensor.shape)
        print(f"  {name:<{width}}  {shape:<16} {tensor.dtype}")
    return EXIT_OK

