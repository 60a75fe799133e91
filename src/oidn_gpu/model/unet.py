"""OIDN's U-Nets as versioned declarative descriptors, and their validation.

A `UNetSpec` is topology only: an ordered list of layers (conv, pool, upsample,
concat) naming their inputs, written in ~30 lines per family below. It holds no
channel counts; those come from the weight shapes, which is how one 'base'
descriptor covers both the base and the small networks (section 2 of
``oidn-semantics.md``; ``core/unet_filter.cpp`` ``addUNet``/``addUNetLarge``).

``tensors --detect_spec--> UNetSpec --validate_model--> ValidatedModel``

`validate_model` checks the tensors against a descriptor (every tensor present,
nothing extra, rank, dtype, 3x3 kernels, bias shapes, channel flow through
concats, 3/6/9 input channels, 3 output channels) and builds the unfused
`graph.ir.Graph`, where every conv has ReLU, the final one included (as in OIDN's
inference graph). Conventions shared with the rest of the package:

- the network input value is named ``input``;
- conv nodes are named exactly as the weight layer (``enc_conv0``);
- pools are ``pool1..pool4``, upsamples ``up4..up1``, concats ``concat4..concat1``,
  each numbered by the decoder level it feeds;
- a concat lists ``[upsampled decoder tensor, skip]``; the skips are the *pooled*
  encoder outputs and the last one is the network input.
"""

from __future__ import annotations

import enum
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np

from oidn_gpu.errors import InvalidArgumentError, WeightsFormatError
from oidn_gpu.graph import ir
from oidn_gpu.image.tiling import MIN_TILE_ALIGNMENT
from oidn_gpu.model.tza import parse_tza

INPUT = "input"
"""Name of the network input value in every descriptor and graph."""

OUTPUT_CHANNELS = 3
"""Every OIDN network outputs RGB (section 2.4)."""

INPUT_CHANNEL_CHOICES = (3, 6, 9)
"""3 x the number of images given: color, albedo, normal (section 2.4)."""

KERNEL_SIZE = 3
"""Every conv is 3x3, stride 1, zero padding 1."""

DEFAULT_TILE_ALIGNMENT = MIN_TILE_ALIGNMENT
"""OIDN's tile alignment on CPU/CUDA/HIP/SYCL (section 8.1): 16, the one definition is
`image.tiling.MIN_TILE_ALIGNMENT`."""

LARGE_MARKER_TENSOR = "enc_conv1b.weight"
"""OIDN picks the large topology exactly when this tensor exists (``UNetFilter::init``)."""

_WEIGHT_DTYPES = (np.dtype("float16"), np.dtype("float32"))


class Topology(enum.Enum):
    """The U-Net families OIDN ships ('small' is 'base' with narrower layers)."""

    BASE = "base"
    LARGE = "large"


class _OneInput:
    """Mixin of the layers that read one value, ``input``."""

    input: str

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.input,)


@dataclass(frozen=True)
class ConvLayer(_OneInput):
    """3x3 conv + bias + ReLU of value ``input``; weights ``{name}.weight``/``{name}.bias``."""

    name: str
    input: str


@dataclass(frozen=True)
class PoolLayer(_OneInput):
    """2x2 max pool, stride 2."""

    name: str
    input: str


@dataclass(frozen=True)
class UpsampleLayer(_OneInput):
    """Nearest-neighbour x2 upsampling."""

    name: str
    input: str


@dataclass(frozen=True)
class ConcatLayer:
    """Channel concatenation in the order of ``inputs``."""

    name: str
    inputs: tuple[str, ...]


Layer = ConvLayer | PoolLayer | UpsampleLayer | ConcatLayer


@dataclass(frozen=True)
class UNetSpec:
    """A versioned, weight-free description of one U-Net family.

    Attributes:
        id: stable identifier, e.g. ``'oidn-unet-base'``.
        version: bumped whenever the layer list changes meaning.
        topology: the family.
        receptive_field: OIDN's nominal receptive field in pixels (``core/unet_filter.h``).
        layers: the layers in execution order; the last one is the output.
    """

    id: str
    version: int
    topology: Topology
    receptive_field: int
    layers: tuple[Layer, ...]

    @property
    def conv_layers(self) -> tuple[ConvLayer, ...]:
        return tuple(layer for layer in self.layers if isinstance(layer, ConvLayer))

    @property
    def output(self) -> str:
        return self.layers[-1].name

    def tensor_names(self) -> frozenset[str]:
        """Every tensor name the weights must contain, nothing more."""
        return frozenset(
            f"{conv.name}.{part}" for conv in self.conv_layers for part in ("weight", "bias")
        )

    def levels(self) -> Mapping[str, int]:
        """Resolution level of every value: 0 = full resolution, k = 1/2^k."""
        level = {INPUT: 0}
        for layer in self.layers:
            source = level[layer.inputs[0]]
            if isinstance(layer, PoolLayer):
                source += 1
            elif isinstance(layer, UpsampleLayer):
                source -= 1
            level[layer.name] = source
        return MappingProxyType(level)


