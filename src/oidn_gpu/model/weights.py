"""Which official weights OIDN uses for a filter setup, and where they are on disk.

Selection follows ``core/rt_filter.cpp``, ``core/rtlightmap_filter.cpp`` and
``core/unet_filter.cpp`` (``getWeights``), section 3 of ``oidn-semantics.md``:
each input combination maps to a model with up to three blobs (base, small,
large) and the quality picks one of them. Invalid setups raise
`InvalidOperationError` with OIDN's verbatim message, checked in OIDN's order
(verified against OIDN 2.5.1: missing input, then hdr+srgb, then the input
combination, then the per-mode flags).

Location: all 23 official files ship inside the package
(``oidn_gpu/data/weights``). A user directory is searched first: the
``weights_dir`` argument, else ``$OIDN_GPU_WEIGHTS``, else a per-user cache
folder (`user_weights_dir`, where ``oidn-gpu weights fetch`` puts the three
large files), then the bundled one. Files with an official name are checked against the
official SHA-256 when loaded.
"""

from __future__ import annotations

import enum
import hashlib
import os
import sys
import threading
from importlib import resources
from pathlib import Path

from oidn_gpu.errors import (
    InvalidArgumentError,
    InvalidOperationError,
    WeightsFormatError,
    WeightsNotFoundError,
)
from oidn_gpu.model.unet import ValidatedModel, load_model

WEIGHTS_ENV_VAR = "OIDN_GPU_WEIGHTS"
"""Environment variable naming the directory that holds the large weights."""

WEIGHTS_SUFFIX = ".tza"

LARGE_WEIGHTS_SHA256 = {
    # From SHA256SUMS of the official weights (github.com/RenderKit/oidn-weights,
    # as shipped with OIDN 2.5.1); also listed in the package's SHA256SUMS.
    "rt_alb_large": "a8efbe6eed511f41c8f5ff9145923214cefb0703cf91a3b00a1dc131ade1600a",
    "rt_hdr_calb_cnrm_large": "08130cdc4f33b7a513d0073757f089ac830f900613bb5bad72ca42c52b934465",
    "rt_nrm_large": "8ac7705ec5ac303116b40ad2f0880cd741ed1f4280828bf2f18f7635c3377257",
}

# OIDN's verbatim messages (core/unet_filter.cpp, core/rt_filter.cpp).
MSG_NO_INPUT = "input image not specified"
MSG_HDR_SRGB = "hdr and srgb modes cannot be enabled at the same time"
MSG_DIRECTIONAL = "directional and hdr/srgb modes cannot be enabled at the same time"
MSG_ALBEDO_HDR = "hdr mode is not supported for albedo filtering"
MSG_NORMAL_MODES = "hdr and srgb modes are not supported for normal filtering"
MSG_INVALID_COMBINATION = "invalid combination of input features"
MSG_UNSUPPORTED_COMBINATION = "unsupported combination of input features"


class FilterType(enum.Enum):
    """OIDN's filter types."""

    RT = "RT"
    RT_LIGHTMAP = "RTLightmap"


class Quality(enum.Enum):
    """OIDN's quality modes (``OIDNQuality``), valued by their public names."""

    FAST = "fast"
    BALANCED = "balanced"
    HIGH = "high"


_QUALITY_BY_NAME = {
    "fast": Quality.FAST,
    "balanced": Quality.BALANCED,
    "high": Quality.HIGH,
    "default": Quality.HIGH,  # OIDN_QUALITY_DEFAULT means high
}
_QUALITY_BY_OIDN_INT = {0: Quality.HIGH, 4: Quality.FAST, 5: Quality.BALANCED, 6: Quality.HIGH}


def parse_quality(quality: Quality | str | int) -> Quality:
    """Normalize a quality given as enum, name (``'default'`` = high) or OIDN int (0/4/5/6).

    Raises:
        InvalidArgumentError: unknown quality, e.g.
            ``unknown filter quality mode: 'ultra'; expected 'fast', 'balanced' or 'high'``.
    """
    if isinstance(quality, Quality):
        return quality
    found = None
    if isinstance(quality, str):
        found = _QUALITY_BY_NAME.get(quality.lower())
    elif isinstance(quality, int) and not isinstance(quality, bool):
        found = _QUALITY_BY_OIDN_INT.get(quality)
    if found is None:
        raise InvalidArgumentError(
            f"unknown filter quality mode: {quality!r}; expected 'fast', 'balanced' or 'high'"
        )
    return found


def parse_filter_type(filter_type: FilterType | str) -> FilterType:
    """Normalize a filter type given as enum or OIDN name (``'RT'``, ``'RTLightmap'``).

    Raises:
        InvalidArgumentError: ``unknown filter type: 'X'; expected 'RT' or 'RTLightmap'``.
    """
    if isinstance(filter_type, FilterType):
        return filter_type
    for member in FilterType:
        if filter_type == member.value:
            return member
    raise InvalidArgumentError(
        f"unknown filter type: {filter_type!r}; expected 'RT' or 'RTLightmap'"
    )


