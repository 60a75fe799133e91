"""Split K: several programs share one output tile's K loop; the last to finish sums them.

The small low-resolution layers have few output tiles and a long K loop; a tile with
``split_k`` runs each tile's K steps in ``split_k`` programs, each storing its partial
tile, and the last program of the tile to finish adds the parts in part order, then
applies the layer's epilogue (bias, ReLU, the 2x2 max-pool). The same tile with and
without the split differ only by the order of the float32 sums; two runs give the same
bits; the counters are back at zero after every launch. Small U-Nets with plain, pooled
and activation-free convs, image sizes that are not multiples of the M tile; through
Triton's interpreter without a GPU, on the GPU when there is one.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oidn_gpu.backends.cuda import layout
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.tuning import (
    MAX_SPLIT_K,
    TileConfig,
    candidates,
    check_split,
    split_eligible,
)
from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph.passes import optimize
from oidn_gpu.model.unet import load_model
from tests.cuda.conftest import rel_l2
from tests.models import random_model
from tests.unit.test_reference_backend import tiny_unet

TILE = TileConfig(64, 32, 16, 4, 2)  # one tap per K step for 16- to 48-channel sources


def _run(model, x, device, splits: dict[str, int] | None):
    """The raw output with ``TILE`` on every conv, split as asked; the executor too."""
    executor = CudaExecutor(model, device=device, tune=False, engine="triton", rows=False)
    prep = executor.prepare(*x.shape[1:])
    for launch in executor.launches:
        split = (splits or {}).get(launch.name, 1)
        prep.configs[launch.name] = dataclasses.replace(TILE, split_k=split)
    return executor.run(x), executor, prep


@pytest.mark.parametrize(("size", "split"), [((16, 48), 2), ((32, 16), 3), ((48, 32), 4)])
def test_split_k_is_the_same_conv_summed_in_parts(size, split, rng, device):
    model = random_model(tiny_unet(9, 24, 40, 48), rng)
    x = rng.random((9, *size), dtype=np.float32)
    whole, _, _ = _run(model, x, device, None)
    splits = {"e0": split, "e1": split, "m": split}  # pooled, pooled, plain without ReLU
    parts, executor, prep = _run(model, x, device, splits)
    assert prep.parts is not None and prep.counts is not None
    assert not prep.counts.cpu().numpy().any()  # every tile's counter set back to 0
    # only the float32 sums' order differs (then one fp16 rounding of each activation)
    assert rel_l2(parts, whole) <= 2e-3
    assert rel_l2(parts, ReferenceExecutor(model).run(x)) <= 2e-3
    again = executor.run(x)
    np.testing.assert_array_equal(again, parts)  # the same bits, whichever part ends last
    assert "k/" in executor.info().kernels["m"]


def test_one_split_layer_alone_matches_its_unsplit_output(rng, device):
    """A split layer's own output (before the next layer reads it) against the unsplit
    tile's: equal up to the sums' order, for every split up to the largest."""
    model = random_model(tiny_unet(9, 24, 40, 48), rng)
    x = rng.random((9, 16, 32), dtype=np.float32)
    _, executor, prep = _run(model, x, device, None)
    launch = next(lc for lc in executor.launches if lc.name == "m")
    source = prep.views[launch.sources[0].value]
    source.copy_(source.new_tensor(rng.random(tuple(source.shape), dtype=np.float32)))
    out = prep.views[launch.value]
    target = None
    executor._launch(prep, launch, TILE, target)
    expected = out.float().cpu().numpy().copy()
    for split in (2, 5, MAX_SPLIT_K):
        out.zero_()
        executor._launch(prep, launch, dataclasses.replace(TILE, split_k=split), target)
        got = out.float().cpu().numpy()
        assert rel_l2(got, expected) <= 1e-3, split
        assert not prep.counts.cpu().numpy().any()


def test_split_k_needs_one_plain_source(package_weights_dir, device):
    model = load_model(package_weights_dir / "rt_hdr_alb_nrm.tza")
    launches = {lc.name: lc for lc in layout.launches(optimize(model.graph, channel_align=1))}
    split = TileConfig(64, 128, 32, 4, 3, split_k=2)
    assert split_eligible(launches["enc_conv5a"], 32)  # 80 channels, one tap per K step
    assert split_eligible(launches["enc_conv4"], 32)  # pooled
    assert not split_eligible(launches["enc_conv4"], 128)  # 2 taps of 64 per K step
    assert not split_eligible(launches["dec_conv4a"], 32)  # decoder: two sources
    assert not split_eligible(launches["dec_conv0"], 32)  # the final conv
    check_split(launches["enc_conv5b"], split)
    with pytest.raises(InvalidArgumentError, match="dec_conv4a cannot split its K loop"):
        check_split(launches["dec_conv4a"], split)
    with pytest.raises(InvalidArgumentError, match="split_k 9 of enc_conv5b: expected 1 to 8"):
        check_split(launches["enc_conv5b"], dataclasses.replace(split, split_k=9))
    tiles = candidates(launches["enc_conv5b"])
    assert tiles[0].split_k == 1 and any(t.split_k > 1 for t in tiles)
    assert all(t.split_k == 1 for t in candidates(launches["dec_conv4a"]))


def test_a_split_decoder_tile_is_refused_at_launch(rng, device):
    model = random_model(tiny_unet(9, 24, 40, 48), rng)
    x = rng.random((9, 16, 16), dtype=np.float32)
    executor = CudaExecutor(model, device=device, tune=False, engine="triton", rows=False)
    prep = executor.prepare(16, 16)
    prep.configs["d1"] = dataclasses.replace(TILE, split_k=2)
    with pytest.raises(InvalidArgumentError, match="d1 cannot split its K loop"):
        executor.run(x)
