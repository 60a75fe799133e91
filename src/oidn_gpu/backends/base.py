"""The backend seam: the `Backend` protocol, its registry, executors and tile runners.

A backend is one folder under ``backends/`` plus one line in `REGISTRY`. It
declares a name, a `priority` for ``backend="auto"``, a `probe` (available here,
or why not), a typed frozen `Backend.Options` dataclass, and two factories:
`Backend.create_executor` (a `NetworkExecutor` for a model) and
`Backend.create_runner` (a `TileRunner` that denoises whole images on that
executor; `backends.host_runner.HostTileRunner` serves every backend without
device-side input/output passes). A backend whose kernels cannot run tiles of
any size declares `Backend.tile_limits` (`TileLimits`), which `plan.plan_denoise`
tiles within. A backend with its own temporal-mode kernels declares
`Backend.temporal_passes` (a `TemporalPasses`; `oidn_gpu.temporal` uses NumPy's
where a backend has none). The registry imports a backend only when it is asked for, so
``import oidn_gpu`` stays NumPy-only, and probes each backend once per process.

An executor runs one network (the U-Net of a `ValidatedModel`) on packed
network inputs: ``[C_in, H, W]`` float32 with H and W multiples of the graph's
size alignment (16 for OIDN's U-Nets), giving ``[3, H, W]`` float32. Input
and output processing (transfer functions, tiling) happen outside it.

Lifetimes are explicit: shape-dependent state (plans, buffers) is built by
`prewarm` or on first use of a shape, and everything is released by `close`;
an executor is also a context manager through `ExecutorBase`.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

# What options are made of; backends import these names from here (the seam).
from oidn_gpu.backends.options import NO_TILE_LIMITS as NO_TILE_LIMITS
from oidn_gpu.backends.options import PRECISIONS as PRECISIONS
from oidn_gpu.backends.options import BackendOptions as BackendOptions
from oidn_gpu.backends.options import Precision as Precision
from oidn_gpu.backends.options import TileLimits as TileLimits
from oidn_gpu.backends.options import check_precision as check_precision
from oidn_gpu.backends.options import precision_choices as precision_choices

# The tile runners' protocols (what `Backend.create_runner` makes).
from oidn_gpu.backends.runners import AlphaRunner as AlphaRunner
from oidn_gpu.backends.runners import AutoexposureRunner as AutoexposureRunner
from oidn_gpu.backends.runners import BesideRunner as BesideRunner
from oidn_gpu.backends.runners import BufferAlphaRunner as BufferAlphaRunner
from oidn_gpu.backends.runners import CoverageRunner as CoverageRunner
from oidn_gpu.backends.runners import DenoiseImages as DenoiseImages
from oidn_gpu.backends.runners import DeviceRunner as DeviceRunner
from oidn_gpu.backends.runners import HostCoverageRunner as HostCoverageRunner
from oidn_gpu.backends.runners import HostInputsRunner as HostInputsRunner
from oidn_gpu.backends.runners import Progress as Progress
from oidn_gpu.backends.runners import SequenceRunner as SequenceRunner
from oidn_gpu.backends.runners import TileRunner as TileRunner
from oidn_gpu.backends.temporal_seam import FrameSource as FrameSource
from oidn_gpu.backends.temporal_seam import NetworkFrame as NetworkFrame
from oidn_gpu.backends.temporal_seam import TemporalFrame as TemporalFrame
from oidn_gpu.backends.temporal_seam import TemporalPasses as TemporalPasses
from oidn_gpu.backends.temporal_seam import TemporalResult as TemporalResult
from oidn_gpu.backends.temporal_seam import TemporalSession as TemporalSession
from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError, one_of

if TYPE_CHECKING:
    from oidn_gpu.model.unet import ValidatedModel

# Backend name -> "module:attribute" of its `Backend` object, imported on first use.
# A new backend adds one line here (and its folder under backends/); one outside the
# package registers itself with `register_backend`.
REGISTRY: dict[str, str] = {
    "reference": "oidn_gpu.backends.reference.backend:BACKEND",
    "wgpu": "oidn_gpu.backends.wgpu.backend:BACKEND",
    "cuda": "oidn_gpu.backends.cuda.backend:BACKEND",
    "oidn": "oidn_gpu.backends.oidn.backend:BACKEND",
}
AUTO = "auto"
# Environment override of what "auto" picks (e.g. OIDN_GPU_BACKEND=reference).
BACKEND_ENV_VAR = "OIDN_GPU_BACKEND"


@dataclass(frozen=True)
class ExecutorInfo:
    """What an executor runs on and how.

    Attributes:
        backend: ``'reference'``, ``'wgpu'`` or ``'cuda'``.
        device: human-readable device name (CPU model, adapter name).
        precision: ``'fp32'`` or ``'fp16'`` (storage of activations).
        kernels: layer (value) name -> short description of the kernel that computes it.
        fallbacks: layer -> why the requested (or automatic) kernel was replaced by the
            one that runs (empty when nothing was replaced).
    """

    backend: str
    device: str
    precision: str
    kernels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    fallbacks: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class ExecutorResources:
    """A snapshot of what an executor holds.

    Attributes:
        shapes: ``(H, W)`` sizes with a prepared plan, least recently used first.
        buffer_count: live buffers (host arrays or GPU buffers).
        byte_size: bytes held by those buffers, weights included.
    """

    shapes: tuple[tuple[int, int], ...]
    buffer_count: int
    byte_size: int


@runtime_checkable
class NetworkExecutor(Protocol):
    """Runs one network on packed inputs; see the module docstring."""

    def run(self, x: np.ndarray) -> np.ndarray:
        """Network output ``[3, H, W]`` float32 of the input ``[C_in, H, W]`` float32."""
        ...

    def prewarm(self, shapes: Iterable[tuple[int, int]]) -> None:
        """Prepare plans (and buffers) for input sizes ``(H, W)`` ahead of `run`."""
        ...

    def info(self) -> ExecutorInfo:
        """Backend, device, precision and the kernel chosen per layer."""
        ...

    def resources(self) -> ExecutorResources:
        """What the executor holds right now."""
        ...

    def close(self) -> None:
        """Release every buffer and plan; the executor is unusable afterwards."""
        ...


def parse_threads_option(name: str, text: str) -> Any:
    """A backend's ``--NAME TEXT`` value where ``--threads`` takes a positive integer
    (other options keep their text)."""
    if name != "threads":
        return text
    try:
        threads = int(text)
    except ValueError:
        threads = 0
    if threads < 1:
        raise InvalidArgumentError(f"--threads must be an integer >= 1, got {text!r}")
    return threads


def check_network_input(x: np.ndarray, channels: int, alignment: int) -> np.ndarray:
    """Validate a network input at an executor boundary.

    Args:
        x: the candidate ``[C_in, H, W]`` array.
        channels: the network's input channel count.
        alignment: H and W must be positive multiples of it.

    Returns:
        ``x`` as a C-contiguous float32 array (no copy when it already is one).

    Raises:
        InvalidArgumentError: wrong type, rank, channel count, dtype kind or size.
    """
    if not isinstance(x, np.ndarray):
        raise InvalidArgumentError(f"network input is a {type(x).__name__}; expected a numpy array")
    if x.ndim != 3 or x.shape[0] != channels:
        raise InvalidArgumentError(
            f"network input has shape {x.shape}; expected ({channels}, H, W)"
        )
    if x.dtype.kind != "f":
        raise InvalidArgumentError(f"network input has dtype {x.dtype}; expected float32")
    height, width = x.shape[1:]
    if height <= 0 or width <= 0 or height % alignment or width % alignment:
        raise InvalidArgumentError(
            f"network input size {width}x{height} must be a positive multiple of {alignment} "
            "in both dimensions"
        )
    return np.ascontiguousarray(x, dtype=np.float32)


def image_as_hwc(image: np.ndarray, name: str) -> np.ndarray:
    """A host image as ``[H, W, C]`` with C 1..3 (an ``HxW`` image gets one channel).

    The dtype is left as it is: each backend decides which it takes.

    Raises:
        InvalidArgumentError: any other shape.
    """
    arr = np.asarray(image)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or not 1 <= arr.shape[2] <= 3:
        raise InvalidArgumentError(
            f"{name} image has shape {np.asarray(image).shape}; expected HxW or HxWxC with C 1..3"
        )
    return arr


class ExecutorBase:
    """Optional mixin: context-manager support on top of ``close()``."""

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self) -> ExecutorBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- backends and the registry --------------------------------------------------------------


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run on this machine.

    Attributes:
        available: it can run here.
        note: what it runs on when available, otherwise why not (and how to fix it).
        auto: ``backend="auto"`` may pick it (a backend can be available but not
            worth choosing automatically, such as wgpu on a CPU rasterizer).
        warning: what a user who asks for it here should hear first (it runs, but on a
            CPU driver); empty when nothing.
        rank: where ``backend="auto"`` ranks it on this machine (higher first), at most
            the backend's `Backend.priority`; None: its priority. A backend whose speed
            depends on what it finds (Intel OIDN on a CPU or on a GPU) reports it here.
        ranking: why it ranks there (the measurement behind it), for ``oidn-gpu info``
            and `auto_choice`; empty: its place in the priority order.
    """

    available: bool
    note: str
    auto: bool = False
    warning: str = ""
    rank: int | None = None
    ranking: str = ""


