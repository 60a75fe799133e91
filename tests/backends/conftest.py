"""Backends registered only while the tests of this folder run: the toy backend.

`TEST_BACKENDS` is their registry (name -> ``"module:attribute"`` of the `Backend`, as a
line of `backends.base.REGISTRY`); the contract suite holds each of them to the
contract with the ``CONTRACT_ENTRY`` beside its `Backend`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from oidn_gpu.backends import register_backend, unregister_backend

TEST_BACKENDS = {
    "toy": "tests.backends.toy_backend.backend:BACKEND",
}


@pytest.fixture(scope="package", autouse=True)
def test_backends() -> Iterator[None]:
    """`TEST_BACKENDS` registered for the tests of this folder (and only those)."""
    for name, target in TEST_BACKENDS.items():
        register_backend(name, target)
    try:
        yield
    finally:
        for name in TEST_BACKENDS:
            unregister_backend(name)
