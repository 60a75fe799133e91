"""The row-streaming conv (`row_kernels.conv_rows_kernel`) against the per-layer kernels.

Every layer it can run (plain convs, conv + pool, the ``project`` tail's hidden conv) is
given a row tile through the shipped table, as on a GPU that has one; sizes are not
multiples of the strips (columns) or of the rows per program. Through Triton's interpreter
without a GPU (tiny sizes), on the GPU when there is one.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from oidn_gpu.backends.cuda import compile_worker, fusion, row_conv, tuning
from oidn_gpu.backends.cuda.compile_job import CompileJob
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.tuning import (
    RowsConfig,
    Tuner,
    project_signature,
    rows_eligible,
    rows_key,
)
from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.model.unet import load_model
from tests.cuda.conftest import rel_l2
from tests.cuda.test_fused import FP16_REL_L2, PROJECT_VS_LAYERS, tail_unet
from tests.models import random_model

# The row kernel sums a conv's taps in another order than the per-layer kernel (fp32
# accumulators, the same fp16 values stored): the outputs differ by fp16 roundings only.
ROWS_VS_LAYERS = 2e-3


def _ship_rows(monkeypatch, executor: CudaExecutor, size, config: RowsConfig) -> list[str]:
    """Ship ``config`` for every layer of ``executor`` the row kernel runs, rows per program
    as given (no `row_conv.balance` on a GPU); their names."""
    monkeypatch.setenv(row_conv.BALANCE_ENV_VAR, "off")
    capability = executor._capability or (0, 0)
    prep = executor._allocate(*size)
    keys = {
        executor.layer_signature(prep, launch): launch.name
        for launch in executor.launches
        if rows_eligible(launch)
    }
    monkeypatch.setitem(
        tuning.SHIPPED_ROWS,
        capability,
        dict.fromkeys(
            keys, tuple(getattr(config, f) for f in ("block_w", "rows", "num_warps", "num_stages"))
        ),
    )
    return sorted(keys.values())


@pytest.mark.parametrize(
    ("size", "channels", "config"),
    [
        ((14, 22), (9, 16, 24, 32), RowsConfig(16, 4, 4, 2)),  # strips and rows cut off
        ((10, 18), (6, 32, 64, 64), RowsConfig(8, 2, 4, 2)),  # 64 channels, many programs
        ((6, 34), (3, 16, 32, 16), RowsConfig(32, 8, 4, 2)),  # fewer rows than a program
        # the shipped tile on the fast network's shapes (32 -> 32 tail, 32 -> 32 + pool at
        # half resolution): a strip cut off at 6 columns, 10 rows of a 32-row program
        ((10, 70), (9, 32, 32, 32), RowsConfig(64, 32, 4, 3)),
    ],
)
@pytest.mark.parametrize("fused", ["off", "project"])
def test_row_kernel_matches_layers_and_reference(
    size, channels, config, fused, rng, device, monkeypatch
):
    model = random_model(tail_unet(*channels), rng)
    x = rng.random((channels[0], *size), dtype=np.float32)
    expected = ReferenceExecutor(model).run(x)
    layers = CudaExecutor(
        model, device=device, tune=False, engine="triton", fused=fused, rows=False
    )
    oracle = layers.run(x)
    rowed = CudaExecutor(model, device=device, tune=False, engine="triton", fused=fused)
    names = _ship_rows(monkeypatch, rowed, size, config)
    assert {"e0", "d1b"} <= set(names)  # conv + pool, the tail (and "m" at half resolution)
    assert "d1" not in names  # a decoder conv (upsampled source): the per-layer kernel
    prep = rowed.prepare(*size)
    assert all(isinstance(prep.configs[name], RowsConfig) for name in names)
    if fused == "project":
        assert prep.configs[project_signature(rowed.tail.hidden)] == config
    assert "triton-rows" in rowed.kernel_names()["e0"]
    actual = rowed.run(x)
    assert np.isfinite(actual).all()
    bound = PROJECT_VS_LAYERS if fused == "project" else ROWS_VS_LAYERS
    assert rel_l2(actual, oracle) <= bound
    assert rel_l2(actual, expected) <= FP16_REL_L2


def test_row_kernel_option_and_environment(monkeypatch, rng, device):
    model = random_model(tail_unet(9, 16, 24, 32), rng)
    executor = CudaExecutor(model, device=device, tune=False, engine="triton", rows=False)
    _ship_rows(monkeypatch, executor, (8, 8), RowsConfig(16, 4, 4, 2))
    assert not any(isinstance(c, RowsConfig) for c in executor.prepare(8, 8).configs.values())
    monkeypatch.setenv(row_conv.ROWS_ENV_VAR, "off")
    assert not CudaExecutor(model, device=device, tune=False, engine="triton").rows
    monkeypatch.setenv(row_conv.ROWS_ENV_VAR, "on")
    assert CudaExecutor(model, device=device, tune=False, engine="triton").rows
    monkeypatch.setenv(row_conv.ROWS_ENV_VAR, "maybe")
    with pytest.raises(InvalidArgumentError, match="OIDN_GPU_CUDA_ROWS='maybe' is unknown"):
        CudaExecutor(model, device=device, tune=False, engine="triton")
    with pytest.raises(InvalidArgumentError, match="rows 'yes' must be a bool"):
        CudaExecutor(model, device=device, tune=False, engine="triton", rows="yes")


@pytest.mark.parametrize(("fused", "rows_on"), [("off", False), ("tail", True)])
def test_compile_worker_follows_the_callers_options(fused, rows_on, monkeypatch, rng, device):
    """The child compiles the caller's kernels: its fusion and row choice, not the
    environment's."""
    monkeypatch.setenv("OIDN_GPU_CUDA_FUSED", "project")
    monkeypatch.setenv(row_conv.ROWS_ENV_VAR, "off" if rows_on else "on")
    model = random_model(tail_unet(), rng)
    job = CompileJob(
        graph=model.graph,
        convs=dict(model.convs),
        spec=None,
        precision="fp16",
        device_index=device.index,
        images=(),
        out_channels=3,
        mode=None,
        plan=None,
        autoexposure=False,
        fused=fused,
        rows=rows_on,
    )
    executor = compile_worker.executor_of(job)
    assert executor.fusion == fused and executor.rows is rows_on


