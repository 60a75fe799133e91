"""The ``oidn-gpu`` command-line tool: parse, call the library, print. No GPU code here.

Subcommands:
    denoise   denoise image files, multi-layer EXRs and frame sequences
    inspect   describe a .tza weights file
    info      version, optional modules, backends and adapters, what 'auto' picks
    weights   ``weights fetch`` downloads the three large official weights files
    example   print the path of the bundled example render (or copy it)
    bench     benchmark the wgpu backend (default) or ``--backend reference`` (cli/bench.py)
    record    record one whole GPU denoise (or the network) as a replayable program
    replay    run a recorded program on this machine's GPU
    program   ``program info``: what a recorded program contains (these three: cli/record.py)

The ``--backend`` choices and the per-backend execution flags (``--precision``,
``--kernel``, ``--gemm``) come from the backend registry (`backends.base`): each
backend's ``Options`` says which of its options are flags, their choices and help.

Exit codes: 0 all done, 1 failure (some frames failed, a download failed, ...),
2 bad usage (unknown flag, bad value, missing input, an output that cannot be
written or that is an input), 130 interrupted (Ctrl-C or SIGTERM; no partial
outputs or temporary files are left). Errors print ``error: <message>`` on stderr; a traceback
only with ``--verbose``.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import glob
import hashlib
import math
import os
import re
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from oidn_gpu import __version__, farm
from oidn_gpu.backends.base import (
    AUTO,
    backend_names,
    check_backend,
    get_backend,
    make_options,
    resolve_backend,
)
from oidn_gpu.cli import bench as bench_cli
from oidn_gpu.cli.layers import list_layers
from oidn_gpu.cli import record as record_cli
from oidn_gpu.cli.info import collect, format_report
from oidn_gpu.errors import InvalidArgumentError, OIDNGPUError, UnsupportedDeviceError
from oidn_gpu.fetch import base_url, fetch_weights
from oidn_gpu.files import (
    OutputFileError,
    check_outputs,
    install_signal_cleanup,
    write_bytes_atomic,
)
from oidn_gpu.image.io import output_format_name
from oidn_gpu.model.tza import parse_tza
from oidn_gpu.model.unet import flops_per_pixel, load_model
from oidn_gpu.model.weights import is_official
from oidn_gpu.sequence import (
    AuxSource,
    FrameJob,
    InputOptions,
    OutputOptions,
    expand_frame_patterns,
    frame_pattern_files,
    has_frame_pattern,
    run_sequence,
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell convention

QUALITIES = ("fast", "balanced", "high")
PREFILTERS = ("none", "fast", "accurate")
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
EXAMPLE_NAME = "textured_checker.exr"
_VERBOSE_HELP = "details and tracebacks"
_GLOB_CHARS = re.compile(r"[*?\[]")
_TRAILING_DIGITS = re.compile(r"(\d+)$")


class UsageError(Exception):
    """Bad command-line usage: printed as ``error: <message>``, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises `UsageError` instead of printing usage and exiting."""

    argv: Sequence[str] = ()

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        self.argv = list(sys.argv[1:] if args is None else args)
        return super().parse_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        prog = self.prog
        if message.startswith("unrecognized arguments: "):
            # A misspelt flag: the closest flag of the subcommand given (difflib).
            command = _subcommand(self, self.argv)
            prog = command.prog
            known = [o for a in command._actions for o in a.option_strings if o[:2] == "--"]
            for token in message.split(": ", 1)[1].split():
                name = token.split("=", 1)[0]
                close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
                if name.startswith("--") and close:
                    message += f" (did you mean {close[0]}?)"
                    break
        raise UsageError(f"{message} (see '{prog} --help')")


def _subcommand(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The (sub)command parser that ``argv`` names (``denoise``, ``weights fetch``, ...)."""
    for token in argv:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subparsers and token in subparsers[0].choices:
            parser = subparsers[0].choices[token]
    return parser


