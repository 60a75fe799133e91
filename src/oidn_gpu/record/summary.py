"""What a program contains, for ``oidn-gpu program info`` and for tests.

Pure: works on a `Program` value, needs no GPU.
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from dataclasses import dataclass

from oidn_gpu.record.format import Copy, Dispatch, Program, Submit, Write, kernel_names

_FIRST_LINE_NAME = re.compile(r"^//\s*\S+\s+([A-Za-z0-9_.-]+)")
_INPUT_PASS_HDR = re.compile(r"^//\s*\S+\s+input-pass\[[^\]\n]*\bhdr=([01])\b")


@dataclass(frozen=True)
class ProgramSummary:
    """Counts and sizes of a program."""

    kind: str  # "denoise" or "network"
    output_width: int
    output_height: int
    output_channels: int
    output_external: bool
    inputs: tuple[tuple[str, int], ...]  # (label, bytes)
    buffer_count: int
    buffer_bytes: int
    initial_data_bytes: int
    weight_bytes: int
    shader_count: int
    shader_names: tuple[tuple[str, int], ...]  # (kernel family, count)
    pipeline_count: int
    bind_group_count: int
    submit_count: int
    dispatch_count: int
    copy_count: int
    write_count: int
    precision: str | None
    tiles: int | None
    kernels: tuple[str, ...]
    frame_buffer: int | None
    accumulation: str | None  # how the convolutions sum (`MetaAccumulation.describe`)


def shader_name(code: str) -> str:
    """The kernel family named by a generated shader's first-line comment (or "unnamed")."""
    first = code.split("\n", 1)[0]
    match = _FIRST_LINE_NAME.match(first)
    if not match:
        return "unnamed"
    return match.group(1).split("[", 1)[0]


def program_hdr(program: Program) -> bool | None:
    """Whether a denoise program's color is HDR, from its input pass's first-line comment.

    None when no oidn-gpu input pass names it (network programs, foreign programs).
    HDR programs take autoexposure per frame unless the host sets a scale.
    """
    flags = {m.group(1) for s in program.shaders if (m := _INPUT_PASS_HDR.match(s.code))}
    if len(flags) != 1:
        return None
    return flags == {"1"}


def frame_input_scale(program: Program) -> float | None:
    """The input scale a program's frame buffer holds initially (None without one)."""
    meta = program.meta
    if meta is None or meta.frame_buffer is None:
        return None
    data = program.buffers[meta.frame_buffer].data[:4].ljust(4, b"\0")
    return float(struct.unpack("<f", data)[0])


def summarize(program: Program) -> ProgramSummary:
    meta = program.meta
    submits = [op for op in program.operations if isinstance(op, Submit)]
    commands = [c for op in submits for c in op.commands]
    names = Counter(shader_name(s.code) for s in program.shaders)
    weights = meta.weight_buffers if meta is not None else ()
    is_denoise = program.output_external or (meta is not None and meta.tiles > 0)
    return ProgramSummary(
        kind="denoise" if is_denoise else "network",
        output_width=program.output_width,
        output_height=program.output_height,
        output_channels=program.output_channels,
        output_external=program.output_external,
        inputs=tuple(
            (program.buffers[i].label, program.buffers[i].byte_size) for i in program.inputs
        ),
        buffer_count=len(program.buffers),
        buffer_bytes=program.buffer_bytes,
        initial_data_bytes=program.initial_data_bytes,
        weight_bytes=sum(program.buffers[i].byte_size for i in weights),
        shader_count=len(program.shaders),
        shader_names=tuple(sorted(names.items())),
        pipeline_count=len(program.pipelines),
        bind_group_count=len(program.bind_groups),
        submit_count=len(submits),
        dispatch_count=sum(isinstance(c, Dispatch) for c in commands),
        copy_count=sum(isinstance(c, Copy) for c in commands),
        write_count=sum(isinstance(op, Write) for op in program.operations),
        precision=None if meta is None else ("fp16" if meta.precision == 2 else "fp32"),
        tiles=None if meta is None else meta.tiles,
        kernels=() if meta is None else kernel_names(meta.kernels),
        frame_buffer=None if meta is None else meta.frame_buffer,
        accumulation=None
        if meta is None or meta.accumulation is None
        else meta.accumulation.describe(),
    )


def _mib(byte_size: int) -> str:
    return f"{byte_size / (1 << 20):.2f} MiB ({byte_size:,} bytes)"


def describe(program: Program, *, file_bytes: int | None = None) -> str:
    """A human-readable report of a program."""
    s = summarize(program)
    lines = [
        f"kind:        {s.kind} program, output {s.output_width}x{s.output_height}, "
        f"{s.output_channels} channel(s) of RGBA float32"
        + (", host-supplied output" if s.output_external else ""),
    ]
    if file_bytes is not None:
        lines.append(f"file:        {_mib(file_bytes)}")
    for label, size in s.inputs:
        lines.append(f"input:       {label or '(unlabeled)'}: {size:,} bytes")
    if s.precision is not None:
        lines.append(f"precision:   {s.precision}")
        lines.append(f"tiles:       {s.tiles}")
        lines.append(f"kernels:     {', '.join(s.kernels) or 'none'}")
        frame = "none" if s.frame_buffer is None else f"buffer {s.frame_buffer}"
        if s.frame_buffer is not None:
            hdr = program_hdr(program)
            frame += f", recorded input scale {frame_input_scale(program):.9g}"
            frame += " (replay: autoexposure per frame)" if hdr else ""
        lines.append(f"frame:       {frame}")
        lines.append(f"accumulation: {s.accumulation or 'not recorded (META version 1)'}")
    else:
        lines.append("meta:        absent")
    lines += [
        f"memory:      {s.buffer_count} buffers, {_mib(s.buffer_bytes)} of GPU memory",
        f"initial:     {_mib(s.initial_data_bytes)} of initial data"
        + (f", weights {_mib(s.weight_bytes)}" if s.weight_bytes else ""),
        f"shaders:     {s.shader_count} ("
        + ", ".join(f"{name} x{count}" for name, count in s.shader_names)
        + ")",
        f"pipelines:   {s.pipeline_count}",
        f"bind groups: {s.bind_group_count}",
        f"operations:  {s.submit_count} submits ({s.dispatch_count} dispatches, "
        f"{s.copy_count} copies), {s.write_count} writes",
    ]
    return "\n".join(lines)


__all__ = [
    "ProgramSummary",
    "describe",
    "frame_input_scale",
    "program_hdr",
    "shader_name",
    "summarize",
]