def test_shipped_row_tiles_name_row_layers_of_the_default_networks(
    weights_dir, monkeypatch, device
):
    """The H200's row tiles are signatures of layers the row kernel runs; a GPU of that
    compute capability runs exactly those layers on it, the tuning cache's ``rows:`` entry
    first; ``rows=False`` runs none."""
    shipped = set(tuning.SHIPPED_ROWS[(9, 0)])
    seen: set[str] = set()  # the signatures of both networks
    for name in ("rt_hdr_alb_nrm_small", "rt_hdr_alb_nrm"):  # the default network last
        executor = CudaExecutor(
            load_model(weights_dir / f"{name}.tza"), device=device, tune=False, engine="triton"
        )
        monkeypatch.setattr(executor, "_capability", (9, 0))
        monkeypatch.setattr(executor, "_tuner", Tuner("gpu", None))
        monkeypatch.setenv(row_conv.BALANCE_ENV_VAR, "off")  # the shipped rows per program
        prep = executor.prepare(64, 96)
        signatures = {
            launch.name: executor.layer_signature(prep, launch) for launch in executor.launches
        }
        seen |= set(signatures.values())
        rowed = {n for n in signatures if isinstance(prep.configs[n], RowsConfig)}
        assert rowed == {n for n, key in signatures.items() if key in shipped}
        assert {"enc_conv0", "enc_conv1"} <= rowed
        launches = {launch.name: launch for launch in executor.launches}
        assert all(rows_eligible(launches[n]) for n in rowed)
    assert shipped <= seen
    assert {"32->32@0", "32->32p@1"} <= shipped - set(signatures.values())  # the fast net's
    assert "dec_conv1b" in rowed  # the project tail's hidden conv
    tail_key = project_signature(executor.tail.hidden)
    assert prep.configs[tail_key] == prep.configs["dec_conv1b"]
    executor._tuner.choose(
        rows_key(signatures["enc_conv0"]), (RowsConfig(32, 8, 4, 2),), lambda config: 0.0
    )
    assert executor.prepare(32, 32).configs["enc_conv0"] == RowsConfig(32, 8, 4, 2)
    plain = CudaExecutor(
        load_model(weights_dir / "rt_hdr_alb_nrm.tza"),
        device=device,
        tune=False,
        engine="triton",
        rows=False,
    )
    monkeypatch.setattr(plain, "_capability", (9, 0))
    assert not any(isinstance(c, RowsConfig) for c in plain.prepare(64, 96).configs.values())


# An H200's row-kernel launches at 1280x720 and 1920x1088 (Triton 3.6; docs/benchmarks.md,
# 2026-12-02): (height, width, programs one multiprocessor holds, the fastest rows measured).
H200_ROUNDS = [
    (720, 1280, 4, 28),  # enc_conv0: 99 registers, 52 KB of shared memory
    (720, 1280, 2, 56),  # enc_conv1 + pool: 114 registers, 98 KB
    (720, 1280, 1, 56),  # the project tail: 168 registers, 198 KB
    (1088, 1920, 4, 64),
    (544, 960, 1, 32),  # the fast network's dec_conv2b at half resolution
]


@pytest.mark.parametrize(("height", "width", "resident", "fastest"), H200_ROUNDS)
def test_balanced_rows_pick_the_h200s_fastest(height, width, resident, fastest):
    shipped = RowsConfig(64, 32, 4, 3)
    assert row_conv.balanced_rows(height, width, shipped, resident, 132) == fastest


