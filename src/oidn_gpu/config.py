"""A denoiser's whole configuration as one frozen value, validated once.

`FilterOptions` are OIDN's filter parameters; `DenoiserConfig` adds the backend
and its typed options (`backends.base.BackendOptions`). A front end (the command
line) builds one `DenoiserConfig` where it parses its flags and hands it as it is
to `oidn_gpu.Denoiser.from_config`, the sequence loop and a farm's workers (it
pickles); a worker places it on its GPU with `DenoiserConfig.on_gpu`, and no
caller names a backend.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from oidn_gpu.backends.base import (
    AUTO,
    BACKEND_ENV_VAR,
    Availability,
    BackendOptions,
    check_backend,
    get_backend,
    make_options,
    resolve_backend,
)
from oidn_gpu.backends.plan import DenoiseOptions
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.model import weights

FilterType = Literal["RT", "RTLightmap"]

_FILTER_TYPES = ("RT", "RTLightmap")
_PREFILTERS = ("none", "fast", "accurate")


def _check_bool(name: str, value: Any) -> bool:
    """A boolean option: True or False (NumPy booleans too), never 1 or "yes"."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidArgumentError(
            f"invalid value for parameter '{name}': {value!r} ({type(value).__name__}); "
            "expected True or False"
        )
    return bool(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _check_input_scale(value: Any) -> float | None:
    """None or NaN: automatic (autoexposure for HDR, else 1); else a finite number >= 0.

    OIDN 2.5.1 accepts any float, but an infinite scale gives NaN or zero pixels and a
    negative one flips the sign of the image, so those are refused here.
    """
    if value is None:
        return None
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        raise InvalidArgumentError(
            f"invalid value for parameter 'input_scale': {value!r} ({type(value).__name__}); "
            "expected a number or None"
        )
    scale = float(value)
    if math.isnan(scale):
        return None
    if math.isinf(scale) or scale < 0:
        raise InvalidArgumentError(
            f"invalid value for parameter 'input_scale': {scale}; expected a finite number "
            ">= 0 (or None/NaN for automatic)"
        )
    return scale


def _check_max_memory_mb(value: Any) -> int | None:
    """None or an int: OIDN's ``maxMemoryMB`` (>= 0 a budget in MiB, < 0 the default)."""
    if value is None:
        return None
    if not _is_int(value):
        raise InvalidArgumentError(
            f"invalid value for parameter 'max_memory_mb': {value!r} ({type(value).__name__}); "
            "expected an int (MiB) or None"
        )
    return int(value)


def _check_tile_size(value: Any) -> int | None:
    if value is None:
        return None
    if not _is_int(value) or value < 1:
        raise InvalidArgumentError(
            f"invalid value for parameter 'tile_size': {value!r}; expected a positive int "
            "(pixels) or None"
        )
    return int(value)


@dataclass(frozen=True)
class FilterOptions:
    """OIDN's filter parameters, validated on creation (see `Denoiser` for each one).

    Booleans must be booleans (NumPy's too), ``quality`` is normalized to its name,
    a NaN ``input_scale`` to None (autoexposure), and ``hdr``/``srgb`` of an
    ``RTLightmap`` filter are dropped with a warning, as OIDN ignores them. Custom
    ``weights`` are loaded by the `ModelCache` when the denoiser is built.

    Raises:
        InvalidArgumentError: an unknown filter type, quality or prefilter, or an
            invalid value (``invalid value for parameter 'NAME': ...``).
    """

    filter_type: FilterType = "RT"
    hdr: bool = False
    srgb: bool = False
    clean_aux: bool = False
    quality: str = "high"
    input_scale: float | None = None
    directional: bool = False
    prefilter: str = "none"
    weights: str | os.PathLike[str] | bytes | None = None
    weights_dir: str | os.PathLike[str] | None = None
    max_memory_mb: int | None = None
    tile_size: int | None = None

    def __post_init__(self) -> None:
        if self.filter_type not in _FILTER_TYPES:
            raise InvalidArgumentError(
                f"unknown filter type: '{self.filter_type}'; expected 'RT' or 'RTLightmap'"
            )
        if self.prefilter not in _PREFILTERS:
            raise InvalidArgumentError(
                f"unknown prefilter '{self.prefilter}'; expected 'none', 'fast' or 'accurate'"
            )
        hdr = _check_bool("hdr", self.hdr)
        srgb = _check_bool("srgb", self.srgb)
        weights_dir = self.weights_dir
        if weights_dir is not None and not isinstance(weights_dir, (str, os.PathLike)):
            raise InvalidArgumentError(
                f"invalid value for parameter 'weights_dir': a {type(weights_dir).__name__}; "
                "expected a folder path or None"
            )
        if self.filter_type == "RTLightmap" and (hdr or srgb):
            warnings.warn(
                "hdr and srgb are not parameters of the RTLightmap filter and are ignored",
                stacklevel=4,  # the caller of Denoiser(...)
            )
            hdr = srgb = False
        set_field = object.__setattr__
        set_field(self, "hdr", hdr)
        set_field(self, "srgb", srgb)
        set_field(self, "clean_aux", _check_bool("clean_aux", self.clean_aux))
        set_field(self, "directional", _check_bool("directional", self.directional))
        set_field(self, "quality", weights.parse_quality(self.quality).value)
        set_field(self, "input_scale", _check_input_scale(self.input_scale))
        set_field(self, "max_memory_mb", _check_max_memory_mb(self.max_memory_mb))
        set_field(self, "tile_size", _check_tile_size(self.tile_size))

    def denoise_options(self, images: Any, input_scale: float = 1.0) -> DenoiseOptions:
        """The `DenoiseOptions` of a denoise of ``images`` (the facade's validated images) with
        a resolved input scale."""
        return DenoiseOptions(
            filter_type=self.filter_type,
            hdr=self.hdr,
            srgb=self.srgb,
            directional=self.directional,
            normal_only=images.color is None and images.albedo is None,
            input_scale=input_scale,
            tile_size=self.tile_size,
            max_memory_mb=self.max_memory_mb,
            quality=self.quality,
        )


OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(FilterOptions))
# Keyword options of `Denoiser` besides the backend's (named when an option is unknown).
DENOISER_OPTIONS = (*OPTION_NAMES, "backend", "backend_options")


