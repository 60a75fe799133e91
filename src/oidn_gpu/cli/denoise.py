"""``oidn-gpu denoise``: its flags, their checks, the one `DenoiserConfig` and
`SequenceOptions` they make, and the run (here, or on a Ray farm with ``--ray``)."""

from __future__ import annotations

import argparse
import functools
import logging
from pathlib import Path
from typing import Any

from oidn_gpu import __version__, farm
from oidn_gpu.backends.base import AUTO, check_backend, resolve_backend
from oidn_gpu.cli.backend_flags import add_backend_flags, backend_options
from oidn_gpu.cli.color_flags import add_color_flags, color_options, unused_display_note
from oidn_gpu.cli.frames import missing_report, parse_frames, select_frames
from oidn_gpu.cli.inputs import expand_inputs, plan_jobs
from oidn_gpu.cli.json_output import document, write_document
from oidn_gpu.cli.layers import list_layers
from oidn_gpu.cli.logs import progress_safe
from oidn_gpu.cli.usage import (
    EXIT_FAILURE,
    EXIT_OK,
    Interrupted,
    UsageError,
    add_verbose,
    choice,
    finite_float,
    gpu_share,
    non_negative_int,
    positive_int,
)
from oidn_gpu.config import DenoiserConfig, FilterOptions
from oidn_gpu.errors import InvalidArgumentError, OIDNGPUError, UnsupportedDeviceError
from oidn_gpu.farm.temporal import denoise_sequence_temporal
from oidn_gpu.image import aovs
from oidn_gpu.image import motion as motion_passes
from oidn_gpu.model.unet import load_model
from oidn_gpu.sequence import InputOptions, OutputOptions, SequenceOptions, run_sequence
from oidn_gpu.sequence.temporal_frames import TemporalFrames

_LOG = logging.getLogger("oidn_gpu.cli")

QUALITIES = ("fast", "balanced", "high")
PREFILTERS = ("none", "fast", "accurate")


def add_denoise_parser(sub: Any) -> None:
    """The ``denoise`` subcommand and its flags, group by group."""
    p = sub.add_parser(
        "denoise",
        help="denoise images or frame sequences",
        description=(
            "Denoise image files. INPUT may be files, globs or directories (every image "
            "in it, in natural order). Float files (EXR, PFM, HDR) are HDR by default and "
            "8-bit files (PNG, JPEG) sRGB-encoded LDR. Auxiliary images come from --albedo/"
            "--normal files or from layers of a multi-layer EXR (the names Blender, Arnold, "
            "V-Ray, Redshift, RenderMan, Karma, Octane, Mitsuba, Unreal's Movie Render Queue, "
            "LuxCore and Nuke's conventions give them are found automatically; see "
            "--list-layers). An EXR written from an EXR keeps every "
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
        "--frames",
        metavar="RANGE",
        help="only these frames of the frame patterns, globs and folders: 1001-1100, "
        "1001-1100x2 (every second), 1001,1005,1010-1012; frames no file holds are "
        "reported, and the exit status is 1 after the others are denoised",
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
    add_verbose(p)
    p.add_argument("-q", "--quiet", action="store_true", help="only errors, no progress/summary")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_input_flags(p)
    _add_filter_flags(p)
    _add_execution_flags(p)
    _add_farm_flags(p)
    _add_output_flags(p)
    add_color_flags(p)


def _add_input_flags(p: argparse.ArgumentParser) -> None:
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
        "--aovs-sum",
        metavar="LAYER,...",
        help="light-path layers of an EXR whose sum is the beauty (e.g. 'key,fill' light "
        "groups): each is denoised with the beauty's albedo and normal, then adjusted so "
        "that the denoised layers add up to the denoised beauty; with --temporal, through "
        "the beauty's history",
    )
    aux.add_argument(
        "--alpha",
        choices=("copy", "denoise"),
        default="copy",
        help="the beauty's alpha channel: copied through (default, as Intel OIDN) or "
        "fitted to the albedo's coverage, then denoised with the fast LDR weights and the albedo",
    )
    aux.add_argument(
        "--temporal",
        action="store_true",
        help="temporal mode: denoise the frames in order with the history of the frames "
        "before, reprojected by each frame's motion pass (less flicker); a depth pass "
        "(Depth, Z, depth; optional) tells disocclusions",
    )
    aux.add_argument(
        "--motion-layer",
        metavar="NAME[:CONVENTION]",
        help="layer of the motion pass for --temporal (default: the renderers' names: "
        + ", ".join(aovs.MOTION_LAYER_NAMES)
        + ") and how to read it: 'mv:pixels' (backward motion in pixels, y down), "
        f"or one of {', '.join(motion_passes.CONVENTIONS)}; a renderer's name needs none",
    )
    aux.add_argument(
        "--motion-convention",
        metavar="CONVENTION",
        help="how --temporal reads the motion pass: "
        f"{', '.join(motion_passes.CONVENTIONS)} (default: the one of the pass's name)",
    )
    aux.add_argument(
        "--list-layers",
        action="store_true",
        help="show the layers of each input and what would be used, then exit",
    )


def _add_filter_flags(p: argparse.ArgumentParser) -> None:
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
        type=choice(QUALITIES, "quality"),
        default="high",
        help="fast, balanced or high (default high)",
    )
    p.add_argument("--clean-aux", action="store_true", help="albedo and normal are noise-free")
    p.add_argument(
        "--prefilter",
        type=choice(PREFILTERS, "prefilter"),
        default="none",
        help="none (default); fast: treat the aux as clean; accurate: denoise "
        "albedo and normal first (rt_alb/rt_nrm), then color with clean aux",
    )
    p.add_argument(
        "--input-scale",
        type=finite_float,
        metavar="S",
        help="scale applied to the color (default: autoexposure for HDR)",
    )
    p.add_argument("--lightmap", action="store_true", help="RTLightmap filter (HDR lightmaps)")
    p.add_argument(
        "--directional",
        action="store_true",
        help="with --lightmap: directional lightmap coefficients in [-1, 1]",
    )


