"""Seeded, bounded fuzzing of program files through the reader AND the replayer (lavapipe in CI).

Mutated programs (words replaced by edge values, bits flipped, dispatch sizes, bindings,
usages and sizes changed) must end in one of three ways: refused by `read_program`, refused
by the `Replayer` or its run with an oidn-gpu error (`oidn_gpu.errors`), or replayed to
completion within the run's deadline. Any other exception is a crash; a run past its
deadline is a hang. Shader text is not mutated here (`test_fuzz.py` feeds the reader such
bytes): a mutated loop bound may make a shader legitimately run for hours, which no bound on
the dispatches can see. The mutations are version 2 files, whose sections have no checksums,
so they reach the replayer; the same mutations of version 3 files are refused as corrupt.
"""

from __future__ import annotations

import dataclasses
import random
import struct

import numpy as np
import pytest

from oidn_gpu.errors import DeadlineExceededError, OIDNGPUError
from oidn_gpu.record import make_config
from oidn_gpu.record.api import record_denoise
from oidn_gpu.record.format import (
    MAX_DISPATCH_WORKGROUPS,
    MAX_PROGRAM_WORKGROUPS,
    OIDN_WEB_PROGRAM_VERSION,
    BindGroupDesc,
    BindingDesc,
    Dispatch,
    Program,
    ProgramFormatError,
    Submit,
)
from oidn_gpu.record.reader import read_program
from oidn_gpu.record.replay import Replayer
from oidn_gpu.record.writer import write_program

from .programs import doubling_program

pytestmark = pytest.mark.gpu

SEED = 20261201
DEADLINE_S = 60.0  # per run; the programs here replay in well under a second on lavapipe
EDGE = (0, 1, 2, 3, 4, 16, 255, 256, 0xFFFF, 0x10000, 1 << 31, 0xFFFFFFF0, 0xFFFFFFFF)


def _u32(rng: random.Random) -> int:
    return rng.choice(EDGE) if rng.random() < 0.7 else rng.getrandbits(32)


def _shader_ranges(data: bytes, program: Program) -> list[range]:
    """Byte ranges of the shader strings in ``data`` (left alone by the byte mutations)."""
    out = []
    for shader in program.shaders:
        code = shader.code.encode()
        at = data.index(code)
        out.append(range(at - 4, at + len(code) + 4))
    return out


def mutate_bytes(data: bytes, program: Program, rng: random.Random) -> bytes:
    """Replace 1 to 3 words outside the shader text by edge or random values, or flip bits."""
    skip = _shader_ranges(data, program)
    words = [i for i in range(0, len(data), 4) if not any(i in r for r in skip)]
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        at = rng.choice(words)
        if rng.random() < 0.5:
            struct.pack_into("<I", out, at, _u32(rng))
        else:
            out[at + rng.randrange(4)] ^= 1 << rng.randrange(8)
    return bytes(out)


def _dispatches(program: Program) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, op in enumerate(program.operations)
        if isinstance(op, Submit)
        for j, c in enumerate(op.commands)
        if isinstance(c, Dispatch)
    ]


