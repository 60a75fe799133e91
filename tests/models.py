"""Minimal in-memory models for backend tests: a graph plus random conv weights.

Anything with ``graph`` and ``convs`` (layer -> ``weight``, ``bias``) runs on the
backends, as a loaded `ValidatedModel` does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oidn_gpu.graph import ir


@dataclass(frozen=True)
class Weights:
    weight: np.ndarray
    bias: np.ndarray


@dataclass(frozen=True)
class Model:
    graph: ir.Graph
    convs: dict[str, Weights]


def random_model(graph: ir.Graph, rng: np.random.Generator, dtype=np.float32) -> Model:
    """He-scaled random weights and small random biases for every conv of ``graph``."""
    convs = {}
    for conv in graph.convs():
        shape = (conv.out_channels, conv.in_channels, 3, 3)
        scale = np.sqrt(2.0 / (9 * conv.in_channels))
        convs[conv.name] = Weights(
            (rng.standard_normal(shape) * scale).astype(dtype),
            (rng.standard_normal(conv.out_channels) * 0.1).astype(dtype),
        )
    return Model(graph, convs)
