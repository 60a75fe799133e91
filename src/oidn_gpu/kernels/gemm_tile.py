"""`GemmTile`: the resolved tile of one implicit-GEMM kernel, and what bounds it.

A tile is the workgroup shape, the GEMM rows and output-block columns of each invocation,
the K tile (vec4 input blocks per shared tile) and how the shared tiles are laid out,
loaded and buffered; `gemm.GemmOptions.tile_for` resolves one per conv. Its workgroup
memory (`GemmTile.storage_bytes`) and its estimated live registers
(`GemmTile.register_estimate`, which depend on the ``address_mode`` of its input loads,
`AddressMode`) decide whether it can run: `tile_problems` against a device's
`DeviceLimits`, `register_problems` against `REGISTER_BUDGET` on any device.

Registers: a tile whose estimated live registers per invocation
(`GemmTile.register_estimate`: the accumulators plus the per-load state that the
incremental and base-offset address modes cache across the K loop) exceed
`REGISTER_BUDGET` does not fit any device (`GemmOptions.check_limits` / `fits` say so and
`conv_igemm.generate` refuses it): such shaders spill, and the NVIDIA Vulkan
driver did not finish compiling one in 400 s. Likewise a tile over
`MAX_TILE_STORAGE_BYTES` of workgroup memory is refused on every device.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from oidn_gpu.kernels.spec import DeviceLimits, Precision

K_TILE_BLOCKS = 8  # the default K tile (vec4 input blocks per shared tile), oidn-web's


class AddressMode(enum.Enum):
    ANALYTIC = "analytic"
    INCREMENTAL = "incremental"
    BASE_OFFSET = "base-offset"


# Live 32-bit registers one invocation may need (`GemmTile.register_estimate`). NVIDIA GPUs give
# a thread at most 255 (CUDA C++ Programming Guide, "Technical Specifications per Compute
# Capability"); the budget leaves room for addresses and temporaries. On an H200 through Vulkan
# (2026-11-29) a decoder tile estimated at 192 compiled in 5 s; one at 288 (fp32, 8 rows x 4 cols,
# 32 base-offset load slots) had not finished compiling after 400 s.
REGISTER_BUDGET = 224
_ACCUMULATOR_REGISTERS = {"fp32": 4, "fp16": 6}  # vec4<f32> (+ the vec4<f16> group partial)
_CHAIN_REGISTERS = 2  # each further vec4<f16> chain of a partial (`gemm.SUB_CHAINS`)
# Per input-load slot, cached across the K loop: analytic recomputes everything; incremental
# keeps the pixel (x, y) and its tap mask; base-offset keeps the tap mask, the pixel parity
# (x, y) and one block base per source.
_SLOT_REGISTERS = {"analytic": 0, "incremental": 3, "base-offset": 3}
_VEC4_REGISTERS = {"fp32": 4, "fp16": 2}  # one prefetched vec4 held across the FMAs
# Workgroup memory any tile may declare, whatever the device reports: on an H200 through
# Vulkan (2026-11-29) the NVIDIA compiler hung on a tile over 48 KiB.
MAX_TILE_STORAGE_BYTES = 48 * 1024


@dataclass(frozen=True)
class GemmTile:
    """The resolved tile of one implicit-GEMM kernel."""

    workgroup_x: int  # output blocks per workgroup (N)
    workgroup_y: int
    rows_per_thread: int
    padded_input: bool
    padded_weights: bool
    cols_per_thread: int = 1
    k_tile: int = K_TILE_BLOCKS
    paired: bool = False  # two vec4<f16> blocks per 16-byte shared element
    prefetch: bool = False  # the next K tile's loads held in registers
    shared_buffers: int = 1  # 2: double-buffered shared tiles (one barrier per K tile)

    @property
    def threads(self) -> int:
        return self.workgroup_x * self.workgroup_y

    @property
    def tile_m(self) -> int:
        return self.workgroup_y * self.rows_per_thread

    @property
    def tile_n(self) -> int:
        return self.workgroup_x * self.cols_per_thread

    @property
    def input_tile_size(self) -> int:
        """vec4s in the shared input tile (one hole per thread row when padded; a hole is
        a whole 16-byte element, two vec4s, when paired)."""
        hole = 2 if self.paired else 1
        return self.tile_m * self.k_tile + (hole * self.workgroup_y if self.padded_input else 0)

    @property
    def weight_tile_size(self) -> int:
        """vec4s in the shared weight tile (4 per (k, n), 5 when padded, 6 when padded
        and paired)."""
        per_kn = (6 if self.paired else 5) if self.padded_weights else 4
        return self.k_tile * self.tile_n * per_kn

    def describe(self) -> str:
        """``WGxWG x rows x cols, K k_tile`` (error messages, bench tables)."""
        return (
            f"{self.workgroup_x}x{self.workgroup_y} x {self.rows_per_thread} rows "
            f"x {self.cols_per_thread} cols, K tile {self.k_tile}"
            + (", paired" if self.paired else "")
            + (", prefetch" if self.prefetch else "")
            + (", double-buffered" if self.shared_buffers == 2 else "")
        )

    def storage_bytes(self, precision: Precision) -> int:
        per_buffer = (self.input_tile_size + self.weight_tile_size) * 4 * precision.itemsize
        return per_buffer * self.shared_buffers

    @property
    def input_slots(self) -> int:
        """Input vec4s each invocation loads per K tile."""
        return self.tile_m * self.k_tile // self.threads

    @property
    def weight_slots(self) -> int:
        """Weight vec4s each invocation loads per K tile."""
        return self.k_tile * self.tile_n * 4 // self.threads

    def register_estimate(
        self, precision: Precision, address_mode: AddressMode, sources: int = 2, chains: int = 1
    ) -> int:
        """Live 32-bit registers per invocation across the K loop (see `REGISTER_BUDGET`).

        ``sources``: inputs of the conv (2 for a fused decoder, the worst case); ``chains``:
        f16 chains per partial (`gemm.sub_chains`).
        """
        accumulators = self.rows_per_thread * self.cols_per_thread
        per_slot = _SLOT_REGISTERS[address_mode.value]
        if address_mode is AddressMode.BASE_OFFSET:
            per_slot += sources
        prefetched = 0
        if self.prefetch:
            prefetched = (self.input_slots + self.weight_slots) * _VEC4_REGISTERS[precision.value]
        per_accumulator = _ACCUMULATOR_REGISTERS[precision.value] + (chains - 1) * _CHAIN_REGISTERS
        return accumulators * per_accumulator + self.input_slots * per_slot + prefetched


def tile_problems(
    tile: GemmTile,
    precision: Precision,
    limits: DeviceLimits,
    features: bool = True,
    address_mode: AddressMode | None = None,
    sources: int = 2,
    chains: int = 1,
) -> list[str]:
    """Why ``tile`` cannot run with ``limits`` (the register budget too, given an
    ``address_mode``, the conv's number of ``sources`` and the f16 ``chains`` per partial)."""
    problems = (
        register_problems(tile, precision, address_mode, sources, chains) if address_mode else []
    )
    if tile.workgroup_x > limits.max_workgroup_size_x:
        problems.append(f"workgroup x {tile.workgroup_x} > max {limits.max_workgroup_size_x}")
    if tile.workgroup_y > limits.max_workgroup_size_y:
        problems.append(f"workgroup y {tile.workgroup_y} > max {limits.max_workgroup_size_y}")
    if tile.threads > limits.max_invocations_per_workgroup:
        problems.append(f"{tile.threads} invocations > max {limits.max_invocations_per_workgroup}")
    need = tile.storage_bytes(precision)
    cap = min(limits.max_workgroup_storage_bytes, MAX_TILE_STORAGE_BYTES)
    if need > cap:
        problems.append(f"{need} bytes of workgroup storage > max {cap}")
    if features and precision is Precision.FP16 and not limits.shader_f16:
        problems.append("fp16 needs the shader-f16 feature")
    return problems


def register_problems(
    tile: GemmTile,
    precision: Precision,
    address_mode: AddressMode,
    sources: int = 2,
    chains: int = 1,
) -> list[str]:
    """The register-budget problem of ``tile`` (empty when it is within `REGISTER_BUDGET`)."""
    need = tile.register_estimate(precision, address_mode, sources, chains)
    if need <= REGISTER_BUDGET:
        return []
    return [
        f"about {need} registers per invocation > {REGISTER_BUDGET} "
        f"({tile.rows_per_thread}x{tile.cols_per_thread} accumulators, "
        f"{tile.input_slots} {address_mode.value} load slots); lower rows_per_thread, "
        "cols_per_thread or k_tile, widen the workgroup, or use address_mode='analytic'"
    ]