@given(
    height=st.integers(1, 4400),
    width=st.integers(1, 8000),
    resident=st.integers(1, 16),
    sms=st.integers(1, 200),
    rows=st.sampled_from(row_conv.BALANCE_ROWS),
)
def test_balanced_rows_take_the_fewest_rounds_of_rows(height, width, resident, sms, rows):
    config = RowsConfig(64, rows, 4, 3)
    picked = row_conv.balanced_rows(height, width, config, resident, sms)
    assert picked in row_conv.BALANCE_ROWS and picked % 2 == 0

    def cost(r):
        programs = -(-width // 64) * -(-height // r)
        return -(-programs // (resident * sms)) * (r + 2)

    assert cost(picked) == min(cost(r) for r in row_conv.BALANCE_ROWS)
    assert cost(rows) > cost(picked) or picked == rows  # a tie keeps the configured rows


def test_resident_programs_follow_registers_shared_memory_and_threads():
    h200 = {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132}
    assert row_conv.resident_programs(99, 52224, 4, h200) == 4  # registers: 4, memory: 4
    assert row_conv.resident_programs(114, 98304, 4, h200) == 2  # shared memory
    assert row_conv.resident_programs(168, 198656, 4, h200) == 1
    assert row_conv.resident_programs(168, 0, 4, h200) == 3  # 21 x 256 registers a warp
    assert row_conv.resident_programs(32, 0, 16, h200) == 4  # 2,048 threads
    assert row_conv.resident_programs(255, 232448, 8, h200) == 1  # never less than one
    with pytest.raises(ValueError, match="0 programs on 132"):
        row_conv.balanced_rows(720, 1280, RowsConfig(64, 32, 4, 3), 0, 132)


def test_balance_option(monkeypatch):
    assert row_conv.balance_of("on") and row_conv.balance_of("1") and row_conv.balance_of("")
    assert not row_conv.balance_of("off") and not row_conv.balance_of("0")
    monkeypatch.setenv(row_conv.BALANCE_ENV_VAR, "off")
    assert not row_conv.balance_of()
    with pytest.raises(InvalidArgumentError, match="OIDN_GPU_CUDA_ROW_BALANCE='half' is unknown"):
        row_conv.balance_of("half")


@pytest.mark.cuda_device  # the balance reads a GPU's limits
def test_balanced_launches_give_the_configured_rows_bits(monkeypatch, rng, device):
    """On a GPU, `prepare` fits each row launch's rows to the GPU's rounds; the image is
    the configured rows' bit for bit (1280x720: each multiprocessor holds few programs)."""
    model = random_model(tail_unet(9, 16, 32, 32), rng)
    x = rng.random((9, 720, 1280), dtype=np.float32)
    shipped = RowsConfig(64, 32, 4, 3)
    plain = CudaExecutor(model, device=device, tune=False, engine="triton", fused="project")
    names = _ship_rows(monkeypatch, plain, (720, 1280), shipped)
    expected = plain.run(x)
    monkeypatch.setenv(row_conv.BALANCE_ENV_VAR, "on")
    balanced = CudaExecutor(model, device=device, tune=False, engine="triton", fused="project")
    prep = balanced.prepare(720, 1280)
    keys = [*names, project_signature(balanced.tail.hidden)]
    configs = {k: prep.configs[k] for k in keys if isinstance(prep.configs[k], RowsConfig)}
    assert any(c.rows != shipped.rows for c in configs.values()), configs
    assert all(c.rows in row_conv.BALANCE_ROWS for c in configs.values())
    assert np.array_equal(balanced.run(x), expected)


@pytest.mark.parametrize("fused", ["off", "project"])
def test_balance_sets_rows_under_limits_and_keeps_the_bits(fused, monkeypatch, rng, device):
    """`row_conv.balance` under given limits (one program on one multiprocessor: the fewest
    rounds of the fewest rows) changes each row launch's rows only; the image is the
    configured rows' bit for bit (through Triton's interpreter without a GPU)."""
    model = random_model(tail_unet(9, 16, 24, 32), rng)
    x = rng.random((9, 14, 22), dtype=np.float32)
    plain = CudaExecutor(model, device=device, tune=False, engine="triton", fused=fused)
    names = _ship_rows(monkeypatch, plain, (14, 22), RowsConfig(16, 4, 4, 2))
    expected = plain.run(x)
    balanced = CudaExecutor(model, device=device, tune=False, engine="triton", fused=fused)
    prep = balanced.prepare(14, 22)
    before = dict(prep.configs)
    asked = []

    def limits(ex, prep, conv, config, project):
        asked.append((conv.name, project))
        return None if conv.name == "m" else (1, 1)

    row_conv.balance(balanced, prep, fusion.row_launches(balanced, prep), limits)
    changed = {k for k in prep.configs if prep.configs[k] != before[k]}
    rowed = {k for k in names if k != "m"}
    if fused == "project":
        rowed = (rowed - {"d1b"}) | {project_signature(balanced.tail.hidden)}
    assert changed == rowed  # "m" had no limits; the tail's own config when fused
    assert all(prep.configs[k] == dataclasses.replace(before[k], rows=16) for k in changed)
    assert ("d1b", fused == "project") in asked
    assert np.array_equal(balanced.run(x), expected)
