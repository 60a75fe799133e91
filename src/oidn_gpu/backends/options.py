"""What a backend's options are made of: the `Precision` vocabulary, `TileLimits` and the
`BackendOptions` base class (re-exported by `backends.base`, where backends import them).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from oidn_gpu.errors import InvalidArgumentError, one_of


class Precision(str, enum.Enum):
    """The ``precision`` option of every backend (each computes in a subset of them).

    ``auto`` lets the backend choose (`Backend.precisions` lists what it computes in);
    fp16 and bf16 are the storage of activations and weights, accumulation is fp32.
    A member equals its string (``Precision.FP16 == "fp16"``).
    """

    AUTO = "auto"
    FP16 = "fp16"
    BF16 = "bf16"
    FP32 = "fp32"

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:  # as the name it equals: options print as they did as strings
        return repr(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# Every precision name a backend option may take (each backend accepts its subset).
PRECISIONS = tuple(p.value for p in Precision)


def precision_choices(computes: tuple[Precision, ...]) -> tuple[str, ...]:
    """The ``precision`` values a backend that computes in ``computes`` takes (with auto)."""
    return (Precision.AUTO.value, *(p.value for p in computes))


def check_precision(value: Any, backend: str, computes: tuple[Precision, ...]) -> Precision:
    """``value`` as the `Precision` of a ``backend`` option (``auto`` or one of ``computes``);
    a name, or an enum member whose value is one (`kernels.spec.Precision`).

    Raises:
        InvalidArgumentError: an unknown value, or a precision the backend does not compute in.
    """
    if isinstance(value, enum.Enum) and not isinstance(value, Precision):
        value = value.value
    if not isinstance(value, str) or value not in PRECISIONS:
        raise InvalidArgumentError(
            f"unknown precision {value!r}; expected {one_of(precision_choices(computes))}"
        )
    precision = Precision(value)
    if precision is not Precision.AUTO and precision not in computes:
        only = " only" if len(computes) == 1 else ""
        raise InvalidArgumentError(
            f"the {backend} backend computes in {' or '.join(computes)}{only}; "
            f"got precision '{precision}'"
        )
    return precision


@dataclass(frozen=True)
class TileLimits:
    """The largest tile a backend's kernels can run; `plan.plan_denoise` plans within it.

    Attributes:
        max_elements: elements one activation of a tile may hold at most (2^31 - 1
            where kernels index activations with 32-bit integers); None: no bound.
        stored_channels: channels per pixel of a tile's widest activation as the
            backend stores it, so that activation holds ``tile_h * tile_w *
            stored_channels`` elements.
    """

    max_elements: int | None = None
    stored_channels: int = 1

    def __post_init__(self) -> None:
        checked = {"stored_channels": self.stored_channels}
        if self.max_elements is not None:
            checked["max_elements"] = self.max_elements
        for name, value in checked.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(
                    f"tile limit {name} is {value!r}; expected a positive integer"
                )

    @property
    def max_pixels(self) -> int | None:
        """Pixels of one tile buffer at most (None: no bound)."""
        if self.max_elements is None:
            return None
        return self.max_elements // self.stored_channels

    def fits(self, tile_h: int, tile_w: int) -> bool:
        """Whether a ``tile_h x tile_w`` tile buffer is within the limits."""
        return self.max_pixels is None or tile_h * tile_w <= self.max_pixels


NO_TILE_LIMITS = TileLimits()  # a backend that declares no `Backend.tile_limits`


@dataclass(frozen=True)
class BackendOptions:
    """Base of every backend's ``Options``: a frozen dataclass validated on creation.

    Subclasses declare their options as fields with defaults and check them in
    ``__post_init__`` (raising `InvalidArgumentError`; a ``precision`` field through
    `check_precision`), once: the executor is built from the checked options.
    `option_help` gives one line of help per option for the command line.
    """

    option_help: ClassVar[Mapping[str, str]] = MappingProxyType({})
    # Allowed values per option, for command-line choices; options absent here are free-form.
    option_choices: ClassVar[Mapping[str, tuple[str, ...]]] = MappingProxyType({})
    # Placeholder of a free-form option's value in command-line help (e.g. "JSON").
    option_metavars: ClassVar[Mapping[str, str]] = MappingProxyType({})

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def selected_by(cls, options: Mapping[str, Any]) -> bool:
        """Whether these options, given with ``backend="auto"``, ask for this backend
        (a wgpu or torch ``device``)."""
        return False
