"""The ``record``, ``replay`` and ``program info`` subcommands of ``oidn-gpu``.

``oidn_gpu.cli`` adds them with `add_record_parsers` and dispatches through
`COMMANDS`; handlers take the parsed arguments and return an exit code. Only
argument parsing lives here; the work is done by `record.api`, `record.replay`
and `record.summary`. wgpu is imported only when a command needs a device.

    oidn-gpu record --weights rt_hdr_alb --size 1920x1080 --hdr -o denoise.oidnp
    oidn-gpu replay denoise.oidnp --color in.exr --albedo alb.exr -o out.exr
        (HDR programs: autoexposure of in.exr unless --input-scale is given)
    oidn-gpu program info denoise.oidnp
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu import files
from oidn_gpu.cli.json_output import document, write_document
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import io
from oidn_gpu.image.autoexposure import autoexposure
from oidn_gpu.model.weights import weights_path
from oidn_gpu.record.config import KERNELS, PRECISIONS, TRANSFERS, make_config
from oidn_gpu.record.format import ACCUMULATION_CODES, PROGRAM_VERSION, PROGRAM_VERSIONS
from oidn_gpu.record.reader import read_program
from oidn_gpu.record.summary import describe, program_hdr, summarize

_LOG = logging.getLogger("oidn_gpu.cli")

EXIT_OK = 0


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid size '{text}'; expected WxH, e.g. 1920x1080"
        ) from None
    if w < 1 or h < 1:
        raise argparse.ArgumentTypeError(f"size '{text}' must be positive")
    return w, h


def add_record_parsers(sub: Any) -> None:
    """Add ``record``, ``replay`` and ``program`` to the tool's subparsers."""
    _add_record(sub)
    _add_replay(sub)
    _add_program(sub)


def _add_record(sub: Any) -> None:
    """``oidn-gpu record``: what to record, for which device, and the program file."""
    rec = sub.add_parser(
        "record", help="record a whole denoise (or the network) as a replayable GPU program"
    )
    rec.add_argument("--weights", required=True, help="a .tza file, or a built-in weights name")
    rec.add_argument("--size", required=True, type=_size, metavar="WxH", help="image size")
    rec.add_argument("--hdr", action="store_true", help="HDR color (PU transfer by default)")
    rec.add_argument(
        "--precision", choices=PRECISIONS, default="auto", help="wgpu precision (default auto)"
    )
    rec.add_argument(
        "--kernel",
        choices=[k for k in KERNELS if k != "subgroup-matrix"],
        default="auto",
        help="convolution kernel family (default auto)",
    )
    rec.add_argument(
        "--transfer",
        choices=TRANSFERS,
        default="default",
        help="transfer function of the color (default: the mode's, PU for --hdr)",
    )
    rec.add_argument(
        "--tile-size", type=int, default=0, metavar="PX", help="maximum tile edge (0: whole image)"
    )
    rec.add_argument("--input-scale", type=float, default=1.0, help="scale of the color input")
    rec.add_argument(
        "--network", action="store_true", help="record one network execution, not a whole denoise"
    )
    rec.add_argument(
        "--baseline",
        action="store_true",
        help="record for WebGPU's guaranteed limits (plus --features), not this machine's adapter",
    )
    rec.add_argument(
        "--features", default="", help="with --baseline: comma-separated shader-f16,subgroups"
    )
    rec.add_argument(
        "--accumulation",
        choices=ACCUMULATION_CODES,
        default=None,
        help="how fp16 convolutions sum their products (default f32, the most accurate; "
        "f16-partials: oidn-web's, the fastest)",
    )
    rec.add_argument(
        "--format-version",
        type=int,
        choices=PROGRAM_VERSIONS,
        default=PROGRAM_VERSION,
        help="program file version: 3 (default, checksummed) or 2 (oidn-web's, for hosts "
        "that read only version 2)",
    )
    rec.add_argument("-o", "--output", required=True, type=Path, help="program file to write")
    rec.add_argument("--overwrite", action="store_true", help="replace an existing output")


def _add_replay(sub: Any) -> None:
    """``oidn-gpu replay``: a program run on image files."""
    rep = sub.add_parser("replay", help="run a recorded program on image files")
    rep.add_argument("program", type=Path, help="the .oidnp file (oidn-gpu record -o)")
    rep.add_argument(
        "--color", required=True, type=Path, metavar="FILE", help="the color image file"
    )
    rep.add_argument("--albedo", type=Path, metavar="FILE", help="the albedo image file")
    rep.add_argument("--normal", type=Path, metavar="FILE", help="the normal image file")
    rep.add_argument(
        "--input-scale",
        type=float,
        default=None,
        help="scale of the color (default: autoexposure for HDR programs, else the recorded scale)",
    )
    rep.add_argument("--repeat", type=int, default=1, help="replay this many times (timing)")
    rep.add_argument("-o", "--output", required=True, type=Path, help="image file to write")
    rep.add_argument("--overwrite", action="store_true", help="replace an existing output")


def _add_program(sub: Any) -> None:
    """``oidn-gpu program info``: what a program file holds."""
    prog = sub.add_parser("program", help="inspect recorded programs")
    prog_sub = prog.add_subparsers(
        dest="program_command", metavar="COMMAND", parser_class=type(prog)
    )
    prog_sub.required = True
    info = prog_sub.add_parser("info", help="what a program contains: sizes, kernels, memory")
    info.add_argument("program", type=Path, help="the .oidnp file")
    info.add_argument(
        "--json",
        action="store_true",
        help="print it as JSON on stdout (schema oidn-gpu.program-info, docs/json.md)",
    )


def _weights_bytes(text: str) -> bytes:
    path = Path(text)
    if path.suffix == ".tza" or path.exists():
        return path.read_bytes()

    return weights_path(text).read_bytes()