# --- parser --------------------------------------------------------------------------------


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer '{text}'") from None


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _gpu_share(text: str) -> float:
    """A worker's GPUs as Ray takes them: a fraction in (0, 1] or a whole number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not (0 < value <= 1 or (value > 1 and value.is_integer())):
        raise argparse.ArgumentTypeError(
            f"{text} must be a fraction in (0, 1] or a whole number of GPUs"
        )
    return value


def _non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must not be negative")
    return value


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number '{text}'") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number >= 0")
    return value


def _choice(choices: Sequence[str], what: str):
    def parse(text: str) -> str:
        if text not in choices:
            expected = ", ".join(f"'{c}'" for c in choices[:-1]) + f" or '{choices[-1]}'"
            raise argparse.ArgumentTypeError(f"unknown {what} '{text}'; expected {expected}")
        return text

    return parse


@dataclass(frozen=True)
class BackendFlag:
    """One ``--NAME`` flag for backend options of that name (several backends may share it)."""

    name: str
    backends: tuple[str, ...]
    choices: tuple[str, ...] | None
    help: str
    metavar: str | None = None

    def parse(self, text: str) -> Any:
        if self.choices is not None:
            return _choice(self.choices, self.name)(text)
        for backend in self.backends:
            options = get_backend(backend).Options
            parse_option = getattr(options, "parse_cli_option", None)
            if parse_option is not None:
                try:
                    return parse_option(self.name, text)
                except InvalidArgumentError as err:
                    raise argparse.ArgumentTypeError(str(err)) from None
        return text


def backend_flags() -> dict[str, BackendFlag]:
    """The backend option flags, from every registered backend's ``Options``."""
    merged: dict[str, tuple[list[str], list[str] | None, list[str]]] = {}
    metavars: dict[str, str | None] = {}
    for name in backend_names():
        options = get_backend(name).Options
        for option, text in options.option_help.items():
            metavars.setdefault(option, options.option_metavars.get(option))
            backends, choices, helps = merged.setdefault(option, ([], [], []))
            backends.append(name)
            allowed = options.option_choices.get(option)
            if allowed is None or choices is None:
                merged[option] = (backends, None, helps)
            else:
                choices.extend(c for c in allowed if c not in choices)
            helps.append(text)
    return {
        option: BackendFlag(
            option, tuple(backends), tuple(choices) if choices is not None else None,
            "; ".join(helps),
            metavars[option],
        )
        for option, (backends, choices, helps) in merged.items()
    }


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (exposed for docs and tests)."""

    parser = _Parser(prog="oidn-gpu", description="Intel Open Image Denoise networks on any GPU.")
    parser.add_argument("--version", action="version", version=f"oidn-gpu {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help=_VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_denoise(sub)

    inspect = sub.add_parser("inspect", help="describe a .tza weights file")
    inspect.add_argument("weights", metavar="WEIGHTS.tza", help="the weights file to describe")
    inspect.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE_HELP
    )

    info = sub.add_parser("info", help="version, backends and adapters, what 'auto' picks")
    info.add_argument("--no-probe", action="store_true", help="do not create a Denoiser")
    info.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE_HELP
    )

    weights = sub.add_parser("weights", help="manage weights files")
    weights_sub = weights.add_subparsers(
        dest="weights_command", metavar="ACTION", parser_class=_Parser
    )
    fetch = weights_sub.add_parser(
        "fetch",
        help="download the three large official weights files (about 23 MB) into a weights "
        "folder; the package bundles them too, so this is needed only for a folder of your "
        "own (searched first)",
    )
    fetch.add_argument("--dir", type=Path, help="destination (default: the user weights folder)")
    fetch.add_argument(
        "--url",
        help="base URL to download from (default: $OIDN_GPU_WEIGHTS_URL "
        "or the official oidn-weights repository)",
    )
    fetch.add_argument("--force", action="store_true", help="download even if present")
    fetch.add_argument(
        "--timeout",
        type=_finite_float,
        default=30.0,
        help="seconds to connect and for each read (default 30)",
    )
    fetch.add_argument(
        "--deadline",
        type=_finite_float,
        metavar="SECONDS",
        help="most seconds for each whole file (default 20 x --timeout, so 600)",
    )
    fetch.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    fetch.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE_HELP
    )

    example = sub.add_parser("example", help="print the path of the bundled example render")
    example.add_argument("--copy", type=Path, metavar="DIR", help="copy it into DIR instead")

    record_cli.add_record_parsers(sub)
    bench = sub.add_parser(
        "bench",
        help=f"benchmark a backend: [--backend {'|'.join(bench_cli.BENCHMARKS)}] --size "
        "1080p ... (default wgpu; 'bench --backend NAME --help' for its flags)",
    )
    bench.add_argument(
        "bench_args", nargs=argparse.REMAINDER, help="the benchmark's flags (see bench --help)"
    )
    return parser


def _add_denoise(sub: Any) -> None:
    p = sub.add_parser(
        "denoise",
        help="denoise images or frame sequences",
        description=(
            "Denoise image files. INPUT may be files, globs or directories (every image "
            "in it, in natural order). Float files (EXR, PFM, HDR) are HDR by default and "
            "8-bit files (PNG, JPEG) sRGB-encoded LDR. Auxiliary images come from --albedo/"
            "--normal files or from layers of a multi-layer EXR (the names Blender, Arnold, "
            "V-Ray, Redshift, RenderMan, Karma, Octane and Mitsuba give them are found "
            "automatically; see --list-layers). An EXR written from an EXR keeps every "
            "layer, channel and header field of the input; the denoised beauty replaces "
            "the noisy one (see --layer-name, --only-beauty, --aovs)."
        ),
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="image files, globs ('sh010.*.exr') or folders (every image in them)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="OUTPUT",
        help="output file, or a folder for several inputs; may be a template with {stem} "
        "{name} {ext} (the extension without its dot) {frame} {dir}, and a frame number "
        "as #### (one # per digit), %%04d or $F4. The output folder must exist (see --mkdir)",
    )
    p.add_argument(
        "--mkdir",
        action="store_true",
        help="create missing output folders (for -o, a folder -o and --side-by-side)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print a JSON summary on stdout: counts, and each frame's layers, time and output",
    )
    p.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE_HELP
    )
    p.add_argument("-q", "--quiet", action="store_true", help="only errors, no progress/summary")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    aux = p.add_argument_group("inputs and layers")
    aux.add_argument(
        "--albedo",
        metavar="FILE",
        help="albedo file (a directory or {stem}/{frame} template for sequences)",
    )
    aux.add_argument(
        "--normal",
        metavar="FILE",
        help="normal file (a directory or {stem}/{frame} template for sequences)",
    )
    aux.add_argument(
        "--color-layer", metavar="NAME", help="layer (or comma-separated channels) of the beauty"
    )
    aux.add_argument("--albedo-layer", metavar="NAME", help="layer or channels of the albedo")
    aux.add_argument("--normal-layer", metavar="NAME", help="layer or channels of the normal")
    aux.add_argument(
        "--no-aux", action="store_true", help="do not look for albedo/normal layers automatically"
    )
    aux.add_argument(
        "--aovs",
        metavar="LAYER,...",
        help="also denoise these layers of an EXR (e.g. 'DiffDir,GlossDir') into the output; "
        "each uses the beauty's albedo and normal, shadow passes the color alone",
    )
    aux.add_argument(
        "--temporal",
        action="store_true",
        help="temporal mode: denoise the frames in order with the history of the frames "
        "before, reprojected by each frame's motion pass (less flicker); a depth pass "
        "(Depth, Z) tells disocclusions",
    )
    aux.add_argument(
        "--motion-layer",
        metavar="NAME",
        help="layer of the motion pass for --temporal (default: the renderers' names, "
        "docs/aovs.md)",
    )
    aux.add_argument(
        "--list-layers",
        action="store_true",
        help="show the layers of each input and what would be used, then exit",
    )

    mode = p.add_argument_group("filter").add_mutually_exclusive_group()
    mode.add_argument(
        "--hdr",
        dest="mode",
        action="store_const",
        const="hdr",
        help="color is linear HDR (default for float files)",
    )
    mode.add_argument(
        "--ldr",
        dest="mode",
        action="store_const",
        const="ldr",
        help="color is linear LDR in [0, 1]",
    )
    mode.add_argument(
        "--srgb",
        dest="mode",
        action="store_const",
        const="srgb",
        help="color is sRGB-encoded LDR (default for 8-bit files)",
    )
    p.set_defaults(mode="auto")
    p.add_argument(
        "--quality",
        type=_choice(QUALITIES, "quality"),
        default="high",
        help="fast, balanced or high (default high)",
    )
    p.add_argument("--clean-aux", action="store_true", help="albedo and normal are noise-free")
    p.add_argument(
        "--prefilter",
        type=_choice(PREFILTERS, "prefilter"),
        default="none",
        help="none (default); fast: treat the aux as clean; accurate: denoise "
        "albedo and normal first (rt_alb/rt_nrm), then color with clean aux",
    )
    p.add_argument(
        "--input-scale",
        type=_finite_float,
        metavar="S",
        help="scale applied to the color (default: autoexposure for HDR)",
    )
    p.add_argument("--lightmap", action="store_true", help="RTLightmap filter (HDR lightmaps)")
    p.add_argument(
        "--directional",
        action="store_true",
        help="with --lightmap: directional lightmap coefficients in [-1, 1]",
    )

    run = p.add_argument_group("execution")
    backends = (AUTO, *backend_names())
    run.add_argument(
        "--backend",
        type=_choice(backends, "backend"),
        default=AUTO,
        help=", ".join(backends[:-1]) + f" or {backends[-1]} (default {AUTO})",
    )
    for flag in backend_flags().values():
        run.add_argument(
            f"--{flag.name.replace('_', '-')}",
            dest=flag.name,
            type=flag.parse,
            default=None,
            metavar=flag.metavar,
            help=flag.help,
        )
    run.add_argument("--tile-size", type=_positive_int, metavar="PX", help="tile edge in pixels")
    run.add_argument(
        "--max-memory-mb",
        type=_non_negative_int,
        metavar="MB",
        help="memory budget (tiles as needed)",
    )
    run.add_argument("--weights", metavar="FILE", help="custom .tza weights")
    run.add_argument("--weights-dir", metavar="DIR", help="folder with the large weights")

    ray = p.add_argument_group("render farm (Ray)")
    ray.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run on a Ray cluster: one worker per GPU (or per CPU for the reference "
        "backend); ADDRESS of the cluster, or none for RAY_ADDRESS, a cluster started on "
        "this machine or a new local one (write --ray=ADDRESS before the inputs); paths "
        "must be on storage every node sees",
    )
    ray.add_argument(
        "--workers", type=_positive_int, metavar="N", help="with --ray: number of workers"
    )
    ray.add_argument(
        "--cpus-per-worker",
        type=_positive_int,
        metavar="N",
        help="with --ray: CPUs (reference threads) of each worker without a GPU (default 1)",
    )
    ray.add_argument(
        "--gpus-per-worker",
        type=_gpu_share,
        metavar="G",
        help="with --ray: GPUs of each worker of a GPU backend (default 1); a fraction such "
        "as 0.5 runs that many workers per GPU",
    )
    ray.add_argument(
        "--retries",
        type=_non_negative_int,
        metavar="N",
        help=f"with --ray: try a failing frame again on other workers up to N times "
        f"(default {farm.DEFAULT_RETRIES})",
    )

    out = p.add_argument_group("output").add_mutually_exclusive_group()
    out.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    out.add_argument(
        "--skip-existing",
        action="store_true",
        help="leave frames whose output and preview are complete alone",
    )
    layers = p.add_argument_group("EXR output layers").add_mutually_exclusive_group()
    layers.add_argument(
        "--layer-name",
        metavar="NAME",
        help="write the denoised beauty as a new layer NAME beside the noisy one "
        "(ViewLayer.Combined -> ViewLayer.NAME) instead of replacing it",
    )
    layers.add_argument(
        "--only-beauty",
        action="store_true",
        help="write the denoised beauty (and its alpha) alone, not the other layers",
    )
    p.add_argument(
        "--side-by-side",
        metavar="PNG",
        help="also write a noisy | denoised preview PNG (a directory or template "
        "for several inputs)",
    )


# --- denoise: inputs and outputs -----------------------------------------------------------


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
    if args.aovs or args.layer_name is not None:
        flag = "--aovs" if args.aovs else "--layer-name"
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


def _check_denoise_args(args: argparse.Namespace) -> None:
    if args.directional and not args.lightmap:
        raise UsageError("--directional needs --lightmap")
    if args.only_beauty and args.aovs:
        raise UsageError("--only-beauty writes the beauty alone; it cannot be used with --aovs")
    if args.temporal and args.aovs:
        raise UsageError("--temporal denoises the beauty; it cannot be used with --aovs")
    if args.motion_layer is not None and not args.temporal:
        raise UsageError("--motion-layer names the motion pass of --temporal; add --temporal")
    if args.layer_name is not None and not args.layer_name.strip():
        raise UsageError("--layer-name is empty; expected a name such as 'Denoised'")
    if args.lightmap:
        conflicting = [
            flag
            for flag, on in (
                ("--albedo", args.albedo),
                ("--normal", args.normal),
                ("--albedo-layer", args.albedo_layer),
                ("--normal-layer", args.normal_layer),
                ("--clean-aux", args.clean_aux),
                ("--prefilter", args.prefilter != "none"),
                (f"--{args.mode}", args.mode != "auto"),
            )
            if on
        ]
        if conflicting:
            raise UsageError(
                f"{conflicting[0]} cannot be used with --lightmap (lightmaps take only a color "
                "image; HDR is implied unless --directional)"
            )
    if args.weights and not Path(args.weights).is_file():
        raise UsageError(f"weights file '{args.weights}' does not exist")
    if args.weights:
        try:
            load_model(args.weights)
        except (OIDNGPUError, OSError) as err:
            raise UsageError(f"weights file '{args.weights}' cannot be used: {err}") from None
    if args.weights_dir and not Path(args.weights_dir).is_dir():
        raise UsageError(f"weights folder '{args.weights_dir}' does not exist")
    if not args.list_layers and not args.output:
        raise UsageError("no output given; pass -o OUTPUT (a file, or a directory for sequences)")
    if args.ray is None:
        farm_options = [
            flag
            for flag, value in (
                ("--workers", args.workers),
                ("--cpus-per-worker", args.cpus_per_worker),
                ("--gpus-per-worker", args.gpus_per_worker),
                ("--retries", args.retries),
            )
            if value is not None
        ]
        if farm_options:
            raise UsageError(f"{farm_options[0]} needs --ray")
    options = backend_options(args)
    if options:
        # Checked against the backend that will run, also when 'auto' picks it.
        backend = resolve_backend(args.backend)
        try:
            make_options(backend, **options)
        except InvalidArgumentError as err:
            flags = ", ".join(f"--{name.replace('_', '-')}" for name in options)
            chosen = " (chosen by --backend auto)" if args.backend == AUTO else ""
            raise UsageError(
                f"{flags} cannot be used with the {backend} backend{chosen}: {err}"
            ) from None
    if args.ray is None and not args.list_layers:
        _check_backend_here(args)


def _check_backend_here(args: argparse.Namespace) -> None:
    """The backend runs on this machine (else a usage error, once, before any frame); a
    note when wgpu runs on a CPU Vulkan driver. A farm checks on its workers' nodes."""
    try:
        backend, availability = check_backend(args.backend)
    except UnsupportedDeviceError as err:
        message = str(err).replace("backend='auto'", "--backend auto")
        raise UsageError(f"{message}; pass --backend NAME with one of those") from None
    if backend == "wgpu" and not availability.auto and not args.quiet:
        print(
            "note: the wgpu backend finds no GPU here and runs on a CPU Vulkan driver (such "
            "as lavapipe): expect seconds per small frame; --backend reference is faster on "
            "a CPU",
            file=sys.stderr,
        )


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """The backend option flags given on the command line (name -> value)."""
    return {
        name: getattr(args, name)
        for name in backend_flags()
        if getattr(args, name, None) is not None
    }