def _add_execution_flags(p: argparse.ArgumentParser) -> None:
    run = p.add_argument_group("execution")
    add_backend_flags(run)
    run.add_argument("--tile-size", type=positive_int, metavar="PX", help="tile edge in pixels")
    run.add_argument(
        "--max-memory-mb",
        type=non_negative_int,
        metavar="MB",
        help="memory budget (tiles as needed)",
    )
    run.add_argument("--weights", metavar="FILE", help="custom .tza weights")
    run.add_argument("--weights-dir", metavar="DIR", help="folder with the large weights")


def _add_farm_flags(p: argparse.ArgumentParser) -> None:
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
        "--workers", type=positive_int, metavar="N", help="with --ray: number of workers"
    )
    ray.add_argument(
        "--cpus-per-worker",
        type=positive_int,
        metavar="N",
        help="with --ray: CPUs (reference threads) of each worker without a GPU (default 1)",
    )
    ray.add_argument(
        "--gpus-per-worker",
        type=gpu_share,
        metavar="G",
        help="with --ray: GPUs of each worker of a GPU backend (default 1); a fraction such "
        "as 0.5 runs that many workers per GPU",
    )
    ray.add_argument(
        "--retries",
        type=non_negative_int,
        metavar="N",
        help=f"with --ray: try a failing frame again on other workers up to N times "
        f"(default {farm.DEFAULT_RETRIES})",
    )


def _add_output_flags(p: argparse.ArgumentParser) -> None:
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


def _check_denoise_args(args: argparse.Namespace) -> None:
    if args.directional and not args.lightmap:
        raise UsageError("--directional needs --lightmap")
    for flag, given in (("--aovs", args.aovs), ("--aovs-sum", args.aovs_sum)):
        if args.only_beauty and given:
            raise UsageError(
                f"--only-beauty writes the beauty alone; it cannot be used with {flag}"
            )
    if args.temporal and args.aovs:
        raise UsageError(
            "--temporal carries only the passes of --aovs-sum (through the beauty's history); "
            "it cannot be used with --aovs"
        )
    for flag, given in (("--aovs", args.aovs), ("--aovs-sum", args.aovs_sum)):
        motion = [name for name in _names(given) if aovs.is_motion_pass(name)]
        if motion:
            raise UsageError(
                f"{flag} {motion[0]}: '{motion[0]}' is a motion-vector pass, whose values are "
                "pixel offsets, not light: denoising it as a color would change the vectors; "
                "leave it out (an EXR output keeps it as it is)"
            )
    if args.lightmap and args.alpha == "denoise":
        raise UsageError("--alpha denoise cannot be used with --lightmap (lightmaps have no alpha)")
    _check_motion_args(args)
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


