"""Seeded, bounded fuzzing of config words through the recorder (no GPU needed).

Any words oidn-webgpu's reader takes are recorded or refused with an oidn-gpu error
(`oidn_gpu.errors`); nothing else escapes, and every recorded program reads back.
"""

from __future__ import annotations

import random
import struct
import warnings

import pytest

from oidn_gpu.errors import InvalidArgumentError, OIDNGPUError
from oidn_gpu.record import make_config
from oidn_gpu.record.api import record_denoise
from oidn_gpu.record.reader import read_program

pytestmark = pytest.mark.gpu  # the recorder runs the wgpu executor (on a recording device)

SEED = 20261201
COUNT = 80
VALUES = (0, 1, 2, 3, 4, 5, 7, 8, 16, 64, 65535, 1 << 31, 0xFFFFFFFF)


def test_mutated_config_words_record_or_are_refused_with_project_errors(tiny_tza):
    base = list(struct.unpack("<21I", make_config(16, 16, denoise=True, hdr=True)))
    rng = random.Random(SEED)
    outcomes = {"recorded": 0, "refused": 0}
    for n in range(COUNT):
        words = list(base)
        for _ in range(rng.randint(1, 3)):
            index = rng.randrange(3, len(words))
            words[index] = rng.choice(VALUES) if rng.random() < 0.8 else rng.getrandbits(32)
        config = struct.pack(f"<{len(words)}I", *words)
        try:
            with warnings.catch_warnings():  # kernel fallbacks; 1/s of a denormal scale
                warnings.simplefilter("ignore", RuntimeWarning)
                read_program(record_denoise(tiny_tza["tiny_base_ic3"], config))
            outcomes["recorded"] += 1
        except OIDNGPUError:
            outcomes["refused"] += 1
        except Exception as err:
            raise AssertionError(f"config {n} {words} raised {type(err).__name__}: {err}") from err
    assert outcomes["recorded"] > COUNT // 2 and outcomes["refused"] > 0, outcomes


def test_zero_workgroups_per_dimension_is_refused(tiny_tza):
    words = list(struct.unpack("<21I", make_config(16, 16, denoise=True)))
    words[10] = 0
    with pytest.raises(InvalidArgumentError, match=r"word 10 .* is 0; expected at least 1"):
        record_denoise(tiny_tza["tiny_base_ic3"], struct.pack("<21I", *words))
