"""The models a `Denoiser` runs: which weights the images and options select, each
loaded once (`ModelCache`); custom ``weights=`` are loaded when the denoiser is built."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from oidn_gpu.backends.phases import timed_phase
from oidn_gpu.config import FilterOptions
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError, WeightsNotFoundError
from oidn_gpu.image.checks import Images
from oidn_gpu.model import unet, weights
from oidn_gpu.model.unet import ValidatedModel

_LOG = logging.getLogger(__name__)


def _load_custom_weights(source: Any) -> ValidatedModel:
    """Load a custom ``.tza`` (path or bytes) now, so a bad file fails at construction."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise WeightsNotFoundError(f"weights file not found: '{path}'")
        try:
            return unet.load_model(path)
        except OSError as err:
            raise InvalidArgumentError(
                f"cannot read weights file '{path}': {err.strerror or err}"
            ) from None
    if isinstance(source, (bytes, bytearray, memoryview)):
        return unet.load_model(source)
    raise InvalidArgumentError(
        f"invalid value for parameter 'weights': a {type(source).__name__}; "
        "expected a .tza path or its bytes"
    )


CUSTOM_WEIGHTS = "custom"


class ModelCache:
    """The model the images and options select, each loaded once.

    Built-in weights are keyed by their official name; custom weights (``weights=``)
    by ``"custom"``.
    """

    def __init__(self, options: FilterOptions) -> None:
        self.options = options
        self._models: dict[str, ValidatedModel] = {}
        if options.weights is not None:
            # Loaded now, so that a missing or malformed file fails at construction.
            self._models[CUSTOM_WEIGHTS] = _load_custom_weights(options.weights)

    def get(self, images: Images, clean_aux: bool) -> tuple[str, ValidatedModel]:
        """``(key, model)`` for ``images``; raises OIDN's errors for unsupported combinations."""
        options = self.options
        # Validates the combination of inputs and flags with OIDN's messages even when
        # custom weights replace the built-in choice.
        name: str | None = None
        try:
            name = weights.select_weights(
                options.filter_type,
                color=images.color is not None,
                albedo=images.albedo is not None,
                normal=images.normal is not None,
                hdr=options.hdr,
                srgb=options.srgb,
                clean_aux=clean_aux,
                quality=options.quality,
                directional=options.directional,
            )
        except InvalidOperationError as err:
            if options.weights is None or "unsupported combination" not in str(err):
                raise
        if options.weights is not None:
            return CUSTOM_WEIGHTS, self._custom(images)
        assert name is not None
        if name not in self._models:
            with timed_phase(_LOG, "read the weights"):
                self._models[name] = weights.load_builtin(name, options.weights_dir)
        return name, self._models[name]

    def _custom(self, images: Images) -> ValidatedModel:
        model = self._models[CUSTOM_WEIGHTS]
        count = sum(x is not None for x in (images.color, images.albedo, images.normal))
        if model.input_channels != 3 * count:
            raise InvalidArgumentError(
                f"the custom weights take {model.input_channels} input channels but "
                f"{count} image(s) = {3 * count} channels were given"
            )
        return model

    def clear(self) -> None:
        """Forget the built-in models (custom weights stay: they belong to the options)."""
        for key in [k for k in self._models if k != CUSTOM_WEIGHTS]:
            del self._models[key]
