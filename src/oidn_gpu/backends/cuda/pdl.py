"""Programmatic dependent launch (PDL) of the CUDA backend's Triton kernels on Hopper and later.

A frame is a chain of some twenty kernels on one stream, replayed as one CUDA graph. Between
two kernels the GPU normally drains the first, then launches the second and runs its
prologue: a few microseconds per boundary, which matter at 720p. With PDL (compute
capability 9.0 and later, CUDA's ``cudaLaunchAttributeProgrammaticStreamSerialization``;
Triton's ``launch_pdl`` launch option) the next kernel's programs may start while the
previous kernel's last programs still run; CUDA graph capture keeps these as programmatic
edges.

Each kernel that takes the ``PDL`` constexpr starts with `pdl_enter`: ``griddepcontrol.wait``
(it waits until the previous kernel has finished and its memory is visible), then
``griddepcontrol.launch_dependents`` (the next kernel may be launched). No kernel touches
global memory before its wait, so every read and write is ordered as without PDL: the
outputs are the same bits. It is used where `launch_options` allows it: a CUDA device of
compute capability 9.0 or later, not Triton's interpreter, a Triton with the
``gdc_wait``/``gdc_launch_dependents`` intrinsics, and ``OIDN_GPU_CUDA_PDL`` not ``off``.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Mapping
from typing import Any

from oidn_gpu.errors import InvalidArgumentError

PDL_ENV_VAR = "OIDN_GPU_CUDA_PDL"  # "off": every kernel launches without PDL
MIN_CAPABILITY = (9, 0)  # griddepcontrol: PTX ISA 7.8, sm_90 and later
MIN_TRITON = (3, 4)  # triton-lang/triton#6394: launch_pdl, tl.extra.cuda.gdc_wait


def triton_has_pdl() -> bool:
    """Whether the installed Triton has ``launch_pdl`` and the ``gdc_*`` intrinsics (3.4 and
    later), read from its package metadata so that Triton itself is not imported."""
    try:
        version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return False
    parts = [int(p) if p.isdigit() else 0 for p in version.split("+")[0].split(".")[:2]]
    return tuple(parts) >= MIN_TRITON


def pdl_enabled(environ: Mapping[str, str]) -> bool:
    """``OIDN_GPU_CUDA_PDL``: on unless ``off``/``0``; other values are errors."""
    value = environ.get(PDL_ENV_VAR, "on")
    if value not in ("on", "off", "1", "0", ""):
        raise InvalidArgumentError(f"{PDL_ENV_VAR}={value!r} is unknown; expected on or off")
    return value not in ("off", "0")


def launch_options(capability: tuple[int, int] | None, interpreting: bool,
                   environ: Mapping[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The keyword arguments that launch a ``PDL`` kernel with PDL on a device of
    ``capability`` (None: not a CUDA device): ``{}`` where PDL is not used (the kernels'
    ``PDL=False`` default)."""
    wanted = pdl_enabled(os.environ if environ is None else environ)
    if not wanted or interpreting or capability is None or not triton_has_pdl():
        return {}
    if tuple(capability) < MIN_CAPABILITY:
        return {}
    return {"PDL": True, "launch_pdl": True}
