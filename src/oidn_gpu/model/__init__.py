"""The model layer: TZA weight files, U-Net descriptors, and OIDN's choice of weights.

- `tza`: ``.tza`` bytes <-> ``{name: ndarray}``, bounds-checked.
- `unet`: versioned U-Net descriptors, detection, validation -> `ValidatedModel`.
- `weights`: which official weights a filter setup uses, and where they are on disk.

Importing this package needs only NumPy.
"""

from oidn_gpu.model.tza import parse_tza, read_tza, write_tza
from oidn_gpu.model.unet import (
    BASE_SPEC,
    LARGE_SPEC,
    ConcatLayer,
    ConvLayer,
    ConvWeights,
    Layer,
    PoolLayer,
    Topology,
    UNetSpec,
    UpsampleLayer,
    ValidatedModel,
    detect_spec,
    flops_per_pixel,
    load_model,
    tile_overlap,
    validate_model,
)
from oidn_gpu.model.weights import (
    FilterType,
    Quality,
    bundled_weights_dir,
    clear_cache,
    is_official,
    load_builtin,
    official_sha256,
    parse_filter_type,
    parse_quality,
    select_weights,
    user_weights_dir,
    weights_path,
)

__all__ = [
    "BASE_SPEC",
    "LARGE_SPEC",
    "ConcatLayer",
    "ConvLayer",
    "ConvWeights",
    "FilterType",
    "Layer",
    "PoolLayer",
    "Quality",
    "Topology",
    "UNetSpec",
    "UpsampleLayer",
    "ValidatedModel",
    "bundled_weights_dir",
    "clear_cache",
    "detect_spec",
    "flops_per_pixel",
    "is_official",
    "load_builtin",
    "load_model",
    "official_sha256",
    "parse_filter_type",
    "parse_quality",
    "parse_tza",
    "read_tza",
    "select_weights",
    "tile_overlap",
    "user_weights_dir",
    "validate_model",
    "weights_path",
    "write_tza",
]