class Backend(Protocol):
    """What a backend declares; see the module docstring.

    Attributes:
        name: the ``backend=`` value (``"reference"``, ``"wgpu"``, ...).
        priority: higher is tried first by ``backend="auto"``.
        description: one line for help texts and ``oidn-gpu info``.
        Options: its frozen `BackendOptions` subclass.
        precisions: the `Precision` values it computes in (its ``precision`` option takes
            these and ``auto``; ``()``: it has no ``precision`` option).
        tile_limits: the largest tile its kernels run (optional: a backend without
            it has `NO_TILE_LIMITS`; read it with `tile_limits`).
        uses_gpu: it computes on a GPU, so a render farm gives each worker one (or a
            share of one) and places it there with `place_on_gpu`; else CPU slots.
        benchmark: ``"module:attribute"`` of its `benchmark.Benchmark`, what ``oidn-gpu
            bench --backend NAME`` runs (optional: a backend without it has none).

    Optional: ``temporal_passes(options) -> TemporalPasses``, the temporal mode's passes
    on this backend with these options (``oidn_gpu.temporal`` runs NumPy's without it).
    Optional: ``temporal_session(frames) -> TemporalSession | None``, the temporal mode
    with its history on the device of a denoiser, given its frame path (a `FrameSource`:
    ``oidn_gpu.Denoiser.frames``; None: not for its options; ``oidn_gpu.temporal`` then
    runs the `TemporalPasses` on host arrays).
    """

    name: str
    priority: int
    description: str
    Options: type[BackendOptions]
    precisions: tuple[Precision, ...]
    tile_limits: TileLimits
    uses_gpu: bool
    benchmark: str

    def probe(self) -> Availability:
        """Whether it runs here (the registry caches the answer per process)."""
        ...

    def describe(self) -> tuple[str, ...]:
        """Lines about what it sees (devices, adapters) for ``oidn-gpu info``; never raises."""
        ...

    def create_executor(self, model: ValidatedModel, options: BackendOptions) -> NetworkExecutor:
        """A `NetworkExecutor` of ``model`` with these options."""
        ...

    def create_runner(self, executor: NetworkExecutor) -> TileRunner:
        """The `TileRunner` that denoises whole images on ``executor``."""
        ...

    def place_on_gpu(self, options: BackendOptions, gpu_id: int) -> tuple[BackendOptions, str]:
        """``options`` on GPU ``gpu_id`` of this machine (as Ray numbers a worker's GPUs),
        and where that is in words for the worker's report ('' when nothing more to say);
        options that name a device already are kept as they are."""
        ...


