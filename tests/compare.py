"""The one comparison helper of the test suite.

`assert_close` checks shape and dtype, then the relative L2 error of the
candidate against the reference (and optionally the max abs error), and
prints both with the place of the largest difference so a failing or passing
run shows how close it was.
"""

from __future__ import annotations

import numpy as np


def rel_l2(candidate: np.ndarray, reference: np.ndarray) -> float:
    """||candidate - reference|| / ||reference|| in float64 (0 when both are zero)."""
    a = np.asarray(candidate, np.float64)
    b = np.asarray(reference, np.float64)
    num = float(np.linalg.norm((a - b).ravel()))
    den = float(np.linalg.norm(b.ravel()))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def assert_close(
    candidate: np.ndarray,
    reference: np.ndarray,
    *,
    rel_l2_tol: float,
    max_abs_tol: float | None = None,
    label: str = "",
) -> tuple[float, float]:
    """Assert ``candidate`` matches ``reference``; returns (relative L2, max abs error)."""
    assert candidate.shape == reference.shape, (
        f"{label}: shape {candidate.shape} != {reference.shape}"
    )
    assert candidate.dtype == reference.dtype, (
        f"{label}: dtype {candidate.dtype} != {reference.dtype}"
    )
    a = np.asarray(candidate, np.float64)
    b = np.asarray(reference, np.float64)
    assert np.isfinite(a).all(), f"{label}: candidate has NaN or Inf"
    err = rel_l2(a, b)
    diff = np.abs(a - b)
    max_abs = float(diff.max()) if diff.size else 0.0
    where = np.unravel_index(int(diff.argmax()), diff.shape) if diff.size else ()
    print(f"{label}: relative L2 {err:.3g}, max abs error {max_abs:.3g} at {where}")
    assert err <= rel_l2_tol, f"{label}: relative L2 error {err:.3g} > {rel_l2_tol:g}"
    if max_abs_tol is not None:
        assert max_abs <= max_abs_tol, f"{label}: max abs error {max_abs:.3g} > {max_abs_tol:g}"
    return err, max_abs
