"""Make the WGSL that ships rendered (`kernels.shipped_texts`): the default configurations'.

A default configuration is what ``Denoiser(hdr=True)`` or ``Denoiser(srgb=False)`` (the
``rt_hdr_alb_nrm`` and ``rt_ldr_alb_nrm`` weights, quality high, colour + albedo + normal
as float32 arrays, every wgpu option at its default) renders for its first image on one
of the `DEVICES`: its network's kernels, its input and output passes and, for HDR, the
autoexposure. They are rendered on a `RecordingDevice` with that device's capabilities
(nothing runs; the executor and the denoise pipeline are the ones a `Denoiser` uses, with
``prepare``), every kernel from the templates (`shipped_texts.capture`).

Run ``python -m oidn_gpu.record.kernel_texts`` after changing a template or a generator;
``tests/kernels/test_shipped_texts.py`` fails until the shipped file is made again.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from oidn_gpu.backends.gpu_device import (
    FEATURE_F16,
    FEATURE_SUBGROUP,
    FEATURE_TIMESTAMP,
    AdapterInfo,
    Capabilities,
)
from oidn_gpu.image.process import mode_for
from oidn_gpu.kernels import shipped_texts
from oidn_gpu.model.weights import load_builtin
from oidn_gpu.record.device import RecordingDevice

# The weights of the default configurations, and whether each is HDR.
MODELS = (("rt_hdr_alb_nrm", True), ("rt_ldr_alb_nrm", False))
_COMMON_LIMITS = {
    "max-bind-groups": 4,
    "max-buffer-size": 2**31 - 1,
    "max-storage-buffer-binding-size": 2**31 - 1,
    "max-storage-buffers-per-shader-stage": 8,
    "max-uniform-buffer-binding-size": 65536,
    "max-compute-workgroups-per-dimension": 65535,
    "max-compute-invocations-per-workgroup": 1024,
    "max-compute-workgroup-size-x": 1024,
    "max-compute-workgroup-size-y": 1024,
}
_FEATURES = frozenset({FEATURE_F16, FEATURE_SUBGROUP, FEATURE_TIMESTAMP})


def _capabilities(
    adapter_type: str, storage_bytes: int, size_z: int, subgroups: tuple[int, int]
) -> Capabilities:
    limits = dict(_COMMON_LIMITS)
    limits["max-compute-workgroup-storage-size"] = storage_bytes
    limits["max-compute-workgroup-size-z"] = size_z
    return Capabilities(
        features=_FEATURES,
        limits=tuple(sorted(limits.items())),
        subgroup_min_size=subgroups[0],
        subgroup_max_size=subgroups[1],
        adapter=AdapterInfo("", "", "", "", adapter_type, "Vulkan"),
    )


# What kernel choice reads of the devices whose first image renders nothing: NVIDIA's
# large GPUs through Vulkan (the H100 and H200: 48 KiB of workgroup memory, fp16,
# subgroups of 32; the large-GPU GEMM defaults) and Mesa's lavapipe (the CPU driver the
# tests run on).
DEVICES: Mapping[str, Capabilities] = {
    "nvidia-large": _capabilities("DiscreteGPU", 49152, 64, (32, 32)),
    "lavapipe": _capabilities("CPU", 32768, 1024, (4, 128)),
}


def render_defaults() -> dict[str, str]:
    """Every default configuration's kernels on every one of `DEVICES`, rendered from the
    templates: digest -> text (`shipped_texts.arguments_digest`)."""
    # The executor and the pipeline that a `Denoiser` uses (imported here: they need numpy
    # and the wgpu backend's modules, never wgpu itself).
    from oidn_gpu.backends.wgpu.executor import WgpuExecutor
    from oidn_gpu.backends.wgpu.runner import GpuDenoiser

    with shipped_texts.capture() as texts:
        for capabilities in DEVICES.values():
            for name, hdr in MODELS:
                device = RecordingDevice(capabilities)
                executor = WgpuExecutor(load_builtin(name), device=device, prepare=False)
                runner = GpuDenoiser(executor)
                try:
                    runner.prepare(mode_for("RT", hdr=hdr))
                finally:
                    runner.close()
                    executor.close()
                    device.close()
        return dict(texts)


def main(argv: list[str]) -> int:
    """Write the shipped file (or ``argv[0]``); print what it holds."""
    path = argv[0] if argv else str(shipped_texts.SHIPPED_PATH)
    texts = render_defaults()
    data = shipped_texts.file_bytes(texts)
    with open(path, "wb") as f:
        f.write(data)
    print(f"{path}: {len(texts)} kernel texts, {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