def cmd_record(args: argparse.Namespace) -> int:
    """``oidn-gpu record``: write a program file."""
    from oidn_gpu.record.api import record_denoise, record_network, recording_device

    width, height = args.size
    weights_file = Path(args.weights)
    inputs = [weights_file] if weights_file.exists() else []
    files.check_outputs([args.output], inputs, overwrite=args.overwrite)
    tza = _weights_bytes(args.weights)
    options: dict[str, Any] = {"precision": args.precision, "kernel": args.kernel}
    if args.baseline:
        options["features"] = [f.strip() for f in args.features.split(",") if f.strip()]
    else:
        options["device"] = recording_device()
    recording = {"accumulation": args.accumulation, "format_version": args.format_version}
    if args.network:
        data = record_network(tza, make_config(width, height, **options), **recording)
    else:
        config = make_config(
            width,
            height,
            denoise=True,
            hdr=args.hdr,
            transfer=args.transfer,
            max_tile_edge=args.tile_size,
            input_scale=args.input_scale,
            **options,
        )
        data = record_denoise(tza, config, **recording)
    files.write_bytes_atomic(args.output, data)
    _LOG.info("%s", describe(read_program(data), file_bytes=len(data)))
    return EXIT_OK


def _rgba(pixels: np.ndarray, channels: tuple[str, ...]) -> np.ndarray:
    """An image as RGBA float32 (OIDN's 1- and 2-channel broadcast; alpha 1 if absent)."""
    arr = np.asarray(pixels, np.float32)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    c = arr.shape[2]
    rgb = arr[:, :, (0, 0, 0)] if c == 1 else arr[:, :, (0, 1, 1)] if c == 2 else arr[:, :, :3]
    names = [n.split(".")[-1].upper() for n in channels]
    alpha = arr[:, :, names.index("A")] if "A" in names else np.ones(arr.shape[:2], np.float32)
    return np.ascontiguousarray(np.dstack([rgb, alpha]), np.float32)


def cmd_replay(args: argparse.Namespace) -> int:
    """``oidn-gpu replay``: run a program on image files, write the output image."""
    from oidn_gpu.record.replay import Replayer

    inputs = [p for p in (args.program, args.color, args.albedo, args.normal) if p is not None]
    files.check_outputs([args.output], inputs, overwrite=args.overwrite)
    io.output_format_name(args.output)  # an unwritable extension fails before the GPU work
    program = read_program(args.program.read_bytes())
    kind = summarize(program).kind
    has_frame = program.meta is not None and program.meta.frame_buffer is not None
    if args.input_scale is not None and not has_frame:
        raise InvalidArgumentError(
            "--input-scale needs a denoise program with a frame buffer; this program takes "
            "its input in network space (or has its scale baked in)"
        )
    paths = [p for p in (args.color, args.albedo, args.normal) if p is not None]
    images = [io.read_image(p) for p in paths]
    w, h = program.output_width, program.output_height
    for path, image in zip(paths, images, strict=True):
        if (image.width, image.height) != (w, h):
            raise InvalidArgumentError(
                f"'{path}' is {image.width}x{image.height} but the program was recorded for "
                f"{w}x{h}; record one for this size"
            )
    rgba = [_rgba(image.pixels, image.channels) for image in images]
    if kind == "denoise":
        inputs: list[np.ndarray] = rgba
    else:  # the network program's input: dense HWC, 3 channels per image
        inputs = [np.ascontiguousarray(np.dstack([x[:, :, :3] for x in rgba]))]
    if len(inputs) != len(program.inputs):
        raise InvalidArgumentError(
            f"the program takes {len(program.inputs)} image input(s) but {len(paths)} were given"
        )
    # As OIDN: an explicit scale wins, HDR color gets autoexposure (computed on the host
    # from the color image, once per image), else the program's recorded scale.
    scale = args.input_scale
    if scale is None and has_frame and program_hdr(program):
        scale = autoexposure(rgba[0][:, :, :3])
    with Replayer(program) as replayer:
        start = time.perf_counter()
        for _ in range(max(1, args.repeat)):
            out = replayer.run(inputs, input_scale=scale)
        elapsed_ms = (time.perf_counter() - start) * 1e3 / max(1, args.repeat)
    color = images[0]
    has_alpha = "A" in [n.split(".")[-1].upper() for n in color.channels]
    pixels = out if (kind == "denoise" and has_alpha) else out[:, :, :3]
    io.write_image_atomic(args.output, pixels, like=color)
    _LOG.info("%s: %dx%d replayed in %.1f ms", args.output, w, h, elapsed_ms)
    return EXIT_OK


def cmd_program(args: argparse.Namespace) -> int:
    """``oidn-gpu program info``: print what a program contains."""
    data = args.program.read_bytes()
    program = read_program(data)
    if args.json:
        body = {"file": str(args.program), "byte_size": len(data), **program_json(program)}
        write_document(document("oidn-gpu.program-info", body))
    else:
        print(describe(program, file_bytes=len(data)))
    return EXIT_OK


def program_json(program: Any) -> dict[str, Any]:
    """The fields of a program's summary (`record.summary.ProgramSummary`) as JSON values."""
    summary = dataclasses.asdict(summarize(program))
    summary["inputs"] = [{"label": label, "byte_size": size} for label, size in summary["inputs"]]
    summary["shader_names"] = dict(summary["shader_names"])
    summary["kernels"] = list(summary["kernels"])
    return summary


COMMANDS = {"record": cmd_record, "replay": cmd_replay, "program": cmd_program}

__all__ = ["COMMANDS", "add_record_parsers", "cmd_program", "cmd_record", "cmd_replay"]