def denoiser_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword options for `oidn_gpu.Denoiser` from the parsed flags (hdr/srgb set per frame)."""
    kwargs: dict[str, Any] = {
        "filter_type": "RTLightmap" if args.lightmap else "RT",
        "quality": args.quality,
        "backend": args.backend,
    }
    if args.lightmap:
        kwargs["directional"] = args.directional
    else:
        kwargs["clean_aux"] = args.clean_aux
        kwargs["prefilter"] = args.prefilter
    optional = {
        "input_scale": args.input_scale,
        "weights": args.weights,
        "weights_dir": args.weights_dir,
        "tile_size": args.tile_size,
        "max_memory_mb": args.max_memory_mb,
    }
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    kwargs.update(backend_options(args))
    return kwargs


def farm_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword options of `farm.denoise_sequence` from ``--ray``, ``--workers``, ..."""
    return {
        "address": args.ray or None,
        "workers": args.workers,
        "cpus_per_worker": args.cpus_per_worker or 1,
        "gpus_per_worker": args.gpus_per_worker or 1.0,
        "retries": farm.DEFAULT_RETRIES if args.retries is None else args.retries,
    }


def cmd_denoise(args: argparse.Namespace) -> int:
    """``oidn-gpu denoise``."""

    _check_denoise_args(args)
    files, many = expand_inputs(args.inputs)
    if args.list_layers:
        return list_layers(files, args)
    jobs = plan_jobs(args, files, many)


    options = InputOptions(
        color_layer=args.color_layer,
        albedo_layer=args.albedo_layer,
        normal_layer=args.normal_layer,
        auto_aux=not args.no_aux,
        mode=args.mode,
    )
    output = OutputOptions(
        layer_name=args.layer_name,
        only_beauty=args.only_beauty,
        aovs=tuple(a.strip() for a in (args.aovs or "").split(",") if a.strip()),
    )
    run = run_sequence
    temporal = None
    if args.temporal:
        from oidn_gpu.temporal.frames import TemporalFrames

        temporal = TemporalFrames(motion_layer=args.motion_layer)
        run = functools.partial(run_sequence, temporal=temporal)
    if args.ray is not None:
        farm.import_ray()  # says how to install Ray before any work
        run = functools.partial(farm.denoise_sequence, **farm_kwargs(args))
        if temporal is not None:
            from oidn_gpu.farm.temporal import denoise_sequence_temporal

            run = functools.partial(
                denoise_sequence_temporal, temporal=temporal, **farm_kwargs(args)
            )
    try:
        summary = run(
            jobs,
            denoiser_kwargs(args),
            options,
            lightmap=args.lightmap,
            skip_existing=args.skip_existing,
            show_progress=False if args.no_progress else None,
            verbose=args.verbose,
            quiet=args.quiet,
            software=f"oidn-gpu {__version__}",
            output=output,
        )
    except UnsupportedDeviceError as err:  # the up-front check (on a farm's node), no frame
        raise UsageError(f"{err}; pass --backend NAME with one of those") from None
    finally:
        if temporal is not None:
            temporal.close()
    if not args.quiet:
        print(summary.line(len(jobs)), file=sys.stderr)
        layers = summary.layers_line()
        if layers:
            print(layers, file=sys.stderr)
        if len(jobs) == 1 and summary.count("done"):
            written = [jobs[0].output, jobs[0].side_by_side]
            print("wrote " + " and ".join(str(p) for p in written if p), file=sys.stderr)
    if args.json:
        import json

        print(json.dumps(summary.as_json(len(jobs)), indent=2))
    failed = summary.count("failed") + (len(jobs) - len(summary.results))
    return EXIT_FAILURE if failed else EXIT_OK


