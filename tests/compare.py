"""The one comparison helper of the test suite.

`assert_close` checks shape, dtype and finiteness, then the tolerances the
caller gives: the relative L2 error of the whole array (``rel_l2_tol``), an
elementwise ``|candidate - reference| <= atol + rtol * |reference|`` bound
(``rtol``/``atol``, as ``numpy.allclose``) and the max abs error
(``max_abs_tol``). It prints the errors and the place of the largest difference,
so a failing or passing run shows how close it was.
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
    rel_l2_tol: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    max_abs_tol: float | None = None,
    label: str = "",
    check_dtype: bool = True,
) -> tuple[float, float]:
    """Assert ``candidate`` matches ``reference``; returns (relative L2, max abs error).

    Args:
        rel_l2_tol: bound on the relative L2 error of the whole array.
        rtol, atol: elementwise bound ``atol + rtol * |reference|`` (either may be given).
        max_abs_tol: bound on the largest absolute difference.
        check_dtype: False when the reference is computed in another precision
            (e.g. a float64 reference of a float32 result).
    """
    assert (
        rel_l2_tol is not None or rtol is not None or atol is not None or (max_abs_tol is not None)
    ), "assert_close needs a tolerance"
    candidate = np.asarray(candidate)
    reference = np.asarray(reference)
    assert candidate.shape == reference.shape, (
        f"{label}: shape {candidate.shape} != {reference.shape}"
    )
    if check_dtype:
        assert candidate.dtype == reference.dtype, (
            f"{label}: dtype {candidate.dtype} != {reference.dtype}"
        )
    a = candidate.astype(np.float64)
    b = reference.astype(np.float64)
    assert np.isfinite(a).all(), f"{label}: candidate has NaN or Inf"
    err = rel_l2(a, b)
    diff = np.abs(a - b)
    max_abs = float(diff.max()) if diff.size else 0.0
    where = np.unravel_index(int(diff.argmax()), diff.shape) if diff.size else ()
    print(f"{label}: relative L2 {err:.3g}, max abs error {max_abs:.3g} at {where}")
    if rel_l2_tol is not None:
        assert err <= rel_l2_tol, f"{label}: relative L2 error {err:.3g} > {rel_l2_tol:g}"
    if rtol is not None or atol is not None:
        bound = (atol or 0.0) + (rtol or 0.0) * np.abs(b)
        worst = np.unravel_index(int(np.argmax(diff - bound)), diff.shape) if diff.size else ()
        assert np.all(diff <= bound), (
            f"{label}: error {diff[worst]:.3g} at {worst} exceeds atol + rtol * |reference| = "
            f"{bound[worst]:.3g} (reference {b[worst]:.6g}; rtol {rtol}, atol {atol})"
        )
    if max_abs_tol is not None:
        assert max_abs <= max_abs_tol, f"{label}: max abs error {max_abs:.3g} > {max_abs_tol:g}"
    return err, max_abs


# Two float32 runs of one network whose pixels sit at other places in the BLAS calls
# (other tiles, bands or fusions) may round differently: OpenBLAS's AVX2 (Haswell) sgemm
# kernels sum a column's products in an order that depends on the column's position in
# the call (its AVX-512 kernels do not). Each run is within 1e-5 of the output scale and
# 1e-6 relative L2 of the float64 result (tests/unit/test_reference_backend.py), so two
# runs are within twice that; measured on the Haswell kernels: 1.7e-6 of the scale max,
# 4.8e-7 relative L2 (48 x 500 image, two tiles).
SUMMATION_ORDER_MAX_ABS = 1e-5
"""Max abs difference of two fp32 runs, as a fraction of the reference's largest value."""
SUMMATION_ORDER_REL_L2 = 2e-6
"""Relative L2 difference of two fp32 runs."""


def assert_equal_up_to_summation_order(
    candidate: np.ndarray, reference: np.ndarray, *, label: str = ""
) -> tuple[float, float]:
    """Assert two float32 runs of one network agree to float32 summation-order rounding."""
    scale = float(np.abs(np.asarray(reference, np.float64)).max()) if reference.size else 0.0
    return assert_close(
        candidate,
        reference,
        rel_l2_tol=SUMMATION_ORDER_REL_L2,
        max_abs_tol=SUMMATION_ORDER_MAX_ABS * scale,
        label=label,
    )