def _pick(quality: Quality, base: str, *, small: bool = False, large: bool = False) -> str:
    """OIDN's quality rule: high takes large if it exists, fast takes small if it exists."""
    if quality is Quality.HIGH and large:
        return f"{base}_large"
    if quality is Quality.FAST and small:
        return f"{base}_small"
    return base


def select_weights(
    filter_type: FilterType | str,
    *,
    color: bool = False,
    albedo: bool = False,
    normal: bool = False,
    hdr: bool = False,
    srgb: bool = False,
    clean_aux: bool = False,
    quality: Quality | str | int = Quality.HIGH,
    directional: bool = False,
) -> str:
    """Name of the official weights OIDN uses for a filter setup (without ``.tza``).

    Args:
        filter_type: ``'RT'`` or ``'RTLightmap'``.
        color, albedo, normal: which input images are given.
        hdr, srgb: RT mode flags. RTLightmap implies ``hdr = not directional``; an
            explicit ``srgb`` there, or ``hdr`` with ``directional``, is rejected
            (OIDN itself ignores these unknown RTLightmap parameters with a warning).
        clean_aux: the auxiliary images are noise-free (RT with albedo and normal).
        quality: ``'fast'``, ``'balanced'``, ``'high'``/``'default'`` or 0/4/5/6.
        directional: RTLightmap only: directional lightmap coefficients.

    Returns:
        A weights name such as ``'rt_hdr_calb_cnrm_large'``.

    Raises:
        InvalidOperationError: the setup is invalid (OIDN's verbatim messages).
        InvalidArgumentError: unknown filter type or quality, or ``directional`` for RT.
    """
    kind = parse_filter_type(filter_type)
    level = parse_quality(quality)
    if kind is FilterType.RT_LIGHTMAP:
        return _select_lightmap(color=color, hdr=hdr, srgb=srgb, directional=directional)
    if directional:
        raise InvalidArgumentError(
            "directional=True is only valid for the 'RTLightmap' filter, not 'RT'"
        )
    if not (color or albedo or normal):
        raise InvalidOperationError(MSG_NO_INPUT)
    if hdr and srgb:
        raise InvalidOperationError(MSG_HDR_SRGB)
    if color:
        if normal and not albedo:
            raise InvalidOperationError(
                f"{MSG_UNSUPPORTED_COMBINATION}: color and normal without an albedo (the RT "
                "filter uses a normal only together with an albedo); pass the albedo too, or "
                "leave the normal out"
            )
        mode = "hdr" if hdr else "ldr"
        if albedo and normal:
            if clean_aux:
                return _pick(level, f"rt_{mode}_calb_cnrm", small=True, large=hdr)
            return _pick(level, f"rt_{mode}_alb_nrm", small=True)
        if albedo:
            return _pick(level, f"rt_{mode}_alb", small=True)
        return _pick(level, f"rt_{mode}", small=True)
    if albedo and normal:
        raise InvalidOperationError(MSG_INVALID_COMBINATION)
    if albedo:
        if hdr:
            raise InvalidOperationError(MSG_ALBEDO_HDR)
        return _pick(level, "rt_alb", large=True)
    if hdr or srgb:
        raise InvalidOperationError(MSG_NORMAL_MODES)
    return _pick(level, "rt_nrm", large=True)


def _select_lightmap(*, color: bool, hdr: bool, srgb: bool, directional: bool) -> str:
    """RTLightmap: color only (albedo/normal are ignored, as OIDN does); every quality alike."""
    if not color:
        raise InvalidOperationError(MSG_NO_INPUT)
    if directional:
        if hdr or srgb:
            raise InvalidOperationError(MSG_DIRECTIONAL)
        return "rtlightmap_dir"
    if srgb:  # hdr is implied by a non-directional lightmap
        raise InvalidOperationError(MSG_HDR_SRGB)
    return "rtlightmap_hdr"


# --- locating files -----------------------------------------------------------------


def user_weights_dir() -> Path:
    """The user weights directory, searched before the package's (``weights fetch`` writes there).

    ``$OIDN_GPU_WEIGHTS`` if set, else the per-user cache folder:
    ``$XDG_CACHE_HOME/oidn-gpu/weights`` (default ``~/.cache``) on Linux,
    ``~/Library/Caches/oidn-gpu/weights`` on macOS and
    ``%LOCALAPPDATA%\\oidn-gpu\\weights`` on Windows.
    """
    env = os.environ.get(WEIGHTS_ENV_VAR)
    if env:
        return Path(env).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache")
    return base / "oidn-gpu" / "weights"