_loaded: dict[str, Backend] = {}
_probe_lock = threading.Lock()
_BUILT_IN = frozenset(REGISTRY)  # the package's own backends, which stay registered


def register_backend(name: str, target: str) -> None:
    """Register a backend that lives outside this package (a plug-in, a backend of the
    tests): ``name`` -> ``"module:attribute"`` of its `Backend`, as a line of `REGISTRY`.

    Raises:
        InvalidArgumentError: ``name`` is taken or not a plain name, or ``target`` is
            not ``"module:attribute"``.
    """
    if not isinstance(name, str) or not name.isidentifier() or name == AUTO:
        raise InvalidArgumentError(f"backend name {name!r} must be an identifier, not '{AUTO}'")
    if name in REGISTRY:
        raise InvalidArgumentError(f"a backend named '{name}' is already registered")
    module, _, attribute = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not module or not attribute:
        raise InvalidArgumentError(f"backend target {target!r}; expected 'module:attribute'")
    REGISTRY[name] = target


def unregister_backend(name: str) -> None:
    """Forget a backend added by `register_backend` (and every backend's cached probe).

    Raises:
        InvalidArgumentError: ``name`` is one of the package's own backends, or unknown.
    """
    if name in _BUILT_IN or name not in REGISTRY:
        raise InvalidArgumentError(f"'{name}' is not a backend added by register_backend")
    del REGISTRY[name]
    _loaded.pop(name, None)
    with _probe_lock:
        _probe.cache_clear()