def mutate_value(program: Program, rng: random.Random) -> Program:
    """One structural change: a dispatch's size, a binding, or a buffer's usage or size."""
    kind = rng.choice(("dispatch", "binding", "buffer"))
    if kind == "dispatch":
        i, j = rng.choice(_dispatches(program))
        op = program.operations[i]
        size = rng.choice(
            [
                (65535, 65535, 65535),
                (0, 1, 1),
                (MAX_DISPATCH_WORKGROUPS, 1, 1),
                tuple(rng.choice((1, 2, 7, 64, 4096, 65535)) for _ in range(3)),
            ]
        )
        command = dataclasses.replace(op.commands[j], x=size[0], y=size[1], z=size[2])
        commands = (*op.commands[:j], command, *op.commands[j + 1 :])
        ops = (*program.operations[:i], Submit(commands), *program.operations[i + 1 :])
        return dataclasses.replace(program, operations=ops)
    if kind == "binding":
        g = rng.randrange(len(program.bind_groups))
        group = program.bind_groups[g]
        e = rng.randrange(len(group.entries))
        entry = group.entries[e]
        field = rng.choice(("binding", "buffer", "byte_offset", "byte_size"))
        value = rng.choice((0, 1, 4, 256, 512, len(program.buffers) - 1, rng.getrandbits(12)))
        entries = list(group.entries)
        entries[e] = dataclasses.replace(entry, **{field: value})
        groups = list(program.bind_groups)
        groups[g] = BindGroupDesc(group.pipeline, group.group, tuple(entries))
        return dataclasses.replace(program, bind_groups=tuple(groups))
    b = rng.randrange(len(program.buffers))
    buffer = program.buffers[b]
    if rng.random() < 0.5:
        buffer = dataclasses.replace(buffer, usage=rng.choice((0x4, 0x8, 0x40, 0x80, 0x3FF)))
    else:
        size = max(len(buffer.data), 4 * rng.randint(1, max(1, buffer.byte_size // 2)))
        buffer = dataclasses.replace(buffer, byte_size=(size + 3) // 4 * 4)
    buffers = (*program.buffers[:b], buffer, *program.buffers[b + 1 :])
    return dataclasses.replace(program, buffers=buffers)


def _inputs(program: Program) -> list[np.ndarray]:
    return [np.full(program.buffers[i].byte_size // 4, 0.5, np.float32) for i in program.inputs]


def fuzz_one(data: bytes, gpu) -> str:
    """Read and replay ``data``; returns the outcome, raises on a crash or a hang."""
    try:
        program = read_program(data)
    except ProgramFormatError:
        return "refused by the reader"
    try:
        with Replayer(program, gpu, deadline_s=DEADLINE_S) as replayer:
            replayer.run(_inputs(program))
    except DeadlineExceededError as err:
        raise AssertionError(f"a mutated program hung: {err}") from err
    except OIDNGPUError:
        return "refused by the replayer"
    return "replayed"


def _corpus(tiny_tza) -> list[Program]:
    denoise = record_denoise(tiny_tza["tiny_base_ic3"], make_config(16, 16, denoise=True))
    return [doubling_program(), read_program(denoise)]


@pytest.fixture(scope="module")
def corpus(tiny_tza) -> list[Program]:
    return _corpus(tiny_tza)


# (program index, mutations): the doubling program is fast to replay, the denoise real.
PLAN = ((0, 120), (1, 24))


@pytest.mark.parametrize(("index", "count"), PLAN)
def test_mutated_programs_are_refused_or_replay_with_only_project_errors(corpus, gpu, index, count):
    base = corpus[index]
    rng = random.Random(SEED + index)
    seed_bytes = write_program(base, version=OIDN_WEB_PROGRAM_VERSION)
    outcomes: dict[str, int] = {}
    for n in range(count):
        if n % 2:
            data = mutate_bytes(seed_bytes, base, rng)
        else:
            data = write_program(mutate_value(base, rng), version=OIDN_WEB_PROGRAM_VERSION)
        try:
            outcome = fuzz_one(data, gpu)
        except AssertionError:
            raise
        except Exception as err:  # a crash: name the mutation so it can be replayed
            raise AssertionError(
                f"mutation {n} of program {index} (seed {SEED + index}) raised "
                f"{type(err).__name__}: {err}"
            ) from err
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert sum(outcomes.values()) == count
    assert outcomes.get("refused by the reader", 0) > 0, outcomes
    assert outcomes.get("replayed", 0) > 0, outcomes  # the mutations reach the GPU


def test_the_same_mutations_of_version_3_files_are_refused_as_corrupt(corpus):
    rng = random.Random(SEED)
    base = corpus[0]
    data = write_program(base)
    for _ in range(200):
        mutated = mutate_bytes(data, base, rng)
        if mutated == data:
            continue
        with pytest.raises(ProgramFormatError):
            read_program(mutated)


def test_a_dispatch_of_65535_cubed_is_refused_before_anything_runs(corpus):
    base = corpus[1]
    i, j = _dispatches(base)[0]
    op = base.operations[i]
    command = dataclasses.replace(op.commands[j], x=65535, y=65535, z=65535)
    submit = Submit((command, *op.commands[j + 1 :]))
    ops = (*base.operations[:i], submit, *base.operations[i + 1 :])
    data = write_program(dataclasses.replace(base, operations=ops))
    with pytest.raises(ProgramFormatError, match=r"\(65535, 65535, 65535\) = 281462092005375"):
        read_program(data)


def test_a_zero_dispatch_is_refused(corpus):
    base = corpus[0]
    ops = (base.operations[0], Submit((Dispatch(0, 0, 0, 1, 1),)))
    with pytest.raises(ProgramFormatError, match=r"\(0, 1, 1\) workgroups, which runs nothing"):
        read_program(write_program(dataclasses.replace(base, operations=ops)))


def test_the_program_wide_workgroup_bound_is_enforced():
    base = doubling_program()
    count = MAX_PROGRAM_WORKGROUPS // MAX_DISPATCH_WORKGROUPS + 1  # 2^26 workgroups each
    big = dataclasses.replace(
        base,
        buffers=tuple(dataclasses.replace(b, byte_size=1 << 28) for b in base.buffers[:2])
        + base.buffers[2:],
        bind_groups=(
            BindGroupDesc(0, 0, (BindingDesc(0, 0), BindingDesc(1, 1), BindingDesc(2, 2, 0, 16))),
        ),
        operations=(Submit((Dispatch(0, 0, 1 << 13, 1 << 13, 1),) * count),),
    )
    expected = f"a program runs at most {MAX_PROGRAM_WORKGROUPS}"
    with pytest.raises(ProgramFormatError, match=expected):
        read_program(write_program(big))


def test_a_run_past_its_deadline_raises_a_clear_error(corpus, gpu):
    with (
        Replayer(corpus[0], gpu, deadline_s=0) as replayer,
        pytest.raises(DeadlineExceededError, match="longer than its deadline of 0 s"),
    ):
        replayer.run(_inputs(corpus[0]))
    with Replayer(corpus[0], gpu, deadline_s=None) as replayer:  # no limit
        out = replayer.run(_inputs(corpus[0]))
    assert out.shape == (4, 4, 4)


@pytest.mark.parametrize("bad", [-1, float("nan"), "10"])
def test_a_bad_deadline_is_an_error(corpus, gpu, bad):
    with pytest.raises(OIDNGPUError, match="deadline_s must be None or a number"):
        Replayer(corpus[0], gpu, deadline_s=bad)