# --- inspect, info, weights, example, bench ------------------------------------------------

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


def cmd_inspect(args: argparse.Namespace) -> int:
    """``oidn-gpu inspect WEIGHTS.tza``."""

    path = Path(args.weights)
    if not path.is_file():
        raise UsageError(f"weights file '{path}' does not exist")
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


def cmd_info(args: argparse.Namespace) -> int:
    """``oidn-gpu info``."""

    print(format_report(collect(probe_auto=not args.no_probe)))
    return EXIT_OK


def cmd_weights(args: argparse.Namespace) -> int:
    """``oidn-gpu weights fetch``."""
    if args.weights_command != "fetch":
        raise UsageError("missing action; expected 'oidn-gpu weights fetch'")

    bars: list[Any] = []

    def progress_factory(name: str) -> Any:
        if args.quiet:
            return None
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        bar = tqdm(desc=f"{name}.tza", unit="B", unit_scale=True, file=sys.stderr, disable=None)
        bars.append(bar)

        def report(done: int, total: int | None) -> None:
            if total is not None:
                bar.total = total
            bar.update(done - bar.n)

        return report

    if not args.quiet:
        print(f"downloading from {base_url(args.url)}", file=sys.stderr)
    try:
        results = fetch_weights(
            directory=args.dir,
            url=args.url,
            force=args.force,
            timeout_s=args.timeout,
            deadline_s=args.deadline,
            progress_factory=progress_factory,
        )
    finally:
        for bar in bars:
            bar.close()
    if not args.quiet:
        for r in results:
            verb = "downloaded" if r.status == "downloaded" else "already present"
            print(f"{r.path}: {verb}, {r.byte_size:,} bytes, sha-256 verified", file=sys.stderr)
    return EXIT_OK