def backend_names() -> tuple[str, ...]:
    """Every registered backend name, in registry order."""
    return tuple(REGISTRY)


def get_backend(name: str) -> Backend:
    """The `Backend` object registered as ``name`` (imported on first use).

    Raises:
        InvalidArgumentError: ``name`` is not a registered backend.
    """
    backend = _loaded.get(name)
    if backend is not None:
        return backend
    target = REGISTRY.get(name) if isinstance(name, str) else None
    if target is None:
        raise InvalidArgumentError(
            f"unknown backend {name!r}; expected {one_of((AUTO, *REGISTRY))}"
        )
    module, _, attribute = target.partition(":")
    backend = getattr(importlib.import_module(module), attribute)
    _loaded[name] = backend
    return backend


def tile_limits(name: str) -> TileLimits:
    """`Backend.tile_limits` of ``name`` (`NO_TILE_LIMITS` where it declares none).

    Raises:
        InvalidArgumentError: ``name`` is not a registered backend.
    """
    return getattr(get_backend(name), "tile_limits", NO_TILE_LIMITS)


@functools.cache
def _probe(name: str) -> Availability:
    try:
        return get_backend(name).probe()
    except Exception as err:  # a broken driver or package means "not available", never a crash
        return Availability(False, f"probing failed ({type(err).__name__}: {err})")


def probe(name: str) -> Availability:
    """`Backend.probe` of ``name``, run once per process (thread-safe)."""
    get_backend(name)  # unknown names raise
    with _probe_lock:
        return _probe(name)


def auto_order() -> tuple[str, ...]:
    """Backend names in the order ``backend="auto"`` tries them (highest priority first)."""
    return tuple(sorted(REGISTRY, key=lambda n: -get_backend(n).priority))


@dataclass(frozen=True)
class AutoChoice:
    """What ``backend="auto"`` picks here, and why (``oidn-gpu info``, `Denoiser.info`)."""

    name: str
    reason: str


