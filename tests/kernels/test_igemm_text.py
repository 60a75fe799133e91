"""The implicit-GEMM generator's exact text over a wide sweep of specs and options.

About 8,000 shaders (`sweep`: 16 conv specs in both precisions, each with 250 option sets
drawn from every option's values with a fixed seed, on two device limit sets) are generated
and hashed per spec, and in fp16 about 3,500 more with the f16 chains of 16 products and the
partials of 2 or 4 chains (``-chains`` groups); the SHA-256 of each group is pinned in
``tests/data/igemm_text.json``.
A change to the template or its generator that is meant to keep every kernel the same
(a refactor) must keep every digest. Set ``OIDN_GPU_UPDATE_SNAPSHOTS=1`` to rewrite the file
after an intended change of the generated text; review which groups changed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
from dataclasses import replace
from pathlib import Path

import pytest

from oidn_gpu.errors import UnsupportedDeviceError
from oidn_gpu.kernels import conv_igemm, gemm
from oidn_gpu.kernels.gemm import Accumulation, GemmOptions
from oidn_gpu.kernels.spec import ConvSource, ConvSpec, DeviceLimits, Precision

DIGESTS = Path(__file__).resolve().parents[1] / "data" / "igemm_text.json"
OPTION_SETS = 250  # random option sets per spec
SEED = 20
# The accumulations the sweep cycles through (the pinned digests' order); the f16 chains of
# 16 products and the partials of 2 or 4 chains have their own fp16 groups (``-chains``: the
# first CHAIN_OPTION_SETS option sets, each with the three).
PINNED_ACCUMULATIONS = (Accumulation.F32, Accumulation.F16_CHAINS, Accumulation.F16_PARTIALS)
CHAIN_ACCUMULATIONS = (Accumulation.F16_CHAINS16, Accumulation.F16_PAIRS, Accumulation.F16_LANES)
CHAIN_OPTION_SETS = 60

# lavapipe-like (32 KiB of workgroup memory) and H200-like (48 KiB, large GPU) limits
LIMITS = (
    DeviceLimits(max_workgroup_storage_bytes=32768, shader_f16=True),
    DeviceLimits(
        max_workgroup_storage_bytes=49152,
        max_invocations_per_workgroup=1024,
        max_workgroup_size_x=1024,
        max_workgroup_size_y=1024,
        shader_f16=True,
        large_gpu=True,
    ),
)


def _specs(p: Precision) -> dict[str, ConvSpec]:
    return {
        "enc-3-32": ConvSpec.simple(3, 32, p),
        "enc-9-32-pool": ConvSpec.simple(9, 32, p, pool=True),
        "enc-32-48-pool": ConvSpec.simple(32, 48, p, pool=True),
        "enc-64-80-pool": ConvSpec.simple(64, 80, p, pool=True),
        "mid-160-160": ConvSpec.simple(160, 160, p),
        "odd-73-13-linear": ConvSpec.simple(73, 13, p, relu=False),
        "dec-96u-64-64": ConvSpec((ConvSource(96, True), ConvSource(64)), 64, p),
        "dec-5u-3-7-linear": ConvSpec((ConvSource(5, True), ConvSource(3)), 7, p, relu=False),
        "dec-64u-9-32": ConvSpec((ConvSource(64, True), ConvSource(9)), 32, p),
        "final-32-3": ConvSpec.simple(32, 3, p, relu=False, out_precision=Precision.FP32),
    }


def _option_values() -> dict[str, tuple[object, ...]]:
    """Every option's values but ``accumulation``'s, which `_option_sets` cycles through."""
    values = gemm.option_values()
    values["shared_layout"] = (None, *values["shared_layout"])
    del values["accumulation"]
    del values["input_accumulation"]
    del values["final_accumulation"]
    del values["decoder_form"]  # the parity form: tests/kernels/test_conv_parity.py
    return values


def _option_sets() -> list[GemmOptions]:
    values = _option_values()
    rng = random.Random(SEED)
    sets = [GemmOptions()]
    sets += [GemmOptions(**{name: v}) for name, vs in values.items() for v in vs]
    while len(sets) < OPTION_SETS:
        sets.append(GemmOptions(**{name: rng.choice(vs) for name, vs in sorted(values.items())}))
    accumulations = list(PINNED_ACCUMULATIONS)
    return [
        replace(options, accumulation=accumulations[i % len(accumulations)])
        for i, options in enumerate(sets)
    ]


def groups() -> list[str]:
    fp16 = Precision.FP16
    return [f"{name}-{p.value}" for p in Precision for name in _specs(p)] + [
        f"{name}-{fp16.value}-chains" for name in _specs(fp16)
    ]


def _chain_option_sets() -> list[GemmOptions]:
    return [
        replace(options, accumulation=accumulation)
        for options in _option_sets()[:CHAIN_OPTION_SETS]
        for accumulation in CHAIN_ACCUMULATIONS
    ]


def group_digest(group: str) -> tuple[int, str]:
    """(kernels generated, SHA-256 of their keys and sources) of one spec's sweep."""
    chains = group.endswith("-chains")
    name, precision = group.removesuffix("-chains").rsplit("-", 1)
    spec = _specs(Precision(precision))[name]
    digest = hashlib.sha256()
    count = 0
    for options in _chain_option_sets() if chains else _option_sets():
        for limits in LIMITS:
            try:
                kernel = conv_igemm.generate(spec, options, limits)
            except UnsupportedDeviceError:
                continue
            digest.update(kernel.key.encode() + b"\0" + kernel.source.encode() + b"\0")
            count += 1
    return count, digest.hexdigest()


@functools.lru_cache(maxsize=1)
def _pinned() -> dict[str, dict[str, object]]:
    if os.environ.get("OIDN_GPU_UPDATE_SNAPSHOTS") == "1":  # rewritten once per session
        table = {
            g: dict(zip(("kernels", "sha256"), group_digest(g), strict=True)) for g in groups()
        }
        DIGESTS.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    assert DIGESTS.exists(), f"missing {DIGESTS}; run with OIDN_GPU_UPDATE_SNAPSHOTS=1"
    return json.loads(DIGESTS.read_text())


def test_sweep_is_large_and_covers_every_group() -> None:
    pinned = _pinned()
    assert sorted(pinned) == sorted(groups())
    assert sum(int(v["kernels"]) for v in pinned.values()) >= 7500


@pytest.mark.parametrize("group", groups())
def test_generated_text_unchanged(group: str) -> None:
    pinned = _pinned()[group]
    count, digest = group_digest(group)
    assert count == pinned["kernels"], f"{group}: {count} kernels, pinned {pinned['kernels']}"
    assert digest == pinned["sha256"], f"{group}: the generated WGSL changed"