def bundled_weights_dir() -> Path:
    """The package's own weights directory (all 23 official files)."""
    return Path(str(resources.files("oidn_gpu").joinpath("data", "weights")))


def _search_path(weights_dir: str | os.PathLike[str] | None) -> list[tuple[Path, str]]:
    if weights_dir is not None:
        user = (Path(weights_dir).expanduser(), "weights_dir argument")
    elif os.environ.get(WEIGHTS_ENV_VAR):
        user = (user_weights_dir(), f"${WEIGHTS_ENV_VAR}")
    else:
        user = (user_weights_dir(), "per-user weights folder")
    return [user, (bundled_weights_dir(), "bundled with oidn-gpu")]


def _check_name(name: str) -> str:
    stem = name[: -len(WEIGHTS_SUFFIX)] if name.endswith(WEIGHTS_SUFFIX) else name
    if not stem or "/" in stem or "\\" in stem or stem in (".", ".."):
        raise InvalidArgumentError(
            f"invalid weights name {name!r}; expected a file stem such as 'rt_hdr_alb'"
        )
    return stem


def weights_path(name: str, weights_dir: str | os.PathLike[str] | None = None) -> Path:
    """Find ``{name}.tza``: in the user directory (see module doc), then the bundled one.

    Args:
        name: weights name such as ``'rt_hdr_calb_cnrm_large'`` (``.tza`` optional).
        weights_dir: overrides ``$OIDN_GPU_WEIGHTS`` and the per-user folder.

    Returns:
        The path of the first file found.

    Raises:
        WeightsNotFoundError: no such file; the message lists every place searched and
            how to get the file.
        InvalidArgumentError: the name is not a plain file stem.
    """
    stem = _check_name(name)
    file_name = stem + WEIGHTS_SUFFIX
    searched = _search_path(weights_dir)
    for directory, _ in searched:
        candidate = directory / file_name
        if candidate.is_file():
            return candidate
    places = ", ".join(f"{directory} ({why})" for directory, why in searched)
    raise WeightsNotFoundError(
        f"weights file '{file_name}' not found; looked in {places}; run 'oidn-gpu weights "
        f"fetch' to download it into {user_weights_dir()}, or pass weights_dir= a folder "
        "holding it"
    )


# --- official checksums ---------------------------------------------------------------


def official_sha256() -> dict[str, str]:
    """SHA-256 of each of the 23 official weights files, keyed by name without ``.tza``."""
    sums: dict[str, str] = {}
    text = resources.files("oidn_gpu").joinpath("data", "weights", "SHA256SUMS").read_text()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].endswith(WEIGHTS_SUFFIX):
            sums[fields[1].lstrip("*")[: -len(WEIGHTS_SUFFIX)]] = fields[0].lower()
    sums.update(LARGE_WEIGHTS_SHA256)
    return dict(sorted(sums.items()))


def is_official(sha256: str) -> str | None:
    """The official weights name with this SHA-256 (hex), or None."""
    wanted = sha256.lower()
    for name, digest in official_sha256().items():
        if digest == wanted:
            return name
    return None


# --- loading ---------------------------------------------------------------------------

_cache: dict[tuple[str, int, int], ValidatedModel] = {}
_cache_lock = threading.Lock()


def file_version(stat: os.stat_result) -> tuple[int, ...]:
    """What tells one content of a file from another without reading it: its device and
    inode (a file renamed over it is another inode), size, modification time and change
    time (set by the system on every write or ``utime``, so a rewrite that restores the
    size and modification time still counts)."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def load_builtin(name: str, weights_dir: str | os.PathLike[str] | None = None) -> ValidatedModel:
    """Locate, verify and load official weights by name, cached per process.

    The cache key is the resolved path with its `file_version`, so a replaced or
    rewritten file is reloaded. A file with an official name must have the
    official SHA-256.

    Raises:
        WeightsNotFoundError: the file is missing (see `weights_path`).
        WeightsFormatError: the checksum differs from the official one, or the
            file is malformed.
    """
    path = weights_path(name, weights_dir).resolve()
    key = (str(path), file_version(path.stat()))
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    blob = path.read_bytes()
    stem = path.stem
    expected = official_sha256().get(stem)
    if expected is not None:
        actual = hashlib.sha256(blob).hexdigest()
        if actual != expected:
            raise WeightsFormatError(
                f"weights file {path} has SHA-256 {actual} but the official '{stem}' has "
                f"{expected}; delete it and run 'oidn-gpu weights fetch' again"
            )
    model = load_model(blob, name=stem)
    with _cache_lock:
        _cache[key] = model
    return model


def clear_cache() -> None:
    """Forget every model loaded by `load_builtin`."""
    with _cache_lock:
        _cache.clear()