def auto_choice(options: Mapping[str, Any] | None = None) -> AutoChoice:
    """The backend ``backend="auto"`` picks (see `resolve_backend`), with the reason.

    Backends are probed in `auto_order`; each that ``auto`` may pick ranks by its
    probe's `Availability.rank` (its priority when it reports none, and never above it),
    and the highest rank wins, the earlier in the order on a tie. A backend's priority
    bounds its rank, so the search stops at the first whose priority cannot beat the best.

    Raises:
        InvalidArgumentError: an unknown ``OIDN_GPU_BACKEND``.
    """
    given = {k: v for k, v in (options or {}).items() if v is not None}
    if given:
        for candidate in auto_order():
            if get_backend(candidate).Options.selected_by(given):
                return AutoChoice(candidate, "the device given is of its kind")
    forced = os.environ.get(BACKEND_ENV_VAR)
    if forced:
        if forced not in REGISTRY:
            raise InvalidArgumentError(
                f"{BACKEND_ENV_VAR}='{forced}' is not a backend; expected {one_of(REGISTRY)}"
            )
        return AutoChoice(forced, f"{BACKEND_ENV_VAR}={forced}")
    best: tuple[str, int, Availability] | None = None
    for candidate in auto_order():
        priority = get_backend(candidate).priority
        if best is not None and priority <= best[1]:
            break
        availability = probe(candidate)
        rank = priority if availability.rank is None else min(availability.rank, priority)
        if availability.auto and (best is None or rank > best[1]):
            best = (candidate, rank, availability)
    if best is None:  # pragma: no cover - the reference backend is always there
        raise InvalidArgumentError(
            "no backend is available; " + "; ".join(f"{n}: {probe(n).note}" for n in REGISTRY)
        )
    name, _, availability = best
    first = f"the first in the auto order that runs here ({availability.note})"
    return AutoChoice(name, availability.ranking or first)


def resolve_backend(name: str, options: Mapping[str, Any] | None = None) -> str:
    """The concrete backend for a requested name (``"auto"`` or a registered one).

    ``auto`` takes the first backend in `auto_order` whose options class is
    `BackendOptions.selected_by` ``options`` (a device of its kind), else honours
    the ``OIDN_GPU_BACKEND`` environment variable, else takes the backend of the highest
    rank on this machine whose probe allows it (`auto_choice`, which also says why).

    Raises:
        InvalidArgumentError: an unknown name (or environment value).
    """
    if name != AUTO:
        get_backend(name)
        return name
    return auto_choice(options).name


def check_backend(
    requested: str = AUTO, options: Mapping[str, Any] | None = None
) -> tuple[str, Availability]:
    """The backend that ``requested`` resolves to, checked to run on this machine: the one
    up-front check of the command line, sequences and farm workers, before any frame.

    A ``device`` in ``options`` (a wgpu device or a torch device the caller chose) is
    taken as given: the backend's probe of this machine is not asked.

    Returns:
        ``(name, availability)``; ``availability.auto`` is False for a backend that runs
        but is not worth choosing automatically (wgpu on a CPU Vulkan driver).

    Raises:
        InvalidArgumentError: an unknown backend name.
        UnsupportedDeviceError: the backend cannot run here: why, and the backends that can.
    """
    name = resolve_backend(requested, options)
    if (options or {}).get("device") is not None:
        return name, Availability(True, "on the device given", auto=True)
    availability = probe(name)
    if availability.available:
        return name, availability
    chosen = f" (chosen by backend='{AUTO}')" if requested == AUTO else ""
    usable = [n for n in REGISTRY if n != name and probe(n).available]
    raise UnsupportedDeviceError(
        f"the {name} backend{chosen} cannot run on this machine: {availability.note}; "
        f"the backends that run here: {one_of(usable) if usable else 'none'} "
        "('oidn-gpu info' lists what each sees)"
    )


