"""The cuda backend on one GPU of a machine with several (a render farm's worker)."""

from __future__ import annotations

import socket
from collections.abc import Mapping

from oidn_gpu.errors import InvalidArgumentError


def cuda_device_for_gpu(gpu_id: int, environ: Mapping[str, str]) -> str:
    """The torch device name of GPU ``gpu_id`` (as Ray numbers a node's GPUs) in this process.

    Ray sets ``CUDA_VISIBLE_DEVICES`` to the GPUs it assigned to a worker, so CUDA numbers
    them from 0 in that list's order; where the variable is unset (Ray told not to set
    it), every GPU is visible and Ray's id is CUDA's index.

    Raises:
        InvalidArgumentError: ``CUDA_VISIBLE_DEVICES`` hides the GPU Ray assigned.
    """
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return f"cuda:{gpu_id}"
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    if str(gpu_id) not in ids:
        raise InvalidArgumentError(
            f"Ray assigned GPU {gpu_id} to this worker but CUDA_VISIBLE_DEVICES is "
            f"'{visible}' on {socket.gethostname()}; expected a list that holds {gpu_id}"
        )
    return f"cuda:{ids.index(str(gpu_id))}"