def _given(options: BackendOptions | None) -> dict[str, Any]:
    """The options that are set (not None), as `backends.base.check_backend` takes them."""
    if options is None:
        return {}
    values = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    return {name: value for name, value in values.items() if value is not None}


@dataclass(frozen=True)
class DenoiserConfig:
    """The options of one `oidn_gpu.Denoiser`: filter, backend and the backend's options.

    Build it with `create` (the `Denoiser` keywords, checked once); it is frozen and
    pickles (unless its options hold a live device), so it travels to a farm's workers.

    Attributes:
        filter: OIDN's filter parameters.
        backend: ``"auto"`` (resolved wherever the denoiser is built: on a farm, on
            each worker's machine) or a registered backend; the backend ``auto`` picked
            once backend options are given.
        backend_options: the typed options of ``backend``; None: its defaults.
    """

    filter: FilterOptions = field(default_factory=FilterOptions)
    backend: str = AUTO
    backend_options: BackendOptions | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.filter, FilterOptions):
            raise InvalidArgumentError(
                f"the filter options are a {type(self.filter).__name__}; expected FilterOptions"
            )
        if self.backend != AUTO:
            get_backend(self.backend)  # an unknown name raises
        if self.backend_options is None:
            return
        if self.backend == AUTO:
            raise InvalidArgumentError(
                "backend options need the backend they belong to, not backend='auto'; "
                "build the config with DenoiserConfig.create"
            )
        make_options(self.backend, self.backend_options)  # of another backend: raises

    @classmethod
    def create(
        cls,
        filter_options: FilterOptions | None = None,
        *,
        backend: str = AUTO,
        backend_options: BackendOptions | None = None,
        **options: Any,
    ) -> DenoiserConfig:
        """A config from `Denoiser`'s backend keywords: ``backend``, an ``Options`` object
        and/or the backend's options as keywords (None: not given).

        With ``backend="auto"`` and backend options, the backend is chosen here (a
        ``device`` asks for its kind of backend), so that the options are checked once.

        Raises:
            InvalidArgumentError: an unknown backend or option, an option of another
                backend, or a value the backend's ``Options`` rejects.
        """
        filter_options = FilterOptions() if filter_options is None else filter_options
        given = {k: v for k, v in options.items() if v is not None}
        if backend_options is None and not given:
            return cls(filter_options, resolve_backend(backend) if backend != AUTO else AUTO)
        name = resolve_backend(backend, given)
        typed = make_options(
            name, backend_options, requested=backend, filter_options=DENOISER_OPTIONS, **options
        )
        return cls(filter_options, name, typed)

    @property
    def lightmap(self) -> bool:
        """The ``RTLightmap`` filter (a color image only)."""
        return self.filter.filter_type == "RTLightmap"

    def with_mode(self, hdr: bool, srgb: bool) -> DenoiserConfig:
        """This config for a color that is HDR, or sRGB-encoded LDR (the ``RT`` filter)."""
        return dataclasses.replace(
            self, filter=dataclasses.replace(self.filter, hdr=hdr, srgb=srgb)
        )

    def requested_backend(self, environ: Mapping[str, str] | None = None) -> str:
        """The backend asked for: ``auto`` names the ``OIDN_GPU_BACKEND`` one where set."""
        if self.backend != AUTO:
            return self.backend
        return (os.environ if environ is None else environ).get(BACKEND_ENV_VAR) or AUTO

    def check(self) -> tuple[str, Availability]:
        """The backend that runs it on this machine, checked (`backends.check_backend`).

        Raises:
            UnsupportedDeviceError: the backend cannot run here.
        """
        return check_backend(self.backend, _given(self.backend_options))

    def on_gpu(self, gpu_id: int) -> tuple[DenoiserConfig, str]:
        """This config with ``auto`` resolved here and the backend placed on GPU ``gpu_id``
        of this machine (`Backend.place_on_gpu`), and where that is in words ('' when
        nothing more to say); a backend that computes on the CPU is left as it is."""
        name = resolve_backend(self.backend, _given(self.backend_options))
        backend = get_backend(name)
        if not backend.uses_gpu:
            return self, ""
        options = make_options(name, self.backend_options, requested=self.backend)
        placed, where = backend.place_on_gpu(options, gpu_id)
        return dataclasses.replace(self, backend=name, backend_options=placed), where