def _shown(value: Any) -> str:
    """An option value in a message: its repr when short and plain, else its type."""
    if isinstance(value, (str, int, float, bool, dict, list, tuple)) and len(repr(value)) <= 60:
        return repr(value)
    return type(value).__name__


def make_options(
    name: str,
    options: BackendOptions | None = None,
    /,
    *,
    requested: str | None = None,
    filter_options: Iterable[str] = (),
    **kwargs: Any,
) -> BackendOptions:
    """The typed options of backend ``name`` from an ``Options`` object and/or keywords.

    Keywords set to None are "not given", and so is an option of another backend set
    to that backend's default (``kernel="auto"``); any other option the backend does
    not have is an error, also when ``auto`` picked it (``requested``: the name the
    caller asked for, for the message). ``filter_options``: the caller's own option names
    (the filter's), named with the backend's in the message for an unknown option, with the
    closest name of either kind.

    Raises:
        InvalidArgumentError: unknown options, options of another backend, an ``Options``
            object of another backend, or values the backend's ``Options`` rejects.
    """
    backend = get_backend(name)
    cls = backend.Options
    chosen = " (chosen by backend='auto')" if requested == AUTO else ""
    if options is not None and not isinstance(options, cls):
        raise InvalidArgumentError(
            f"backend options of type {type(options).__name__} do not fit the {name} backend"
            f"{chosen}; expected {cls.__module__}.{cls.__qualname__}"
        )
    given = {k: v for k, v in kwargs.items() if v is not None}
    own = set(cls.option_names())
    for key in sorted(set(given) - own):
        owner = _owner_default(key, name)
        if owner is not None and given[key] == owner[1]:
            del given[key]  # another backend's option left at its default
            continue
        if owner is not None:
            raise InvalidArgumentError(
                f"{key}={_shown(given[key])} is an option of the {owner[0]} backend; the "
                f"{name} backend{chosen} does not take it (its options: "
                f"{', '.join(sorted(own)) or 'none'})"
            )
        raise InvalidArgumentError(
            _unknown_option(key, name, chosen, sorted(own), sorted(filter_options))
        )
    try:
        if options is None:
            return cls(**given)
        return dataclasses.replace(options, **given) if given else options
    except InvalidArgumentError as err:
        if not chosen:
            raise
        message = str(err).replace(f"the {name} backend", f"the {name} backend{chosen}", 1)
        raise InvalidArgumentError(message) from None


def _unknown_option(
    key: str, name: str, chosen: str, own: list[str], filter_options: list[str]
) -> str:
    """The message for an option nobody takes: every valid name and the closest one."""
    owners = {
        option: other
        for other in REGISTRY
        if other != name
        for option in get_backend(other).Options.option_names()
    }
    candidates = [*filter_options, *own, *(o for o in owners if o not in own)]
    same = [c for c in candidates if c.casefold() == key.casefold()]  # HDR is hdr
    close = same or difflib.get_close_matches(key.lower(), candidates, n=1, cutoff=0.6)
    hint = ""
    if close:
        match = close[0]
        foreign = match not in own and match not in filter_options
        hint = f" (did you mean '{match}'" + (
            f", an option of the {owners[match]} backend?)" if foreign else "?)"
        )
    backend_part = f"its options are {one_of(own) if own else 'none'}"
    if not filter_options:
        return f"the {name} backend{chosen} has no option '{key}'{hint}; {backend_part}"
    return (
        f"unknown option '{key}'{hint}: the filter options are {one_of(filter_options)}; "
        f"the {name} backend{chosen} has no option '{key}' either: {backend_part}"
    )


def _owner_default(option: str, besides: str) -> tuple[str, Any] | None:
    """``(backend, default)`` of the first other registered backend that has ``option``."""
    for other in REGISTRY:
        if other == besides:
            continue
        for f in dataclasses.fields(get_backend(other).Options):
            if f.name == option:
                return other, f.default
    return None
