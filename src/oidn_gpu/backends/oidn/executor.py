"""The oidn backend's executor: one Intel OIDN device and the weights of one model.

Intel OIDN runs its network only inside its filter, between its own input and output
processing (transfer function, clamps, autoexposure), and its API has no call that runs
the network alone on a network input: OIDN's filter on an already processed input is not
the raw network (its LDR clamp, for one, cuts network outputs above 1). So this
executor's `run` refuses, saying so; the runner (`runner.OidnRunner`) denoises whole
images with OIDN's filter on this executor's device. Nothing of the backend seam above
the runner calls `run`.

The weights are the model's own tensors written back into a TZA blob (`model.tza`) and
handed to OIDN as its ``weights`` data parameter, so OIDN runs exactly the network the
filter chose (OIDN's built-in choice, ``weights=``, a prefilter's clean-aux network, the
large weights from ``weights_dir``): for OIDN's built-in weights the tensors are OIDN's
own, and the image is bit for bit the one of OIDN's built-in choice.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from oidn_gpu.backends.base import ExecutorBase, ExecutorInfo, ExecutorResources
from oidn_gpu.backends.oidn.devices import OidnDevice
from oidn_gpu.errors import InvalidOperationError
from oidn_gpu.model.tza import write_tza
from oidn_gpu.model.unet import ValidatedModel


def weights_blob(model: ValidatedModel) -> np.ndarray:
    """The model's tensors as a TZA blob (uint8 array: OIDN keeps a pointer to it)."""
    tensors = {}
    for conv in model.convs.values():
        tensors[f"{conv.name}.weight"] = conv.weight
        tensors[f"{conv.name}.bias"] = conv.bias
    return np.frombuffer(bytearray(write_tza(tensors)), np.uint8)


class OidnExecutor(ExecutorBase):
    """An Intel OIDN device with one model's weights; see the module docstring.

    Args:
        model: the network its filters run.
        device: a parsed ``device`` option (`devices.parse_device`).
        threads: the CPU device's ``numThreads`` (None: every core).
    """

    def __init__(self, model: ValidatedModel, device: str | None, threads: int | None) -> None:
        self.model = model
        self.weights = weights_blob(model)
        self.device = OidnDevice(device, threads)

    def run(self, x: np.ndarray) -> np.ndarray:
        raise InvalidOperationError(
            "Intel OIDN runs its network only inside its filter (with its input and output "
            "processing) and has no call that runs the network alone; denoise images with "
            "Denoiser(backend='oidn'), or run a network input on another backend's executor"
        )

    def prewarm(self, shapes: Iterable[tuple[int, int]]) -> None:
        """Nothing to prepare: OIDN sizes its buffers when its filter is committed."""

    def info(self) -> ExecutorInfo:
        device = self.device
        threads = f", {device.threads} threads" if device.kind == "cpu" else ""
        return ExecutorInfo(
            backend="oidn",
            device=f"Intel OIDN {device.kind} device ({device.name}{threads})",
            # OIDN's CPU device computes in fp32 (fp16 on CPUs with AMX-FP16), its GPU
            # devices store activations in fp16 (its semantics, section 7).
            precision="fp16" if device.on_gpu else "fp32",
        )

    def resources(self) -> ExecutorResources:
        return ExecutorResources(shapes=(), buffer_count=1, byte_size=self.weights.nbytes)

    def close(self) -> None:
        """Release the device (its filters first: `runner.OidnRunner.close`)."""
        self.device.release()
