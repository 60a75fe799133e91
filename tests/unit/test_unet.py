"""Tests of model/unet.py: descriptors, detection, validation, graph, helpers.

Run this file as a script to regenerate the tiny models in tests/data
(``python -m tests.unit.test_unet`` in the repository root);
`test_tiny_models_in_test_data_are_up_to_date` checks the committed files still match.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from oidn_gpu.errors import WeightsFormatError
from oidn_gpu.graph import ir
from oidn_gpu.model import tza, unet
from oidn_gpu.model.unet import (
    BASE_SPEC,
    LARGE_SPEC,
    ConcatLayer,
    ConvLayer,
    Topology,
    detect_spec,
    flops_per_pixel,
    load_model,
    tile_overlap,
    validate_model,
)
from tests.datasets import official_params

DATA_DIR = Path(__file__).resolve().parents[1] / "data"

# Section 2.4 of oidn-semantics.md: topology, input channels, tensors, bytes.
OFFICIAL_FILES = {
    "rt_hdr": ("base", 3, 32, 1_830_792),
    "rt_ldr": ("base", 3, 32, 1_830_792),
    "rt_hdr_small": ("small", 3, 32, 634_568),
    "rt_ldr_small": ("small", 3, 32, 634_568),
    "rt_hdr_alb": ("base", 6, 32, 1_835_976),
    "rt_ldr_alb": ("base", 6, 32, 1_835_976),
    "rt_hdr_alb_small": ("small", 6, 32, 638_024),
    "rt_ldr_alb_small": ("small", 6, 32, 638_024),
    "rt_hdr_alb_nrm": ("base", 9, 32, 1_841_160),
    "rt_ldr_alb_nrm": ("base", 9, 32, 1_841_160),
    "rt_hdr_calb_cnrm": ("base", 9, 32, 1_841_160),
    "rt_ldr_calb_cnrm": ("base", 9, 32, 1_841_160),
    "rt_hdr_alb_nrm_small": ("small", 9, 32, 641_480),
    "rt_ldr_alb_nrm_small": ("small", 9, 32, 641_480),
    "rt_hdr_calb_cnrm_small": ("small", 9, 32, 641_480),
    "rt_ldr_calb_cnrm_small": ("small", 9, 32, 641_480),
    "rt_hdr_calb_cnrm_large": ("large", 9, 38, 7_698_439),
    "rt_alb": ("base", 3, 32, 1_830_792),
    "rt_alb_large": ("large", 3, 38, 7_684_615),
    "rt_nrm": ("base", 3, 32, 1_830_792),
    "rt_nrm_large": ("large", 3, 38, 7_684_615),
    "rtlightmap_hdr": ("base", 3, 32, 1_830_792),
    "rtlightmap_dir": ("base", 3, 32, 1_830_792),
}

# Sections 2.2 and 2.3: (layer, in, out) with 'ic' for the input channel count.
BASE_CHANNELS = [
    ("enc_conv0", "ic", 32), ("enc_conv1", 32, 32), ("enc_conv2", 32, 48),
    ("enc_conv3", 48, 64), ("enc_conv4", 64, 80), ("enc_conv5a", 80, 96),
    ("enc_conv5b", 96, 96), ("dec_conv4a", 160, 112), ("dec_conv4b", 112, 112),
    ("dec_conv3a", 160, 96), ("dec_conv3b", 96, 96), ("dec_conv2a", 128, 64),
    ("dec_conv2b", 64, 64), ("dec_conv1a", "64+ic", 64), ("dec_conv1b", 64, 32),
    ("dec_conv0", 32, 3),
]  # fmt: skip
SMALL_CHANNELS = [
    ("enc_conv0", "ic", 32), ("enc_conv1", 32, 32), ("enc_conv2", 32, 32),
    ("enc_conv3", 32, 32), ("enc_conv4", 32, 32), ("enc_conv5a", 32, 32),
    ("enc_conv5b", 32, 32), ("dec_conv4a", 64, 64), ("dec_conv4b", 64, 64),
    ("dec_conv3a", 96, 64), ("dec_conv3b", 64, 64), ("dec_conv2a", 96, 64),
    ("dec_conv2b", 64, 32), ("dec_conv1a", "32+ic", 32), ("dec_conv1b", 32, 32),
    ("dec_conv0", 32, 3),
]  # fmt: skip
LARGE_CHANNELS = [
    ("enc_conv1a", "ic", 64), ("enc_conv1b", 64, 64), ("enc_conv2a", 64, 96),
    ("enc_conv2b", 96, 96), ("enc_conv3a", 96, 128), ("enc_conv3b", 128, 128),
    ("enc_conv4a", 128, 192), ("enc_conv4b", 192, 192), ("enc_conv5a", 192, 256),
    ("enc_conv5b", 256, 256), ("dec_conv4a", 384, 192), ("dec_conv4b", 192, 192),
    ("dec_conv3a", 288, 128), ("dec_conv3b", 128, 128), ("dec_conv2a", 192, 96),
    ("dec_conv2b", 96, 96), ("dec_conv1a", "96+ic", 64), ("dec_conv1b", 64, 64),
    ("dec_conv1c", 64, 3),
]  # fmt: skip
CHANNEL_TABLES = {"base": BASE_CHANNELS, "small": SMALL_CHANNELS, "large": LARGE_CHANNELS}

# Resolution level of every conv (0 = full resolution), written out from sections 2.2/2.3.
BASE_LEVELS = {
    "enc_conv0": 0, "enc_conv1": 0, "enc_conv2": 1, "enc_conv3": 2, "enc_conv4": 3,
    "enc_conv5a": 4, "enc_conv5b": 4, "dec_conv4a": 3, "dec_conv4b": 3, "dec_conv3a": 2,
    "dec_conv3b": 2, "dec_conv2a": 1, "dec_conv2b": 1, "dec_conv1a": 0, "dec_conv1b": 0,
    "dec_conv0": 0,
}  # fmt: skip


def _resolve(value: int | str, ic: int) -> int:
    if value == "ic":
        return ic
    if isinstance(value, str):
        return int(value.split("+")[0]) + ic
    return value


# --- tiny models built from a descriptor ------------------------------------------------------


def make_tensors(
    spec: unet.UNetSpec,
    input_channels: int,
    widths: Mapping[str, int],
    *,
    seed: int = 0,
    dtype: str = "float16",
) -> dict[str, np.ndarray]:
    """Random weights for ``spec`` with ``widths[conv]`` output channels (final conv: 3).

    Input channels follow the descriptor's channel flow, so the result validates.
    """
    rng = np.random.default_rng(seed)
    channels = {unet.INPUT: input_channels}
    tensors: dict[str, np.ndarray] = {}
    for layer in spec.layers:
        if isinstance(layer, ConvLayer):
            in_ch = channels[layer.input]
            out_ch = 3 if layer.name == spec.output else widths[layer.name]
            fan_in = in_ch * 9
            weight = rng.normal(0.0, np.sqrt(2.0 / fan_in), (out_ch, in_ch, 3, 3))
            tensors[f"{layer.name}.weight"] = weight.astype(dtype)
            tensors[f"{layer.name}.bias"] = rng.normal(0.0, 0.05, out_ch).astype(dtype)
            channels[layer.name] = out_ch
        elif isinstance(layer, ConcatLayer):
            channels[layer.name] = sum(channels[v] for v in layer.inputs)
        else:
            channels[layer.name] = channels[layer.input]
    return tensors


TINY_BASE_WIDTHS = {
    "enc_conv0": 4, "enc_conv1": 4, "enc_conv2": 6, "enc_conv3": 6, "enc_conv4": 8,
    "enc_conv5a": 8, "enc_conv5b": 8, "dec_conv4a": 8, "dec_conv4b": 8, "dec_conv3a": 6,
    "dec_conv3b": 6, "dec_conv2a": 6, "dec_conv2b": 4, "dec_conv1a": 4, "dec_conv1b": 4,
}  # fmt: skip
TINY_LARGE_WIDTHS = {
    "enc_conv1a": 4, "enc_conv1b": 4, "enc_conv2a": 6, "enc_conv2b": 6, "enc_conv3a": 6,
    "enc_conv3b": 6, "enc_conv4a": 8, "enc_conv4b": 8, "enc_conv5a": 8, "enc_conv5b": 8,
    "dec_conv4a": 8, "dec_conv4b": 8, "dec_conv3a": 6, "dec_conv3b": 6, "dec_conv2a": 6,
    "dec_conv2b": 6, "dec_conv1a": 4, "dec_conv1b": 4,
}  # fmt: skip

# tests/data file name -> (spec, input channels, widths, seed)
TINY_MODELS = {
    "tiny_base_ic3.tza": (BASE_SPEC, 3, TINY_BASE_WIDTHS, 1),
    "tiny_base_ic9.tza": (BASE_SPEC, 9, TINY_BASE_WIDTHS, 2),
    "tiny_large_ic6.tza": (LARGE_SPEC, 6, TINY_LARGE_WIDTHS, 3),
}


def tiny_blob(file_name: str) -> bytes:
    spec, ic, widths, seed = TINY_MODELS[file_name]
    return tza.write_tza(make_tensors(spec, ic, widths, seed=seed))


@pytest.fixture
def tiny_base() -> dict[str, np.ndarray]:
    return make_tensors(BASE_SPEC, 3, TINY_BASE_WIDTHS, seed=7)


# --- official files ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", official_params(sorted(OFFICIAL_FILES)))
def test_official_file_validates_with_the_documented_shapes(name: str, official_weights) -> None:
    family, ic, tensor_count, byte_size = OFFICIAL_FILES[name]
    path = official_weights(name)
    blob = path.read_bytes()
    assert len(blob) == byte_size
    model = load_model(path)

    assert model.name == name
    assert model.sha256 == hashlib.sha256(blob).hexdigest()
    assert model.topology is (Topology.LARGE if family == "large" else Topology.BASE)
    assert model.spec is (LARGE_SPEC if family == "large" else BASE_SPEC)
    assert len(model.spec.tensor_names()) == tensor_count
    assert model.input_channels == ic
    assert model.output_channels == 3
    assert model.receptive_field == (202 if family == "large" else 174)
    assert model.graph.input_channels == ic
    assert model.graph.output_channels == 3

    expected = [(layer, _resolve(i, ic), o) for layer, i, o in CHANNEL_TABLES[family]]
    actual = [(c.name, c.in_channels, c.out_channels) for c in model.convs.values()]
    assert actual == expected
    for conv in model.convs.values():
        assert conv.weight.shape == (conv.out_channels, conv.in_channels, 3, 3)
        assert conv.bias.shape == (conv.out_channels,)
        assert conv.weight.dtype == np.float16 and conv.bias.dtype == np.float16
        assert not conv.weight.flags.writeable


def test_base_graph_has_the_documented_nodes_in_order(package_weights_dir: Path) -> None:
    model = load_model(package_weights_dir / "rt_hdr_alb.tza")
    graph = model.graph
    assert graph.input == "input"
    assert graph.output == "dec_conv0"
    summary = [(type(n).__name__, n.name, n.inputs, n.channels) for n in graph.nodes]
    assert summary == [
        ("Conv", "enc_conv0", ("input",), 32),
        ("Conv", "enc_conv1", ("enc_conv0",), 32),
        ("Pool", "pool1", ("enc_conv1",), 32),
        ("Conv", "enc_conv2", ("pool1",), 48),
        ("Pool", "pool2", ("enc_conv2",), 48),
        ("Conv", "enc_conv3", ("pool2",), 64),
        ("Pool", "pool3", ("enc_conv3",), 64),
        ("Conv", "enc_conv4", ("pool3",), 80),
        ("Pool", "pool4", ("enc_conv4",), 80),
        ("Conv", "enc_conv5a", ("pool4",), 96),
        ("Conv", "enc_conv5b", ("enc_conv5a",), 96),
        ("Upsample", "up4", ("enc_conv5b",), 96),
        ("Concat", "concat4", ("up4", "pool3"), 160),
        ("Conv", "dec_conv4a", ("concat4",), 112),
        ("Conv", "dec_conv4b", ("dec_conv4a",), 112),
        ("Upsample", "up3", ("dec_conv4b",), 112),
        ("Concat", "concat3", ("up3", "pool2"), 160),
        ("Conv", "dec_conv3a", ("concat3",), 96),
        ("Conv", "dec_conv3b", ("dec_conv3a",), 96),
        ("Upsample", "up2", ("dec_conv3b",), 96),
        ("Concat", "concat2", ("up2", "pool1"), 128),
        ("Conv", "dec_conv2a", ("concat2",), 64),
        ("Conv", "dec_conv2b", ("dec_conv2a",), 64),
        ("Upsample", "up1", ("dec_conv2b",), 64),
        ("Concat", "concat1", ("up1", "input"), 70),
        ("Conv", "dec_conv1a", ("concat1",), 64),
        ("Conv", "dec_conv1b", ("dec_conv1a",), 32),
        ("Conv", "dec_conv0", ("dec_conv1b",), 3),
    ]
    assert all(c.activation is ir.Activation.RELU for c in graph.convs())


def test_large_graph_skips_are_pooled_outputs_and_the_input() -> None:
    model = load_model(DATA_DIR / "tiny_large_ic6.tza")  # the topology of every *_large file
    graph = model.graph
    assert graph.output == "dec_conv1c"
    concats = {n.name: n.inputs for n in graph.nodes if isinstance(n, ir.Concat)}
    assert concats == {
        "concat4": ("up4", "pool3"),
        "concat3": ("up3", "pool2"),
        "concat2": ("up2", "pool1"),
        "concat1": ("up1", "input"),
    }
    pools = {n.name: n.input for n in graph.nodes if isinstance(n, ir.Pool)}
    assert pools == {
        "pool1": "enc_conv1b",
        "pool2": "enc_conv2b",
        "pool3": "enc_conv3b",
        "pool4": "enc_conv4b",
    }
    assert [c.name for c in graph.convs()] == [name for name, _, _ in LARGE_CHANNELS]
    assert all(c.activation is ir.Activation.RELU for c in graph.convs())


def test_every_graph_value_is_defined_before_use() -> None:
    for spec in unet.SPECS:
        defined = {unet.INPUT}
        for layer in spec.layers:
            assert set(layer.inputs) <= defined, layer
            assert layer.name not in defined
            defined.add(layer.name)


def test_concat_inputs_share_one_resolution_level() -> None:
    for spec in unet.SPECS:
        levels = spec.levels()
        assert levels[spec.output] == 0
        for layer in spec.layers:
            if isinstance(layer, ConcatLayer):
                assert len({levels[v] for v in layer.inputs}) == 1, layer


# --- detection --------------------------------------------------------------------------------


def test_detect_spec_is_large_exactly_when_enc_conv1b_weight_exists() -> None:
    assert detect_spec(BASE_SPEC.tensor_names()) is BASE_SPEC
    assert detect_spec(LARGE_SPEC.tensor_names()) is LARGE_SPEC
    assert "enc_conv1b.weight" in LARGE_SPEC.tensor_names()
    assert "enc_conv1b.weight" not in BASE_SPEC.tensor_names()


def test_detect_spec_names_missing_and_unexpected_tensors() -> None:
    names = set(BASE_SPEC.tensor_names()) - {"dec_conv0.bias"} | {"extra.weight"}
    with pytest.raises(WeightsFormatError) as err:
        detect_spec(names)
    message = str(err.value)
    assert "oidn-unet-base" in message
    assert "missing tensors 'dec_conv0.bias'" in message
    assert "unexpected tensors 'extra.weight'" in message


def test_detect_spec_of_large_names_without_the_rest_reports_the_large_descriptor() -> None:
    with pytest.raises(WeightsFormatError, match=r"oidn-unet-large.*missing tensors"):
        detect_spec({"enc_conv1b.weight"})


def test_detect_spec_of_no_names_lists_a_bounded_number_of_missing_tensors() -> None:
    with pytest.raises(WeightsFormatError, match=r"and 24 more$"):
        detect_spec([])


# --- validation failures ----------------------------------------------------------------------


def _expect_error(tensors: Mapping[str, np.ndarray], pattern: str) -> None:
    with pytest.raises(WeightsFormatError, match=pattern):
        validate_model(tensors, BASE_SPEC)


def test_tiny_model_validates(tiny_base: dict[str, np.ndarray]) -> None:
    model = validate_model(tiny_base, BASE_SPEC, name="tiny")
    assert model.input_channels == 3 and model.name == "tiny" and model.sha256 is None
    assert model.graph.channels("concat4") == 8 + 6


def test_missing_tensor_is_named(tiny_base: dict[str, np.ndarray]) -> None:
    del tiny_base["enc_conv3.bias"]
    _expect_error(tiny_base, r"missing tensors 'enc_conv3\.bias'")


def test_extra_tensor_is_named(tiny_base: dict[str, np.ndarray]) -> None:
    tiny_base["enc_conv9.weight"] = tiny_base["enc_conv3.weight"]
    _expect_error(tiny_base, r"unexpected tensors 'enc_conv9\.weight'")


def test_wrong_kernel_size_is_rejected(tiny_base: dict[str, np.ndarray]) -> None:
    tiny_base["enc_conv2.weight"] = np.zeros((6, 4, 5, 5), np.float16)
    _expect_error(tiny_base, r"tensor 'enc_conv2\.weight' has a 5x5 kernel .*expected 3x3")


def test_wrong_bias_shape_is_rejected(tiny_base: dict[str, np.ndarray]) -> None:
    tiny_base["enc_conv2.bias"] = np.zeros(5, np.float16)
    _expect_error(
        tiny_base, r"tensor 'enc_conv2\.bias' has shape \(5,\); expected \(6,\) to match the 6"
    )


def test_two_dimensional_bias_is_rejected(tiny_base: dict[str, np.ndarray]) -> None:
    tiny_base["enc_conv2.bias"] = np.zeros((6, 1), np.float16)
    _expect_error(tiny_base, r"tensor 'enc_conv2\.bias' has shape \(6, 1\); expected \(O,\)")


def test_three_dimensional_weight_is_rejected(tiny_base: dict[str, np.ndarray]) -> None:
    tiny_base["enc_conv2.weight"] = np.zeros((6, 4, 9), np.float16)
    _expect_error(tiny_base, r"'enc_conv2\.weight' has shape \(6, 4, 9\); expected \(O, I, 3, 3\)")


def test_wrong_channel_flow_into_a_conv_is_rejected(tiny_base: dict[str, np.ndarray]) -> None:
    tiny_base["enc_conv3.weight"] = np.zeros((6, 5, 3, 3), np.float16)
    _expect_error(
        tiny_base,
        r"tensor 'enc_conv3\.weight' has 5 input channels but its input value 'pool2' has 6",
    )


def test_wrong_concat_channels_name_both_parts(tiny_base: dict[str, np.ndarray]) -> None:
    tiny_base["dec_conv4a.weight"] = np.zeros((8, 13, 3, 3), np.float16)
    _expect_error(
        tiny_base,
        r"'dec_conv4a\.weight' has 13 input channels but its input value 'concat4' has 14 "
        r"channels \(up4 8 \+ pool3 6\)",
    )


def test_input_channels_must_be_3_6_or_9() -> None:
    tensors = make_tensors(BASE_SPEC, 4, TINY_BASE_WIDTHS)
    _expect_error(tensors, r"'enc_conv0\.weight' has 4 input channels; expected 3, 6 or 9")


def test_final_conv_must_output_3_channels(tiny_base: dict[str, np.ndarray]) -> None:
    tiny_base["dec_conv0.weight"] = np.zeros((4, 4, 3, 3), np.float16)
    tiny_base["dec_conv0.bias"] = np.zeros(4, np.float16)
    _expect_error(tiny_base, r"'dec_conv0\.weight' has 4 output channels; expected 3")


def test_float64_weights_are_rejected(tiny_base: dict[str, np.ndarray]) -> None:
    tiny_base["enc_conv1.weight"] = tiny_base["enc_conv1.weight"].astype(np.float64)
    _expect_error(tiny_base, r"'enc_conv1\.weight' has dtype float64; expected float16 or float32")


def test_float32_weights_are_accepted_and_kept() -> None:
    tensors = make_tensors(BASE_SPEC, 6, TINY_BASE_WIDTHS, dtype="float32")
    model = validate_model(tensors, BASE_SPEC)
    assert model.convs["enc_conv0"].weight.dtype == np.float32
    assert model.input_channels == 6


def test_large_tensors_against_the_base_descriptor_fail_with_both_lists() -> None:
    tensors = make_tensors(LARGE_SPEC, 3, TINY_LARGE_WIDTHS)
    with pytest.raises(WeightsFormatError, match=r"missing tensors .*; unexpected tensors "):
        validate_model(tensors, BASE_SPEC)


def test_malformed_blob_fails_in_load_model() -> None:
    with pytest.raises(WeightsFormatError, match="invalid or corrupted weights blob"):
        load_model(b"\x00" * 100)


def test_load_model_from_bytes_records_sha_and_no_name() -> None:
    blob = tiny_blob("tiny_large_ic6.tza")
    model = load_model(blob)
    assert model.name is None
    assert model.sha256 == hashlib.sha256(blob).hexdigest()
    assert model.topology is Topology.LARGE and model.input_channels == 6
    assert load_model(bytearray(blob), name="x").name == "x"


# --- helpers ----------------------------------------------------------------------------------


def test_tile_overlap_is_half_the_receptive_field_rounded_to_the_alignment() -> None:
    assert tile_overlap(BASE_SPEC) == 96
    assert tile_overlap(LARGE_SPEC) == 112
    # Metal's alignment 32 gives OIDN's Metal overlaps 96 / 128 (section 8.1).
    assert tile_overlap(BASE_SPEC, 32) == 96
    assert tile_overlap(LARGE_SPEC, 32) == 128
    assert tile_overlap(BASE_SPEC, 1) == 87


def test_flops_per_pixel_matches_the_channel_table(package_weights_dir: Path) -> None:
    model = load_model(package_weights_dir / "rt_hdr.tza")
    expected = sum(
        2 * _resolve(i, 3) * o * 9 / 4 ** BASE_LEVELS[name] for name, i, o in BASE_CHANNELS
    )
    assert flops_per_pixel(model) == pytest.approx(expected, rel=1e-12)
    # enc_conv0 alone at full resolution: 2 * 3 * 32 * 9.
    assert 2 * 3 * 32 * 9 == 1728
    assert expected > 1728


def test_flops_per_pixel_of_the_large_model_exceeds_the_base_one(
    package_weights_dir: Path,
) -> None:
    base = flops_per_pixel(load_model(package_weights_dir / "rt_alb.tza"))
    # rt_alb_large's shapes (the channel table) with random values: FLOPs depend on shapes only
    widths = {name: out for name, _, out in LARGE_CHANNELS}
    large_tensors = make_tensors(LARGE_SPEC, 3, widths, seed=4)
    large = flops_per_pixel(validate_model(large_tensors, LARGE_SPEC, name="rt_alb_large shapes"))
    assert 2 < large / base < 3


def test_tiny_models_in_test_data_are_up_to_date() -> None:
    for file_name in TINY_MODELS:
        committed = (DATA_DIR / file_name).read_bytes()
        assert committed == tiny_blob(file_name), "regenerate with python -m tests.unit.test_unet"
        assert len(committed) < 32 * 1024
        load_model(committed)


if __name__ == "__main__":  # regenerate tests/data/tiny_*.tza
    for file_name in TINY_MODELS:
        (DATA_DIR / file_name).write_bytes(tiny_blob(file_name))
        print(f"wrote {DATA_DIR / file_name}", file=sys.stderr)
