"""`GemmOptions`: the tuning options of the implicit-GEMM conv (`conv_igemm`) and its companions.

Every option is a closed set (an enum, or a tuple of allowed ints). Strings are
accepted and coerced (``GemmOptions(weight_layout="output-major")``); any invalid
value raises `InvalidArgumentError` naming the option, the value and the
allowed values. `GemmOptions.check_limits` / `fits` check a tile against a
`DeviceLimits`.

Results: every option but the accumulations (``accumulation``, ``input_accumulation``,
``final_accumulation``) and ``decoder_form`` is a performance knob. By construction
each output keeps one summation: the bias, then ``k = tap * IB + ib`` in increasing
order, each input vec4's four lanes as four FMAs in lane order; fp16 sums as
``accumulation`` says (``f32``, the default: every product in f32; ``f16-chains``: 2
input blocks per f16 chain, the large-GPU default between the first and final layers;
``f16-partials``: 8 blocks per f16 partial whatever the K tile, oidn-web's grouping) and
folds the chains into the f32 accumulator in K order. No other option reorders that
sequence: tiles, columns,
K tiles and workgroup shapes only decide which invocation computes an output
and when its operands reach workgroup memory; ``accumulation_order`` swaps the
loops over rows and K steps, not the order of one accumulator's FMAs; load,
address and layout modes fetch the same values (``shared_load`` packs two of
them per shared element, ``prefetch`` loads them one K tile early); ``pool_layout`` orders
workgroups, and the fused pool's max (in registers, or across two invocations
with 2 rows per thread) is exact; ``final_layer`` picks between final-layer
kernels that sum in the same order, and ``final_pixels`` and ``final_patch`` only
decide which invocation sums a pixel and where its inputs sit in workgroup memory (each
pixel keeps its own accumulator, from the bias, in the same order). So every value
gives the default's bits, in fp32 and in fp16 (tests/gpu/test_gemm_sweep.py: every
value of every option on a whole network on lavapipe; on an NVIDIA H200 every variant of
bench/gemm_sweep.py gave the default's bits at 1080p). WGSL does not let the
compiler reassociate these sums, so this holds on any conforming device.

Options (default first where it is fixed):

- ``tile_policy``: None = FIXED when ``workgroup_size`` is given, else
  OUTPUT_ALIGNED. OUTPUT_ALIGNED: columns per thread halve while the tile is
  wider than the output blocks; then a workgroup x of 8 widens to 16 when the
  output blocks are a multiple of 16 x cols_per_thread and the tile fits. FIXED:
  the tile of ``workgroup_size``, ``rows_per_thread`` and ``cols_per_thread`` on
  every layer. BALANCED: as OUTPUT_ALIGNED; a workgroup that is not widened gets
  twice the invocations with half the rows each, same tile (found faster on an
  H200 for layers whose output blocks are not a multiple of 16).
- ``decoder_load``: PER_LOAD (choose the source in each load) | SOURCE_FIRST
  (choose the source once per K tile, then load from it).
- ``decoder_form``: FULL | PARITY (`DecoderForm`, `conv_parity`: upsampled sources through
  2x2 low-resolution taps per output parity; its own K order and folded weights and bits).
- ``pool_layout``: CHANNELS | SPATIAL. In the fused conv+pool GEMM (the default
  graph) it orders the workgroups: CHANNELS makes the output-block tiles of one
  row tile neighbours (a linear x, long grids continue in z), SPATIAL walks row
  tiles in x and output-block tiles in y. In the stand-alone max pool
  (``WgpuExecutor(conv_pool=False)``) CHANNELS linearizes x and channel blocks
  (wide rows continue in z) and SPATIAL dispatches (x, y, channel block).
- ``shared_layout``: None = PADDED for fp32, PADDED_INPUT for fp16 |
  LINEAR | PADDED | PADDED_INPUT | PADDED_WEIGHTS (holes in workgroup arrays).
- ``accumulation_order``: K_MAJOR (K tile outer, rows inner) | ROW_MAJOR.
- ``final_layer``: SHARED_AUTO | DIRECT | SHARED_INPUT | SHARED_INPUT_WEIGHTS
  (the final RGB conv, see `final_rgb`).
- ``final_pixels``: 1 | 2 | 4 output pixels per invocation of the final RGB conv's
  shared variants, ``WG`` pixels apart along x (the workgroup's pixel tile and its
  staged patch widen accordingly; each weight load feeds every pixel). Fewer when the
  wider patch does not fit the device (`final_rgb.resolve`).
- ``final_patch``: LINEAR | PADDED. The final RGB conv's staged patch holds a pixel's
  input blocks at a stride of ``IB`` vec4s, or (PADDED) of ``IB + 1`` when ``IB`` is
  even, and in fp16 pads each patch row to 8 modulo 16 vec4s, so that neighbouring
  pixels and rows fall in different workgroup-memory banks (`conv_spatial.patch_layout`).
- ``load_mode``: NATIVE | PACKED_WEIGHTS | PACKED_ALL (fp16 loads through
  ``vec2<u32>`` + bitcast; no effect on fp32).
- ``address_mode``: INCREMENTAL | ANALYTIC | BASE_OFFSET.
- ``weight_layout``: K_MAJOR | OUTPUT_MAJOR (`WeightLayout`).
- ``rows_per_thread``: 8 | 2 | 4 GEMM rows per invocation. With a fused pool, 4
  rows hold one pooled pixel's quad; 2 rows split a quad over two invocations,
  which meet in workgroup memory (`conv_igemm`).
- ``cols_per_thread``: 1 | 2 | 4 output vec4 blocks per invocation (a register tile
  of rows x cols named accumulators; the columns of one invocation are ``WG_X``
  blocks apart, so the workgroup tile is ``WG_X * cols`` blocks wide).
- ``k_tile``: 8 | 16 vec4 input blocks per shared K tile (one barrier pair per K
  tile). Under ``f16-partials`` the partial grouping stays 8 blocks (`F16_GROUP_BLOCKS`,
  oidn-web's fixed K tile): a K tile of 16 folds its partials twice, so the bits do not
  change.
- ``workgroup_size``: None = (8, 8); x in {4, 8, 16}, y in {4, 8, 16}. Given
  explicitly, it also makes FIXED the default tile policy.
- ``shared_load``: BLOCK | PAIR. PAIR (fp16 only; no effect on fp32, whose vec4s are
  16 bytes already): the shared tiles hold two ``vec4<f16>`` blocks per 16-byte
  ``vec4<u32>`` element (two consecutive K blocks of a row; two weight vec4s of
  one (k, output block)) and the K loop reads both with one load and two bitcasts,
  halving the workgroup-memory load instructions per FMA. Every product and
  its place in the sum are unchanged.
- ``accumulation``: F32 | F16_CHAINS | F16_PARTIALS | F16_CHAINS16 | F16_PAIRS | F16_LANES
  (`Accumulation`; fp16 only). How the fp16 kernels sum their products: in f32 (the f16
  operands widened exactly; the most accurate), in f16 chains of 8 or 16 products added to
  f32, in f16 partials of 32 products (oidn-web's arithmetic: the fastest, and the farthest
  from OIDN's CPU output), or in partials of 32 made of 2 or 4 f16 chains added in f16.
  The final-layer and direct kernels sum in f32 under F32, else in f16 partials of 4
  products. Each value gives its own bits, the same under every other option.
- ``input_accumulation``, ``final_accumulation``: None | an `Accumulation`. When set, the
  accumulation of the convs that read only the network input (the first) / of the final
  layer, the two layers where f16 rounding costs the most accuracy per multiply-add;
  ``accumulation`` stays that of the others (`GemmOptions.for_layer`).
- ``prefetch``: NONE | REGISTERS | SHARED. REGISTERS: the K loop issues the global
  loads of the next K tile into registers before computing the current one (register
  double buffering: memory latency overlaps the FMAs; one shared tile, the same two
  barriers), at the cost of the loaded vec4s' registers (`GemmTile.register_estimate`).
  SHARED: the same registers, and two shared tiles: while K tile k computes from one,
  tile k + 1 is stored into the other and tile k + 2 loaded into registers, with one
  barrier per K tile (twice the workgroup memory).

The resolved tile and its bounds (workgroup memory, `gemm_tile.REGISTER_BUDGET`) are
`gemm_tile.GemmTile`: a tile over them is refused on every device.

`default_options(limits)` is the default of a device: `GemmOptions()` (the
WebGPU runtime's tile defaults, tuned on Apple GPUs; every fp16 product summed in f32,
where the WebGPU runtime sums f16 partials of 32 products) unless
``limits.large_gpu`` (a discrete GPU with large limits), which gets `LARGE_GPU_OPTIONS`
(tuned on an NVIDIA H200: the BALANCED tile policy; in fp16 the decoder convs' parity form,
f16 chains of 8 products into f32, the first and final layers in f32; docs/benchmarks.md).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields, replace

from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.kernels.gemm_tile import (
    K_TILE_BLOCKS,
    AddressMode,
    GemmTile,
    register_problems,
    tile_problems,
)
from oidn_gpu.kernels.spec import DecoderForm, DeviceLimits, Precision, WeightLayout

# vec4 input blocks per f16 partial (accumulation "f16-partials"): oidn-web's fixed K tile
F16_GROUP_BLOCKS = K_TILE_BLOCKS
F16_CHAIN_BLOCKS = 2  # vec4 input blocks (8 products) per f16 chain (accumulation "f16-chains")
F16_CHAIN16_BLOCKS = 4  # vec4 input blocks (16 products) per f16 chain ("f16-chains16")


class Accumulation(enum.Enum):
    """How an fp16 conv sums its products (fp32 kernels always sum in f32).

    F32: every product in f32 (the f16 weights and activations widened exactly; f16
    storage stays). F16_CHAINS: 8 products (2 input blocks) per f16 chain, each chain
    added to the f32 accumulator. F16_PARTIALS: 32 products (8 blocks) per f16 partial,
    the fastest and least accurate (`F16_GROUP_BLOCKS`). F16_CHAINS16: 16 products (4
    blocks) per f16 chain added to f32. F16_PAIRS: the 32 products of a partial in two f16
    chains of 16 (even and odd input blocks), added in f16 before the f32 fold. F16_LANES:
    in four f16 chains of 8 (one per lane of the input vec4s), added in f16 as
    ``(x + y) + (z + w)`` before the fold (`SUB_CHAINS`).
    """

    F32 = "f32"
    F16_CHAINS = "f16-chains"
    F16_PARTIALS = "f16-partials"
    F16_CHAINS16 = "f16-chains16"
    F16_PAIRS = "f16-pairs"
    F16_LANES = "f16-lanes"


# f16 chains per partial, added in f16 before the f32 fold (1 for the other accumulations)
SUB_CHAINS = {Accumulation.F16_PAIRS: 2, Accumulation.F16_LANES: 4}


def partial_blocks(accumulation: Accumulation, precision: Precision) -> int | None:
    """Input blocks per f16 partial of an implicit-GEMM conv; None when it sums in f32."""
    if precision is not Precision.FP16 or accumulation is Accumulation.F32:
        return None
    if accumulation is Accumulation.F16_CHAINS:
        return F16_CHAIN_BLOCKS
    if accumulation is Accumulation.F16_CHAINS16:
        return F16_CHAIN16_BLOCKS
    return F16_GROUP_BLOCKS


def sub_chains(accumulation: Accumulation, precision: Precision) -> int:
    """f16 chains per partial of an implicit-GEMM conv (`SUB_CHAINS`; 1 in fp32)."""
    if precision is not Precision.FP16:
        return 1
    return SUB_CHAINS.get(accumulation, 1)


class TilePolicy(enum.Enum):
    FIXED = "fixed"
    OUTPUT_ALIGNED = "output-aligned"
    BALANCED = "balanced"


class DecoderLoad(enum.Enum):
    PER_LOAD = "per-load"
    SOURCE_FIRST = "source-first"


class PoolLayout(enum.Enum):
    SPATIAL = "spatial"
    CHANNELS = "channels"


class SharedLayout(enum.Enum):
    LINEAR = "linear"
    PADDED = "padded"
    PADDED_INPUT = "padded-input"
    PADDED_WEIGHTS = "padded-weights"


class AccumulationOrder(enum.Enum):
    K_MAJOR = "k-major"
    ROW_MAJOR = "row-major"


class FinalLayer(enum.Enum):
    DIRECT = "direct"
    SHARED_INPUT = "shared-input"
    SHARED_INPUT_WEIGHTS = "shared-input-weights"
    SHARED_AUTO = "shared-auto"


class FinalPatch(enum.Enum):
    LINEAR = "linear"
    PADDED = "padded"


class LoadMode(enum.Enum):
    NATIVE = "native"
    PACKED_WEIGHTS = "packed-weights"
    PACKED_ALL = "packed-all"


class SharedLoad(enum.Enum):
    BLOCK = "block"
    PAIR = "pair"


class Prefetch(enum.Enum):
    NONE = "none"
    REGISTERS = "registers"
    SHARED = "shared"


ROWS_PER_THREAD = (2, 4, 8)
COLS_PER_THREAD = (1, 2, 4)
K_TILES = (8, 16)
WORKGROUP_X = (4, 8, 16)
WORKGROUP_Y = (4, 8, 16)
FINAL_PIXELS = (1, 2, 4)
DEFAULT_WORKGROUP_SIZE = (8, 8)

_ENUM_OPTIONS: dict[str, type[enum.Enum]] = {
    "tile_policy": TilePolicy,
    "decoder_load": DecoderLoad,
    "decoder_form": DecoderForm,
    "pool_layout": PoolLayout,
    "shared_layout": SharedLayout,
    "accumulation_order": AccumulationOrder,
    "final_layer": FinalLayer,
    "final_patch": FinalPatch,
    "load_mode": LoadMode,
    "address_mode": AddressMode,
    "weight_layout": WeightLayout,
    "shared_load": SharedLoad,
    "prefetch": Prefetch,
    "accumulation": Accumulation,
    "input_accumulation": Accumulation,
    "final_accumulation": Accumulation,
}
_LAYER_ACCUMULATIONS = ("input_accumulation", "final_accumulation")
_OPTIONAL = ("shared_layout", *_LAYER_ACCUMULATIONS)


def _coerce(option: str, value: object, cls: type[enum.Enum]) -> enum.Enum:
    if isinstance(value, cls):
        return value
    for member in cls:
        if value == member.value or (
            isinstance(value, str) and value.upper().replace("-", "_") == member.name
        ):
            return member
    allowed = ", ".join(repr(m.value) for m in cls)
    raise InvalidArgumentError(f"invalid GEMM option {option}={value!r}; allowed values: {allowed}")


@dataclass(frozen=True)
class GemmOptions:
    """Implicit-GEMM tuning options (see module doc). Frozen, validated, hashable."""

    tile_policy: TilePolicy | None = None
    decoder_load: DecoderLoad = DecoderLoad.PER_LOAD
    pool_layout: PoolLayout = PoolLayout.CHANNELS
    shared_layout: SharedLayout | None = None
    accumulation_order: AccumulationOrder = AccumulationOrder.K_MAJOR
    final_layer: FinalLayer = FinalLayer.SHARED_AUTO
    load_mode: LoadMode = LoadMode.NATIVE
    address_mode: AddressMode = AddressMode.INCREMENTAL
    weight_layout: WeightLayout = WeightLayout.K_MAJOR
    rows_per_thread: int = 8
    workgroup_size: tuple[int, int] | None = None
    cols_per_thread: int = 1
    k_tile: int = K_TILE_BLOCKS
    shared_load: SharedLoad = SharedLoad.BLOCK
    prefetch: Prefetch = Prefetch.NONE
    final_pixels: int = 1
    final_patch: FinalPatch = FinalPatch.LINEAR
    accumulation: Accumulation = Accumulation.F32
    input_accumulation: Accumulation | None = None
    final_accumulation: Accumulation | None = None
    decoder_form: DecoderForm = DecoderForm.FULL

    def __post_init__(self) -> None:
        # An explicit workgroup size stays fixed unless a tile policy is given too.
        if self.tile_policy is None:
            fixed = self.workgroup_size is not None
            object.__setattr__(
                self, "tile_policy", TilePolicy.FIXED if fixed else TilePolicy.OUTPUT_ALIGNED
            )
        if self.workgroup_size is None:
            object.__setattr__(self, "workgroup_size", DEFAULT_WORKGROUP_SIZE)
        for name, cls in _ENUM_OPTIONS.items():
            value = getattr(self, name)
            if name in _OPTIONAL and value is None:
                continue
            object.__setattr__(self, name, _coerce(name, value, cls))
        for name, allowed in (
            ("rows_per_thread", ROWS_PER_THREAD),
            ("cols_per_thread", COLS_PER_THREAD),
            ("k_tile", K_TILES),
            ("final_pixels", FINAL_PIXELS),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or value not in allowed:
                raise InvalidArgumentError(
                    f"invalid GEMM option {name}={value!r}; "
                    f"allowed values: {', '.join(map(str, allowed))}"
                )
            object.__setattr__(self, name, int(value))
        ws = self.workgroup_size
        try:
            ws = tuple(ws)  # type: ignore[arg-type]
        except TypeError:
            ws = None  # type: ignore[assignment]
        if (
            ws is None
            or len(ws) != 2
            or any(isinstance(v, bool) for v in ws)
            or ws[0] not in WORKGROUP_X
            or ws[1] not in WORKGROUP_Y
        ):
            raise InvalidArgumentError(
                f"invalid GEMM option workgroup_size={self.workgroup_size!r}; allowed values: "
                f"(x, y) with x in {WORKGROUP_X} and y in {WORKGROUP_Y}"
            )
        object.__setattr__(self, "workgroup_size", (int(ws[0]), int(ws[1])))

    # ----------------------------------------------------------------- resolution

    def shared_layout_for(self, precision: Precision) -> SharedLayout:
        """The shared layout in effect (``None`` resolves by precision)."""
        if self.shared_layout is not None:
            return self.shared_layout
        return SharedLayout.PADDED_INPUT if precision is Precision.FP16 else SharedLayout.PADDED

    def resolved(self, precision: Precision) -> GemmOptions:
        """These options with ``shared_layout`` resolved for ``precision`` (same kernels)."""
        return replace(self, shared_layout=self.shared_layout_for(precision))

    def base_tile(self, precision: Precision) -> GemmTile:
        """The tile of ``workgroup_size`` and ``rows_per_thread``, before the tile policy."""
        layout = self.shared_layout_for(precision)
        return GemmTile(
            workgroup_x=self.workgroup_size[0],
            workgroup_y=self.workgroup_size[1],
            rows_per_thread=self.rows_per_thread,
            padded_input=layout in (SharedLayout.PADDED, SharedLayout.PADDED_INPUT),
            padded_weights=layout in (SharedLayout.PADDED, SharedLayout.PADDED_WEIGHTS),
            cols_per_thread=self.cols_per_thread,
            k_tile=self.k_tile,
            paired=self.shared_load is SharedLoad.PAIR and precision is Precision.FP16,
            prefetch=self.prefetch is not Prefetch.NONE,
            shared_buffers=2 if self.prefetch is Prefetch.SHARED else 1,
        )

    def tile_for(self, precision: Precision, out_blocks: int, limits: DeviceLimits) -> GemmTile:
        """The tile a conv with ``out_blocks`` output blocks uses under ``tile_policy``.

        OUTPUT_ALIGNED first halves ``cols_per_thread`` while the tile is wider than
        ``out_blocks``, then widens an 8-wide workgroup to 16 when the wider tile's
        blocks (``16 * cols``) divide ``out_blocks`` and it fits ``limits``. BALANCED:
        the same, and when an 8-wide workgroup is not widened, its y doubles and its
        rows per thread halve from 8 to 4 (same tile, twice the invocations) when that
        fits. FIXED: the base tile.
        """
        base = self.base_tile(precision)
        if self.tile_policy is TilePolicy.FIXED or out_blocks <= 0:
            return base
        while base.cols_per_thread > 1 and base.tile_n > out_blocks:
            base = replace(base, cols_per_thread=base.cols_per_thread // 2)
        if base.workgroup_x == 8 and out_blocks % (16 * base.cols_per_thread) == 0:
            wide = replace(base, workgroup_x=16)
            if not tile_problems(wide, precision, limits, features=False):
                return wide
        if (
            self.tile_policy is TilePolicy.BALANCED
            and base.workgroup_x == 8
            and base.workgroup_y * 2 in WORKGROUP_Y
            and base.rows_per_thread >= 8
        ):
            tall = replace(
                base,
                workgroup_y=base.workgroup_y * 2,
                rows_per_thread=base.rows_per_thread // 2,
            )
            if not tile_problems(tall, precision, limits, features=False):
                return tall
        return base

    # ----------------------------------------------------------------- limits

    def problems(self, precision: Precision, limits: DeviceLimits) -> list[str]:
        """Why the base tile cannot run on a device with ``limits`` (empty when it can)."""
        return tile_problems(
            self.base_tile(precision),
            precision,
            limits,
            address_mode=self.address_mode,
            chains=sub_chains(self.accumulation, precision),
        )

    def check_limits(self, precision: Precision, limits: DeviceLimits) -> None:
        """Raise `UnsupportedDeviceError` when the base tile exceeds ``limits``."""
        problems = self.problems(precision, limits)
        if problems:
            raise UnsupportedDeviceError(
                f"GEMM tile {self.base_tile(precision).describe()} ({precision.value}) "
                f"does not fit this device: {'; '.join(problems)}"
            )

    def fits(self, precision: Precision, limits: DeviceLimits) -> bool:
        return not self.problems(precision, limits)

    def within_register_budget(self, precision: Precision) -> bool:
        """Whether the base tile (the most registers any tile policy gives) is within
        `REGISTER_BUDGET`, whatever the device."""
        return not register_problems(
            self.base_tile(precision),
            precision,
            self.address_mode,
            chains=sub_chains(self.accumulation, precision),
        )

    def for_layer(self, input_conv: bool, final: bool) -> GemmOptions:
        """The options one conv's kernel is made with: ``accumulation`` replaced by
        ``input_accumulation`` for a conv of the network input alone (``input_conv``) and by
        ``final_accumulation`` for the final layer (``final``) where they are set; neither
        is set in the result."""
        if self.input_accumulation is None and self.final_accumulation is None:
            return self
        chosen = self.final_accumulation if final else None
        if input_conv and chosen is None:
            chosen = self.input_accumulation
        return replace(
            self,
            accumulation=chosen or self.accumulation,
            input_accumulation=None,
            final_accumulation=None,
        )

    def describe(self) -> str:
        """Deterministic text of every option (cache keys, shader headers); the per-layer
        accumulations are left out where unset (a kernel's own options never set them), the
        decoder form where FULL."""
        parts = []
        for f in fields(self):
            v = getattr(self, f.name)
            if (f.name in _LAYER_ACCUMULATIONS and v is None) or v is DecoderForm.FULL:
                continue
            if isinstance(v, enum.Enum):
                v = v.value
            elif isinstance(v, tuple):
                v = "x".join(map(str, v))
            parts.append(f"{f.name}={v}")
        return " ".join(parts)


def option_values() -> dict[str, tuple[object, ...]]:
    """Every allowed value of every option (for sweeps and docs)."""
    out: dict[str, tuple[object, ...]] = {name: tuple(cls) for name, cls in _ENUM_OPTIONS.items()}
    out["rows_per_thread"] = ROWS_PER_THREAD
    out["workgroup_size"] = tuple((x, y) for x in WORKGROUP_X for y in WORKGROUP_Y)
    out["cols_per_thread"] = COLS_PER_THREAD
    out["k_tile"] = K_TILES
    out["final_pixels"] = FINAL_PIXELS
    return out


# The defaults of large GPUs (`DeviceLimits.large_gpu`) per precision, from
# bench/gemm_sweep.py on an NVIDIA H200 (docs/benchmarks.md). Small GPUs keep the defaults
# of `GemmOptions()`.
# On the H200 (1080p rt_hdr_alb_nrm, network GPU median of 20 runs, 2026-11-29) the BALANCED
# tile policy took fp16 from 13.15 to 12.47 ms and fp32 from 25.33 to 22.40 ms; wider
# register tiles (cols_per_thread 2, 4) and K tiles of 16 were slower there.
# The pool layout made no difference there (2026-11-30: fp16 12.48 ms spatial vs 12.49 channels).
# The 17-variant sweep of 2026-11-30 (docs/benchmarks.md, same model and size):
# fp16 balanced 12.29 ms -> with paired shared loads in padded tiles 11.79 ms (the fastest
# of all and within 0.001 ms of the per-layer best); fp32 balanced 21.08 ms -> with the next
# K tile's loads prefetched into registers 17.88 ms. Both give the same bits as before.
# The final RGB conv (docs/benchmarks.md, 2026-11-30): a padded staged patch took fp32's
# dec_conv0 from 0.897 to 0.541 ms (network 17.90 -> 17.54 ms).
# The fp16 accumulation (docs/benchmarks.md, 2026-12-01, 1080p e2e GPU median of 15 runs):
# f16-partials 11.93 ms, f16-chains 14.82 ms, f32 18.86 ms; every other device sums in f32. The
# final layer in f32 (2 pixels per invocation, padded patch): 11.96 ms ("the frontier").
# The decoder convs' parity form (bench/fp16_accumulation_h200.py --set 3, 2026-12-01, median
# of 30 runs) took that default from 11.96 to 9.21 ms (dec_conv1a 3.81 -> 2.07 ms) and made the
# accurate sums fit: f16-chains16 with the first and final layers in f32 10.12 ms (0.63x the
# partials' distance on the full caustics frame by the emulator), with the final layer alone
# 9.89 ms (0.72x); f32 everywhere 14.44 ms ("fp16 accumulation: the decoder parity form").
# The full-size frames on the H200 itself (docs/benchmarks.md, 2026-12-01; its native f16
# FMA rounds once, unlike the emulation) put f16 chains of 8 first: 2.81e-3 from Intel OIDN CPU
# on the caustics frame (0.73x the partials' 3.84e-3; chains of 16 3.34e-3, f16-pairs 3.07e-3,
# f16-lanes 3.22e-3, each with the first and final layers in f32) at 11.50 ms, the most
# accurate sum within 12 ms ("The decoder parity form on full-size frames").
LARGE_GPU_OPTIONS: dict[Precision, GemmOptions] = {
    Precision.FP16: GemmOptions(
        tile_policy=TilePolicy.BALANCED,
        shared_load=SharedLoad.PAIR,
        shared_layout=SharedLayout.PADDED,
        accumulation=Accumulation.F16_CHAINS,
        input_accumulation=Accumulation.F32,
        final_accumulation=Accumulation.F32,
        decoder_form=DecoderForm.PARITY,
        final_patch=FinalPatch.PADDED,
        final_pixels=2,
    ),
    Precision.FP32: GemmOptions(
        tile_policy=TilePolicy.BALANCED,
        prefetch=Prefetch.REGISTERS,
        final_patch=FinalPatch.PADDED,
    ),
}


def default_options(limits: DeviceLimits | None, precision: Precision | None = None) -> GemmOptions:
    """The default GEMM options of a device and precision.

    `LARGE_GPU_OPTIONS` when ``limits.large_gpu`` and that tile fits ``limits``;
    `GemmOptions()` otherwise (small GPUs, lavapipe, no limits).
    """
    if limits is None or not limits.large_gpu or precision is None:
        return GemmOptions()
    options = LARGE_GPU_OPTIONS.get(Precision(precision))
    if options is None or not options.fits(precision, limits):
        return GemmOptions()
    return options