def _check_motion_args(args: argparse.Namespace) -> None:
    """``--motion-layer NAME[:CONVENTION]`` and ``--motion-convention``, checked once;
    ``args.motion_layer`` becomes the layer name and ``args.motion_convention`` the
    convention (None: the one the layer's name says).

    Raises:
        UsageError: a flag without --temporal, an unknown convention, two different ones,
            or a layer whose name says no convention with none named.
    """
    for flag, value in (
        ("--motion-layer", args.motion_layer),
        ("--motion-convention", args.motion_convention),
    ):
        if value is not None and not args.temporal:
            raise UsageError(f"{flag} names the motion pass of --temporal; add --temporal")
    try:
        given = args.motion_convention
        if given is not None:
            given = motion_passes.get_convention(given.strip()).name
        if args.motion_layer is not None:
            layer, named = motion_passes.parse_motion_layer(args.motion_layer)
            if named is not None and given is not None and named != given:
                raise UsageError(
                    f"--motion-layer {args.motion_layer} names the convention '{named}' "
                    f"but --motion-convention is '{given}'; give one"
                )
            args.motion_layer, given = layer, named or given
        motion_passes.resolve_convention(args.motion_layer, given)
    except motion_passes.MotionPassError as err:
        text = str(err).replace("(or with motion_convention)", "(or --motion-convention)")
        raise UsageError(text) from None
    args.motion_convention = given


def denoiser_config(args: argparse.Namespace) -> DenoiserConfig:
    """The one `DenoiserConfig` of the flags (hdr/srgb are set per frame), checked here.

    Backend option flags are checked against the backend that will run, also when
    ``--backend auto`` picks it.

    Raises:
        UsageError: a backend option flag the backend does not take.
    """
    filter_options = FilterOptions(
        filter_type="RTLightmap" if args.lightmap else "RT",
        quality=args.quality,
        clean_aux=args.clean_aux,
        prefilter=args.prefilter,
        directional=args.directional,
        input_scale=args.input_scale,
        weights=args.weights,
        weights_dir=args.weights_dir,
        tile_size=args.tile_size,
        max_memory_mb=args.max_memory_mb,
    )
    options = backend_options(args)
    if not options:
        return DenoiserConfig.create(filter_options, backend=args.backend)
    backend = resolve_backend(args.backend)
    try:
        return DenoiserConfig.create(filter_options, backend=backend, **options)
    except InvalidArgumentError as err:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in options)
        chosen = " (chosen by --backend auto)" if args.backend == AUTO else ""
        raise UsageError(
            f"{flags} cannot be used with the {backend} backend{chosen}: {err}"
        ) from None


def sequence_options(args: argparse.Namespace) -> SequenceOptions:
    """How the run reads, writes and reports its frames, from the flags."""
    return SequenceOptions(
        inputs=InputOptions(
            color_layer=args.color_layer,
            albedo_layer=args.albedo_layer,
            normal_layer=args.normal_layer,
            auto_aux=not args.no_aux,
            mode=args.mode,
        ),
        output=OutputOptions(
            layer_name=args.layer_name,
            only_beauty=args.only_beauty,
            aovs=_names(args.aovs),
            aovs_sum=_names(args.aovs_sum),
            alpha=args.alpha,
        ),
        skip_existing=args.skip_existing,
        show_progress=False if args.no_progress else None,
        verbose=args.verbose,
        quiet=args.quiet,
        software=f"oidn-gpu {__version__}",
        color=color_options(args),
    )


def _names(flag: str | None) -> tuple[str, ...]:
    """The layer names of a comma-separated flag."""
    return tuple(a.strip() for a in (flag or "").split(",") if a.strip())


def farm_options(args: argparse.Namespace) -> farm.FarmOptions:
    """`farm.FarmOptions` from ``--ray``, ``--workers``, ..."""
    return farm.FarmOptions(
        address=args.ray or None,
        workers=args.workers,
        cpus_per_worker=args.cpus_per_worker or 1,
        gpus_per_worker=args.gpus_per_worker or 1.0,
        retries=farm.DEFAULT_RETRIES if args.retries is None else args.retries,
    )