def _encoder_decoder(encoder: list[Layer], decoder_convs: dict[int, list[str]]) -> list[Layer]:
    """Append the shared decoder pattern: per level, upsample, concat with the skip, convs."""
    skips = {4: "pool3", 3: "pool2", 2: "pool1", 1: INPUT}
    layers = list(encoder)
    for level in (4, 3, 2, 1):
        layers.append(UpsampleLayer(f"up{level}", layers[-1].name))
        layers.append(ConcatLayer(f"concat{level}", (f"up{level}", skips[level])))
        for conv in decoder_convs[level]:
            layers.append(ConvLayer(conv, layers[-1].name))
    return layers


def _chain(*steps: str) -> list[Layer]:
    """Layers applied one after another from the network input; 'poolN' names a pool."""
    layers: list[Layer] = []
    previous = INPUT
    for step in steps:
        layer: Layer = (
            PoolLayer(step, previous) if step.startswith("pool") else ConvLayer(step, previous)
        )
        layers.append(layer)
        previous = step
    return layers


BASE_SPEC = UNetSpec(
    id="oidn-unet-base",
    version=1,
    topology=Topology.BASE,
    receptive_field=174,
    layers=tuple(
        _encoder_decoder(
            _chain(
                "enc_conv0", "enc_conv1", "pool1",
                "enc_conv2", "pool2",
                "enc_conv3", "pool3",
                "enc_conv4", "pool4",
                "enc_conv5a", "enc_conv5b",
            ),
            {
                4: ["dec_conv4a", "dec_conv4b"],
                3: ["dec_conv3a", "dec_conv3b"],
                2: ["dec_conv2a", "dec_conv2b"],
                1: ["dec_conv1a", "dec_conv1b", "dec_conv0"],
            },
        )
    ),
)  # fmt: skip
"""Base and small networks (section 2.2): every ``rt_*`` non-large file and ``rtlightmap_*``."""

LARGE_SPEC = UNetSpec(
    id="oidn-unet-large",
    version=1,
    topology=Topology.LARGE,
    receptive_field=202,
    layers=tuple(
        _encoder_decoder(
            _chain(
                "enc_conv1a", "enc_conv1b", "pool1",
                "enc_conv2a", "enc_conv2b", "pool2",
                "enc_conv3a", "enc_conv3b", "pool3",
                "enc_conv4a", "enc_conv4b", "pool4",
                "enc_conv5a", "enc_conv5b",
            ),
            {
                4: ["dec_conv4a", "dec_conv4b"],
                3: ["dec_conv3a", "dec_conv3b"],
                2: ["dec_conv2a", "dec_conv2b"],
                1: ["dec_conv1a", "dec_conv1b", "dec_conv1c"],
            },
        )
    ),
)  # fmt: skip
"""Large networks (section 2.3): ``rt_hdr_calb_cnrm_large``, ``rt_alb_large``, ``rt_nrm_large``."""

SPECS: tuple[UNetSpec, ...] = (BASE_SPEC, LARGE_SPEC)


@dataclass(frozen=True, eq=False)
class ConvWeights:
    """The weights of one conv layer, in the file's dtype (read-only arrays).

    Attributes:
        name: the layer name (``enc_conv0``).
        weight: ``(O, I, 3, 3)``.
        bias: ``(O,)``.
    """

    name: str
    weight: np.ndarray
    bias: np.ndarray

    @property
    def in_channels(self) -> int:
        return int(self.weight.shape[1])

    @property
    def out_channels(self) -> int:
        return int(self.weight.shape[0])


@dataclass(frozen=True, eq=False)
class ValidatedModel:
    """Weights checked against a descriptor, with the unfused graph they run in.

    Attributes:
        spec: the descriptor the weights match.
        graph: unfused `graph.ir.Graph` (Conv/Pool/Upsample/Concat; every conv ReLU).
        convs: layer name -> weights, in execution order.
        input_channels: 3, 6 or 9.
        output_channels: 3.
        receptive_field: nominal receptive field in pixels (174 base/small, 202 large).
        sha256: hex digest of the blob it was loaded from, if any.
        name: the file stem (``rt_hdr_alb``) or another label, if any.
    """

    spec: UNetSpec
    graph: ir.Graph
    convs: Mapping[str, ConvWeights]
    input_channels: int
    output_channels: int
    receptive_field: int
    sha256: str | None = None
    name: str | None = None

    @property
    def topology(self) -> Topology:
        return self.spec.topology