def example_path() -> Path:
    """The bundled example render (a 256x256 multi-layer EXR: beauty, albedo, nn)."""
    return Path(str(resources.files("oidn_gpu").joinpath("data", "example", EXAMPLE_NAME)))


def cmd_example(args: argparse.Namespace) -> int:
    """``oidn-gpu example``: print (or copy) the bundled example render."""
    path = example_path()
    if args.copy is not None:
        path = write_bytes_atomic(args.copy / EXAMPLE_NAME, path.read_bytes())
    print(path)
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    """``oidn-gpu bench``: see `oidn_gpu.cli.bench.main`."""
    return bench_cli.main(list(args.bench_args))


COMMANDS = {
    "denoise": cmd_denoise,
    "inspect": cmd_inspect,
    "info": cmd_info,
    "weights": cmd_weights,
    "example": cmd_example,
    "bench": cmd_bench,
}
COMMANDS.update(record_cli.COMMANDS)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the tool; returns the exit code (see the module doc)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "-v" in argv or "--verbose" in argv
    try:
        parser = build_parser()
        if argv[:1] == ["bench"]:
            # The benchmark parses its own flags (different per backend).
            return cmd_bench(argparse.Namespace(bench_args=argv[1:]))
        try:
            args = parser.parse_args(argv)
        except SystemExit as exit_:  # --help and --version
            return int(exit_.code or 0)
        verbose = bool(getattr(args, "verbose", False))
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        with install_signal_cleanup():  # SIGTERM: no temporary file left, exit 130
            return COMMANDS[args.command](args)
    except UsageError as err:
        return _fail(err, EXIT_USAGE, argv)
    except OutputFileError as err:  # an output refused or unwritable before any work
        if verbose:
            traceback.print_exc()
        return _fail(err, EXIT_USAGE, argv)
    except KeyboardInterrupt:
        print("error: interrupted; no partial outputs were left", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout was closed early (``| head``): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILURE
    except (OIDNGPUError, OSError, ValueError, RuntimeError) as err:
        if verbose:
            traceback.print_exc()
        return _fail(err, EXIT_FAILURE, argv)
    except Exception as err:
        if verbose:
            traceback.print_exc()
        print(
            f"error: internal error: {type(err).__name__}: {err} (run with --verbose for "
            "the traceback)",
            file=sys.stderr,
        )
        return EXIT_FAILURE


def _fail(err: BaseException, code: int, argv: Sequence[str]) -> int:
    """Print ``error: ...`` on stderr and, for ``denoise --json``, the same as JSON on
    stdout (``{"error": ..., "exit_code": ...}``), so a script reading stdout sees it."""
    print(f"error: {err}", file=sys.stderr)
    if "denoise" in argv and "--json" in argv:
        import json

        print(json.dumps({"error": str(err), "exit_code": code}, indent=2))
    return code