def _check_backend_here(args: argparse.Namespace) -> None:
    """The backend runs on this machine (else a usage error, once, before any frame); the
    backend's warning when it runs here but slowly (`Availability.warning`). A farm checks
    on its workers' nodes."""
    try:
        _, availability = check_backend(args.backend)
    except UnsupportedDeviceError as err:
        message = str(err).replace("backend='auto'", "--backend auto")
        raise UsageError(f"{message}; pass --backend NAME with one of those") from None
    if availability.warning and not args.quiet:
        _LOG.info("note: %s", availability.warning)


def _check_first_motion(temporal: TemporalFrames, jobs: Any) -> None:
    """The first frame has the motion pass: a run where none has one fails once, before
    any frame (a later frame without one fails alone)."""
    if not jobs:
        return
    try:
        temporal.check_file(jobs[0].color)
    except motion_passes.MotionPassError as err:
        raise UsageError(f"--temporal: {err}") from None
    except (OIDNGPUError, OSError):
        pass  # an unreadable first file fails in its turn, as any frame's


def _interrupted_text(finished: list[Any], total: int, counted: bool) -> str:
    """What an interrupted run says: how many frames have their outputs and how to resume."""
    resume = "run the same command with --skip-existing to denoise the rest"
    if not counted:
        return f"no partial outputs were left; {resume}"
    complete = sum(1 for result in finished if result.status in ("done", "skipped"))
    return (
        f"{complete} of {total} frame{'s' if total != 1 else ''} finished (their outputs are "
        f"complete) and no partial outputs were left; {resume}"
    )


def cmd_denoise(args: argparse.Namespace) -> int:
    """``oidn-gpu denoise``."""
    _check_denoise_args(args)
    color_options(args)  # an unknown colour space, display or view: before any file work
    config = denoiser_config(args)
    if args.ray is None and not args.list_layers:
        _check_backend_here(args)
    selection = None
    if args.frames is not None:
        selection = select_frames(args.inputs, args.frames)
        files, many = selection.files, selection.many
        asked = len(parse_frames(args.frames))
        for line in missing_report(selection, asked):  # the run then fails: said as errors
            _LOG.error("%s", line)
    else:
        files, many = expand_inputs(args.inputs)
    if args.list_layers:
        return list_layers(files, args)
    jobs = plan_jobs(args, files, many)
    options = sequence_options(args)
    note = unused_display_note(options.color, jobs)
    if note:
        _LOG.info("%s", note)
    temporal = None
    if args.temporal:
        temporal = TemporalFrames(
            motion_layer=args.motion_layer, motion_convention=args.motion_convention
        )
        _check_first_motion(temporal, jobs)
    finished: list[Any] = []  # each frame's result as it comes, for an interrupted run
    run = functools.partial(
        run_sequence, jobs, config, options, temporal=temporal, on_frame=finished.append
    )
    if args.ray is not None:
        farm.import_ray()  # says how to install Ray before any work
        run = functools.partial(
            farm.denoise_sequence,
            jobs,
            config,
            options,
            farm_options(args),
            on_frame=finished.append,
        )
        if temporal is not None:
            run = functools.partial(
                denoise_sequence_temporal,
                jobs,
                config,
                options,
                farm_options(args),
                temporal=temporal,
            )
    try:
        with progress_safe():  # log lines above the progress bar, never through it
            summary = run()
    except UnsupportedDeviceError as err:  # the up-front check (on a farm's node), no frame
        raise UsageError(f"{err}; pass --backend NAME with one of those") from None
    except KeyboardInterrupt as err:
        counted = not (args.ray is not None and temporal is not None)  # chunks, not frames
        raise Interrupted(_interrupted_text(finished, len(jobs), counted)) from err
    finally:
        if temporal is not None:
            temporal.close()
    missing = {} if selection is None else selection.missing
    _LOG.info("%s", summary.line(len(jobs)))
    for line in (summary.layers_line(), summary.temporal_line()):
        if line:
            _LOG.info("%s", line)
    if len(jobs) == 1 and summary.count("done"):
        written = [jobs[0].output, jobs[0].side_by_side]
        _LOG.info("wrote %s", " and ".join(str(p) for p in written if p))
    if args.json:
        fields = summary.as_json(len(jobs))
        if selection is not None:
            fields["missing_frames"] = {spec: list(f) for spec, f in missing.items()}
        write_document(document("oidn-gpu.denoise", fields))
    failed = summary.count("failed") + (len(jobs) - len(summary.results))
    return EXIT_FAILURE if failed or missing else EXIT_OK