def _name_list(names: Iterable[str], limit: int = 8) -> str:
    ordered = sorted(names)
    shown = ", ".join(f"'{n}'" for n in ordered[:limit])
    more = len(ordered) - limit
    return shown + (f" and {more} more" if more > 0 else "")


def _check_tensor_names(names: frozenset[str], spec: UNetSpec) -> None:
    expected = spec.tensor_names()
    missing = expected - names
    unexpected = names - expected
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing tensors {_name_list(missing)}")
        if unexpected:
            parts.append(f"unexpected tensors {_name_list(unexpected)}")
        raise WeightsFormatError(
            f"the weights do not match the {spec.id} v{spec.version} descriptor: "
            + "; ".join(parts)
        )


def detect_spec(names: Iterable[str]) -> UNetSpec:
    """Pick the descriptor for a set of tensor names, as OIDN does.

    The topology is large exactly when ``enc_conv1b.weight`` is present; the
    names must then be exactly that descriptor's tensor names.

    Raises:
        WeightsFormatError: names are missing or unexpected; the message lists them.
    """
    name_set = frozenset(names)
    spec = LARGE_SPEC if LARGE_MARKER_TENSOR in name_set else BASE_SPEC
    _check_tensor_names(name_set, spec)
    return spec


def _check_tensor(name: str, array: np.ndarray, shape_rule: str, ndim: int) -> None:
    if not isinstance(array, np.ndarray):
        raise WeightsFormatError(
            f"tensor '{name}' is a {type(array).__name__}; expected a numpy array"
        )
    if array.ndim != ndim:
        layout = "oihw" if ndim == 4 else "x"
        raise WeightsFormatError(
            f"tensor '{name}' has shape {array.shape}; expected {shape_rule} (layout '{layout}')"
        )
    if array.dtype.newbyteorder("=") not in _WEIGHT_DTYPES:
        raise WeightsFormatError(
            f"tensor '{name}' has dtype {array.dtype}; expected float16 or float32"
        )
    finite = np.isfinite(array)
    if not finite.all():
        raise WeightsFormatError(
            f"tensor '{name}' has {int(finite.size - np.count_nonzero(finite))} values that "
            "are not finite (NaN or Inf); expected finite weights"
        )


def _conv_weights(layer: ConvLayer, tensors: Mapping[str, np.ndarray]) -> ConvWeights:
    weight_name, bias_name = f"{layer.name}.weight", f"{layer.name}.bias"
    weight, bias = tensors[weight_name], tensors[bias_name]
    _check_tensor(weight_name, weight, "(O, I, 3, 3)", 4)
    _check_tensor(bias_name, bias, "(O,)", 1)
    out_channels, in_channels, kh, kw = weight.shape
    if (kh, kw) != (KERNEL_SIZE, KERNEL_SIZE):
        raise WeightsFormatError(
            f"tensor '{weight_name}' has a {kh}x{kw} kernel (shape {weight.shape}); expected 3x3"
        )
    if out_channels < 1 or in_channels < 1:
        raise WeightsFormatError(
            f"tensor '{weight_name}' has shape {weight.shape}; expected at least one "
            "input and one output channel"
        )
    if bias.shape != (out_channels,):
        raise WeightsFormatError(
            f"tensor '{bias_name}' has shape {bias.shape}; expected ({out_channels},) to match "
            f"the {out_channels} output channels of '{weight_name}'"
        )
    return ConvWeights(layer.name, _read_only(weight), _read_only(bias))


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def _describe(value: str, nodes: Mapping[str, ir.Node], channels: Mapping[str, int]) -> str:
    node = nodes.get(value)
    if isinstance(node, ir.Concat):
        parts = " + ".join(f"{src} {channels[src]}" for src in node.inputs)
        return f"'{value}' has {channels[value]} channels ({parts})"
    return f"'{value}' has {channels[value]} channels"


