"""Test-only wgpu runner: one device per process, run one `Kernel` with given buffers and params.

Creates a device with ``shader-f16`` and ``subgroup`` when the adapter has them,
uploads NumPy arrays to the kernel's read-only storage bindings, allocates the
read-write bindings (zero-filled unless data is given), packs the params
uniform, dispatches ``kernel.grid(c, h, w)`` and reads the read-write buffers back.

When no adapter exists, `device()` fails with a clear message (GPU tests never
skip; ``-m 'not gpu'`` deselects them).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from oidn_gpu.kernels.spec import BindingKind, Kernel


@functools.lru_cache(maxsize=1)
def _device():
    try:
        import wgpu
    except ImportError as err:  # pragma: no cover - environment problem
        return f"wgpu is not importable: {err}"
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if adapter is None:
        return "no wgpu adapter found (install lavapipe / mesa-vulkan-drivers)"
    wanted = [f for f in ("shader-f16", "subgroup") if f in adapter.features]
    limits = {
        "max-compute-workgroup-storage-size": adapter.limits["max-compute-workgroup-storage-size"],
        "max-compute-invocations-per-workgroup": adapter.limits[
            "max-compute-invocations-per-workgroup"
        ],
        "max-storage-buffers-per-shader-stage": adapter.limits[
            "max-storage-buffers-per-shader-stage"
        ],
    }
    return adapter.request_device_sync(required_features=wanted, required_limits=limits)


def device():
    """The process-wide test device; fails without one (deselect with ``-m "not gpu"``)."""
    dev = _device()
    if isinstance(dev, str):
        pytest.fail(
            f"{dev}; install mesa-vulkan-drivers or deselect with -m 'not gpu'", pytrace=False
        )
    return dev


def is_cpu_adapter() -> bool:
    """Whether the test device is a CPU rasterizer (lavapipe in CI), whose f16 arithmetic
    rounds every operation to IEEE binary16."""
    return device().adapter.info.get("adapter_type") == "CPU"


def has_feature(name: str) -> bool:
    return name in device().features


def limits():
    """`DeviceLimits` of the test device."""
    from oidn_gpu.kernels.spec import DeviceLimits

    dev = device()
    lim = dev.limits
    return DeviceLimits(
        max_workgroup_storage_bytes=lim["max-compute-workgroup-storage-size"],
        max_invocations_per_workgroup=lim["max-compute-invocations-per-workgroup"],
        max_workgroup_size_x=lim["max-compute-workgroup-size-x"],
        max_workgroup_size_y=lim["max-compute-workgroup-size-y"],
        max_workgroup_size_z=lim["max-compute-workgroup-size-z"],
        max_workgroups_per_dimension=lim["max-compute-workgroups-per-dimension"],
        shader_f16="shader-f16" in dev.features,
        subgroups="subgroup" in dev.features,
    )


_PIPELINES: dict[str, object] = {}


def compile_kernel(kernel: Kernel):
    """Compile (cached by key); raises with the WGSL errors on failure."""
    if kernel.key in _PIPELINES:
        return _PIPELINES[kernel.key]
    dev = device()
    module = dev.create_shader_module(label=kernel.key, code=kernel.source)
    pipeline = dev.create_compute_pipeline(
        label=kernel.key,
        layout="auto",
        compute={"module": module, "entry_point": kernel.entry_point},
    )
    _PIPELINES[kernel.key] = pipeline
    return pipeline


def run(
    kernel: Kernel,
    inputs: dict[str, np.ndarray],
    outputs: dict[str, int],
    params: dict[str, float] | None = None,
    grid_shape: tuple[int, int, int] | None = None,
    output_init: dict[str, np.ndarray] | None = None,
) -> dict[str, bytes]:
    """Run ``kernel`` once.

    Args:
        inputs: read-only binding name -> array (uploaded as raw bytes).
        outputs: read-write binding name -> size in bytes.
        params: params fields (packed with ``kernel.params``).
        grid_shape: ``(channels, height, width)`` passed to ``kernel.grid``.
        output_init: optional initial contents of read-write bindings.
    Returns:
        read-write binding name -> raw bytes read back.
    """
    import wgpu

    dev = device()
    pipeline = compile_kernel(kernel)
    buffers = {}
    usage_rw = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    for b in kernel.bindings:
        if b.kind is BindingKind.UNIFORM:
            data = kernel.pack_params(**(params or {}))
            buffers[b.name] = dev.create_buffer_with_data(data=data, usage=wgpu.BufferUsage.UNIFORM)
        elif b.kind is BindingKind.STORAGE_READ:
            arr = np.ascontiguousarray(inputs[b.name])
            raw = arr.tobytes()
            raw += bytes((-len(raw)) % 16 or 0) if len(raw) else bytes(16)
            buffers[b.name] = dev.create_buffer_with_data(data=raw, usage=wgpu.BufferUsage.STORAGE)
        else:
            size = outputs[b.name]
            padded = max(16, size + (-size) % 16)
            if output_init and b.name in output_init:
                raw = np.ascontiguousarray(output_init[b.name]).tobytes()
                raw += bytes(padded - len(raw))
                buffers[b.name] = dev.create_buffer_with_data(data=raw, usage=usage_rw)
            else:
                buffers[b.name] = dev.create_buffer(size=padded, usage=usage_rw)
    bind_group = dev.create_bind_group(
        layout=pipeline.get_bind_group_layout(0),
        entries=[
            {
                "binding": b.index,
                "resource": {"buffer": buffers[b.name], "offset": 0, "size": buffers[b.name].size},
            }
            for b in kernel.bindings
        ],
    )
    encoder = dev.create_command_encoder()
    cpass = encoder.begin_compute_pass()
    cpass.set_pipeline(pipeline)
    cpass.set_bind_group(0, bind_group)
    x, y, z = kernel.grid(*(grid_shape or (1, 1, 1)))
    cpass.dispatch_workgroups(x, y, z)
    cpass.end()
    dev.queue.submit([encoder.finish()])
    result = {}
    for b in kernel.bindings:
        if b.kind is BindingKind.STORAGE_READ_WRITE:
            result[b.name] = bytes(dev.queue.read_buffer(buffers[b.name]))[: outputs[b.name]]
    return result
