"""``oidn-gpu inspect WEIGHTS``: what a weights file holds (official or not, the
network it makes, its tensors)."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

from oidn_gpu.cli.json_output import document, write_document
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
    inspect.add_argument(
        "--json",
        action="store_true",
        help="print it as JSON on stdout (schema oidn-gpu.inspect, docs/json.md)",
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


def describe_weights(path: Path) -> dict[str, Any]:
    """What the weights file at ``path`` holds: the fields of the ``oidn-gpu.inspect``
    document (docs/json.md)."""
    blob = path.read_bytes()
    sha = hashlib.sha256(blob).hexdigest()
    official = is_official(sha)
    tensors = parse_tza(blob)
    doc: dict[str, Any] = {
        "file": str(path),
        "byte_size": len(blob),
        "sha256": sha,
        "official": f"{official}.tza" if official else None,
        "network": None,
        "unrecognised": None,
        "tensor_values": sum(int(t.size) for t in tensors.values()),
        "tensors": [
            {"name": name, "shape": list(t.shape), "dtype": str(t.dtype)}
            for name, t in tensors.items()
        ],
    }
    try:
        model = load_model(blob, name=official or path.stem)
    except OIDNGPUError as err:
        doc["unrecognised"] = str(err)
        return doc
    flops = flops_per_pixel(model)
    doc["network"] = {
        "topology": model.topology.value,
        "convolutions": len(model.convs),
        "input_channels": model.input_channels,
        "inputs": describe_inputs(official, model.input_channels),
        "output_channels": model.output_channels,
        "receptive_field_px": model.receptive_field,
        "flops_per_pixel": flops,
    }
    return doc


def format_weights(doc: dict[str, Any]) -> list[str]:
    """``oidn-gpu inspect``'s lines of a `describe_weights` document."""
    official = doc["official"]
    lines = [
        f"file:            {doc['file']} ({doc['byte_size']:,} bytes)",
        f"sha-256:         {doc['sha256']}",
        "official:        " + (f"yes, {official} (OIDN 2.5.1)" if official else "no"),
    ]
    net = doc["network"]
    if net is None:
        lines.append(f"topology:        not recognised ({doc['unrecognised']})")
    else:
        flops = net["flops_per_pixel"]
        lines += [
            f"topology:        {net['topology']} U-Net ({net['convolutions']} convolutions)",
            f"input:           {net['input_channels']} channels: {net['inputs']}",
            f"output:          {net['output_channels']} channels",
            f"receptive field: {net['receptive_field_px']} px",
            f"flops per pixel: {flops / 1e6:.2f} M ({flops * 1920 * 1080 / 1e12:.2f} TFLOP "
            "per 1920x1080 frame)",
        ]
    tensors = doc["tensors"]
    lines.append(f"tensors:         {len(tensors)} ({doc['tensor_values']:,} values)")
    width = max((len(t["name"]) for t in tensors), default=4)
    for t in tensors:
        shape = "x".join(str(d) for d in t["shape"])
        lines.append(f"  {t['name']:<{width}}  {shape:<16} {t['dtype']}")
    return lines


def cmd_inspect(args: argparse.Namespace) -> int:
    """``oidn-gpu inspect WEIGHTS`` (a .tza file or a built-in weights name)."""
    doc = describe_weights(_weights_file(args.weights))
    if args.json:
        write_document(document("oidn-gpu.inspect", doc))
    else:
        print("\n".join(format_weights(doc)))
    return EXIT_OK