def _graph_nodes(
    spec: UNetSpec, convs: Mapping[str, ConvWeights], input_channels: int
) -> tuple[dict[str, ir.Node], dict[str, int]]:
    """The unfused graph's nodes of the descriptor's layers and every value's channels,
    each conv's input channels checked against its weights."""
    channels: dict[str, int] = {INPUT: input_channels}
    nodes: dict[str, ir.Node] = {}
    for layer in spec.layers:
        node: ir.Node
        if isinstance(layer, ConvLayer):
            weights = convs[layer.name]
            if weights.in_channels != channels[layer.input]:
                raise WeightsFormatError(
                    f"tensor '{layer.name}.weight' has {weights.in_channels} input channels but "
                    f"its input value {_describe(layer.input, nodes, channels)}"
                )
            node = ir.Conv(
                layer.name,
                layer.input,
                weights.in_channels,
                weights.out_channels,
                ir.Activation.RELU,
            )
        elif isinstance(layer, PoolLayer):
            node = ir.Pool(layer.name, layer.input, channels[layer.input])
        elif isinstance(layer, UpsampleLayer):
            node = ir.Upsample(layer.name, layer.input, channels[layer.input])
        else:
            node = ir.Concat(layer.name, layer.inputs, sum(channels[v] for v in layer.inputs))
        nodes[layer.name] = node
        channels[layer.name] = node.channels
    return nodes, channels


def validate_model(
    tensors: Mapping[str, np.ndarray],
    spec: UNetSpec,
    *,
    sha256: str | None = None,
    name: str | None = None,
) -> ValidatedModel:
    """Check tensors against a descriptor and build the unfused graph.

    Args:
        tensors: name -> array, as returned by `tza.parse_tza`.
        spec: the descriptor, usually from `detect_spec`.
        sha256: recorded on the result.
        name: recorded on the result.

    Returns:
        The validated model.

    Raises:
        WeightsFormatError: a check failed; the message names the tensor or value,
            what it has and what was expected.
    """
    _check_tensor_names(frozenset(tensors), spec)
    convs = {layer.name: _conv_weights(layer, tensors) for layer in spec.conv_layers}

    first = spec.conv_layers[0]
    input_channels = convs[first.name].in_channels
    if input_channels not in INPUT_CHANNEL_CHOICES:
        raise WeightsFormatError(
            f"tensor '{first.name}.weight' has {input_channels} input channels; expected "
            "3, 6 or 9 (3 per input image)"
        )

    nodes, channels = _graph_nodes(spec, convs, input_channels)
    output_channels = channels[spec.output]
    if output_channels != OUTPUT_CHANNELS:
        raise WeightsFormatError(
            f"tensor '{spec.output}.weight' has {output_channels} output channels; "
            f"expected {OUTPUT_CHANNELS}"
        )
    graph = ir.Graph(
        input=INPUT,
        input_channels=input_channels,
        nodes=tuple(nodes.values()),
        output=spec.output,
    )
    return ValidatedModel(
        spec=spec,
        graph=graph,
        convs=MappingProxyType(convs),
        input_channels=input_channels,
        output_channels=output_channels,
        receptive_field=spec.receptive_field,
        sha256=sha256,
        name=name,
    )


def load_model(
    source: bytes | bytearray | memoryview | str | os.PathLike[str], *, name: str | None = None
) -> ValidatedModel:
    """Parse, detect and validate a TZA blob or file.

    Args:
        source: the blob itself, or the path of a ``.tza`` file.
        name: label recorded on the model; defaults to the file stem for paths.

    Returns:
        The validated model, with the blob's SHA-256 recorded.

    Raises:
        WeightsFormatError: the blob is malformed or matches no descriptor.
        OSError: the file cannot be read.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        blob = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        blob = path.read_bytes()
        name = path.stem if name is None else name
    else:
        raise InvalidArgumentError(
            f"weights source must be bytes or a path, not {type(source).__name__}"
        )
    tensors = parse_tza(blob)
    spec = detect_spec(tensors)
    return validate_model(tensors, spec, sha256=hashlib.sha256(blob).hexdigest(), name=name)


def round_up(value: int, multiple: int) -> int:
    """Smallest multiple of ``multiple`` that is >= ``value``."""
    return -(-value // multiple) * multiple


def tile_overlap(spec: UNetSpec, alignment: int = DEFAULT_TILE_ALIGNMENT) -> int:
    """OIDN's tile overlap: half the receptive field rounded up to the tile alignment.

    96 for base/small and 112 for large with alignment 16 (section 6).
    """
    if alignment < 1:
        raise InvalidArgumentError(f"tile alignment {alignment} must be at least 1")
    return round_up(round_up(spec.receptive_field, 2) // 2, alignment)


def flops_per_pixel(model: ValidatedModel) -> float:
    """Convolution FLOPs per full-resolution pixel (multiply and add counted as 2).

    Each conv costs ``2 * I * O * 9`` per pixel of its level, and level k has
    1/4^k of the pixels. Pools, upsamples and bias adds are not counted.
    """
    levels = model.spec.levels()
    total = 0.0
    for conv in model.convs.values():
        per_pixel = 2 * conv.in_channels * conv.out_channels * KERNEL_SIZE * KERNEL_SIZE
        total += per_pixel / 4 ** levels[conv.name]
    return total
