"""Where a `CudaExecutor` runs and on which engine: its torch device, and Triton or cuDNN
with or without the bridge, from the options asked for and what this machine has.

- `pick_device`: the device asked for (a ``torch.device``, an index or a name; a CUDA
  device without an index is the current one), else the current CUDA device, else the
  CPU where Triton's interpreter runs the kernels (``TRITON_INTERPRET=1``);
- `pick_engine`: ``"auto"`` is Triton where it imports and a GPU (or the interpreter)
  runs it, else cuDNN with the reason kept (`EngineChoice.fallback`); on a GPU and without
  tile tuning it has the cuDNN *bridge* (frames on cuDNN while Triton's kernels compile),
  and Triton is then only looked up, not imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oidn_gpu.backends.cuda.triton_loader import interpreting, triton_status
from oidn_gpu.backends.cuda.tuning import tuning_enabled
from oidn_gpu.errors import InvalidArgumentError, MissingDependencyError


@dataclass(frozen=True)
class EngineChoice:
    """The engine of an executor's frames.

    Attributes:
        engine: ``"triton"`` or ``"cudnn"``.
        fallback: why ``"auto"`` fell back to cuDNN (None: it did not).
        bridge: whether frames run on cuDNN while Triton's kernels compile.
        tune: whether tiles are tuned on this device.
    """

    engine: str
    fallback: str | None
    bridge: bool
    tune: bool


def pick_device(torch: Any, device: Any) -> Any:
    """The executor's torch device for the ``device`` option.

    Raises:
        InvalidArgumentError: CUDA asked for (or no device asked for) where torch has none
            and Triton's interpreter is off.
    """
    if device is not None:
        device = torch.device(device if not isinstance(device, int) else f"cuda:{device}")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise InvalidArgumentError("no CUDA device is available to torch")
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        return device
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if interpreting():
        return torch.device("cpu")
    raise InvalidArgumentError(
        "no CUDA device is available to torch (set TRITON_INTERPRET=1 to run the "
        "Triton kernels on the CPU interpreter)"
    )


def pick_engine(device: Any, engine: str, tune: bool | None, bridge: bool | None) -> EngineChoice:
    """The engine for the ``engine`` option on ``device``; ``tune`` and ``bridge`` None:
    their defaults.

    Raises:
        MissingDependencyError: ``engine="triton"`` where Triton does not run.
    """
    on_gpu = device.type == "cuda"
    if tune is None:
        tune = on_gpu and tuning_enabled()
    if bridge is None:
        bridge = engine == "auto" and on_gpu and not tune
    # Triton is only looked up when the bridge can serve frames while it imports.
    missing = triton_status(load=not bridge)
    if not on_gpu and not interpreting():
        missing = missing or "Triton kernels need a CUDA device (or TRITON_INTERPRET=1)"
    if engine == "triton" and missing:
        raise MissingDependencyError(
            f"engine 'triton' is unavailable: {missing}; pip install 'oidn-gpu[cuda]'"
        )
    chosen = "cudnn" if engine == "cudnn" or missing else "triton"
    fallback = missing if (chosen == "cudnn" and engine != "cudnn") else None
    return EngineChoice(chosen, fallback, bool(bridge) and chosen == "triton", bool(tune))
