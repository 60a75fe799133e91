"""The result type of every WGSL generator, and the binding table it carries.

A generator is a pure function ``generate(spec) -> Kernel``: text and metadata
only. It never imports wgpu, holds no device and no cache; the backend caches
compiled pipelines by ``Kernel.key``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field


class BindingKind(enum.Enum):
    """How a binding is declared in WGSL."""

    STORAGE_READ = "read-only-storage"
    STORAGE_READ_WRITE = "storage"
    UNIFORM = "uniform"


@dataclass(frozen=True)
class Binding:
    """One ``@group(0) @binding(index)`` declaration, by name."""

    index: int
    name: str
    kind: BindingKind


@dataclass(frozen=True)
class Kernel:
    """A generated compute shader and how to dispatch it.

    Attributes:
        name: family name, e.g. ``conv-igemm``.
        key: unique, deterministic cache key of the spec (same spec, same key).
        source: WGSL text. Its first line is a comment naming generator and spec.
        entry_point: the ``@compute`` function name.
        workgroup_size: ``(x, y, z)`` as declared in the shader.
        bindings: ordered binding table (group 0).
        grid: maps the output shape ``(channels, height, width)`` to the number of
            workgroups ``(x, y, z)`` to dispatch.
        trusted: True when every index the kernel computes is proven in range for
            the shapes the planner allows, so the backend may compile it without
            runtime bounds checks.
        features: WGSL ``enable`` features the source needs (``f16``, ``subgroups``).
        workgroup_storage_bytes: shared memory the kernel declares.
    """

    name: str
    key: str
    source: str
    entry_point: str
    workgroup_size: tuple[int, int, int]
    bindings: tuple[Binding, ...]
    grid: Callable[[int, int, int], tuple[int, int, int]] = field(compare=False)
    trusted: bool = False
    features: tuple[str, ...] = ()
    workgroup_storage_bytes: int = 0

    def binding(self, name: str) -> Binding:
        for binding in self.bindings:
            if binding.name == name:
                return binding
        raise KeyError(f"kernel {self.key} has no binding named '{name}'")
