"""Transfer functions: constants bit-checked against OIDN, curves against scalar float32."""

from __future__ import annotations

import math

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import transfer as tf
from oidn_gpu.image.transfer import Transfer, forward, inverse, transfer_for

F = np.float32


def bits(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def ulp_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 ULPs (for finite values of the same sign)."""
    ia = a.astype(np.float32).view(np.int32).astype(np.int64)
    ib = b.astype(np.float32).view(np.int32).astype(np.int64)
    return np.abs(ia - ib)


# Scalar float32 references written from the spec (section 4.3), one element at a time.
def c_log(x: np.float32) -> np.float32:
    return F(math.log(float(x))) if x > 0 else (F(-math.inf) if x == 0 else F(math.nan))


def c_pow(x: np.float32, e: np.float32) -> np.float32:
    if x < 0:
        return F(math.nan)
    value = float(x) ** float(e)
    return F(value) if value <= 3.4028235677973366e38 else F(math.inf)


def c_exp(x: np.float32) -> np.float32:
    try:
        value = math.exp(float(x))
    except OverflowError:
        return F(math.inf)
    return F(value) if value <= 3.4028235677973366e38 else F(math.inf)


def pu_scalar(y: np.float32) -> np.float32:
    if y <= F(1.57945760e-06):
        raw = F(1.41283765e03) * y
    elif y <= F(3.22087631e-02):
        raw = F(1.64593172e00) * c_pow(y, F(4.31384981e-01)) + F(-2.94139609e-03)
    else:
        raw = F(1.92653254e-01) * c_log(y + F(6.26026094e-03)) + F(9.98620152e-01)
    return raw * F(0.31896716)


def pu_inverse_scalar(x: np.float32) -> np.float32:
    x = x * F(3.135119)
    if x <= F(2.23151711e-03):
        return x / F(1.41283765e03)
    if x <= F(3.70974749e-01):
        return c_pow((x - F(-2.94139609e-03)) / F(1.64593172e00), F(1) / F(4.31384981e-01))
    return c_exp((x - F(9.98620152e-01)) / F(1.92653254e-01)) - F(6.26026094e-03)


def srgb_scalar(y: np.float32) -> np.float32:
    if y <= F(0.0031308):
        return F(12.92) * y
    return F(1.055) * c_pow(y, F(1) / F(2.4)) - F(0.055)


def srgb_inverse_scalar(x: np.float32) -> np.float32:
    if x <= F(0.04045):
        return x / F(12.92)
    return c_pow((x + F(0.055)) / F(1.055), F(1) / (F(1) / F(2.4)))


def log_scalar(y: np.float32) -> np.float32:
    return c_log(y + F(1)) * F(0.09017228)


def log_inverse_scalar(x: np.float32) -> np.float32:
    return c_exp(x * F(11.089882)) - F(1)


def sample_values(rng: np.random.Generator) -> np.ndarray:
    """A few hundred non-negative float32 values across all segments and extremes."""
    special = [
        0.0,
        1e-45,
        1e-40,
        1.17549435e-38,
        1e-8,
        1.57945760e-06,
        1.5794577e-06,
        0.0031308,
        0.00313081,
        0.04045,
        0.0404501,
        3.22087631e-02,
        0.3709747,
        0.5,
        1.0,
        2.0,
        100.0,
        65504.0,
        1e30,
        float(np.finfo(np.float32).max),
    ]
    random = np.concatenate(
        [
            rng.uniform(0, 1, 200),
            np.exp(rng.uniform(-40, 40, 200)),
            rng.uniform(0, 6, 100),
        ]
    )
    return np.concatenate([special, random]).astype(np.float32)


def test_pu_normalization_constants_match_oidn_bits() -> None:
    c = tf.pu_constants()
    assert bits(c.x_max) == 0x4048A5CA
    assert bits(c.norm_scale) == 0x3EA34FAA
    assert c.rcp_norm_scale == c.x_max
    assert c.norm_scale == float(np.float32(1.0 / c.x_max))


def test_log_and_srgb_constants_are_the_float32_values() -> None:
    lc = tf.log_constants()
    assert lc.x_max == float(F(11.089882))
    assert lc.norm_scale == float(F(0.09017228))
    sc = tf.srgb_constants()
    assert sc.exponent == float(F(1) / F(2.4))
    assert sc.inv_exponent == float(F(2.4))
    assert tf.pu_constants().inv_c == float(F(1) / F(4.31384981e-01))


def test_constants_are_exact_float32_values() -> None:
    for consts in (tf.pu_constants(), tf.srgb_constants(), tf.log_constants()):
        for value in vars(consts).values():
            assert float(np.float32(value)) == value


@pytest.mark.parametrize(
    ("transfer", "fwd", "inv"),
    [
        (Transfer.PU, pu_scalar, pu_inverse_scalar),
        (Transfer.SRGB, srgb_scalar, srgb_inverse_scalar),
        (Transfer.LOG, log_scalar, log_inverse_scalar),
    ],
)
def test_curves_match_scalar_float32_evaluation(transfer, fwd, inv, rng) -> None:
    y = sample_values(rng)
    got = forward(transfer, y)
    want = np.array([fwd(v) for v in y], dtype=np.float32)
    assert got.dtype == np.float32
    # Transcendentals are float64-rounded in both; numpy's and math's float64 may differ
    # by a float64 ULP, which can flip a float32 rounding: allow 1 ULP, rarely.
    d = ulp_diff(got, want)
    assert d.max() <= 1 and (d == 0).mean() > 0.99
    x = np.concatenate([got, rng.uniform(0, 6, 100).astype(np.float32)])
    got_inv = inverse(transfer, x)
    want_inv = np.array([inv(v) for v in x], dtype=np.float32)
    assert got_inv.dtype == np.float32
    finite = np.isfinite(want_inv)
    assert np.array_equal(np.isfinite(got_inv), finite)
    d = ulp_diff(got_inv[finite], want_inv[finite])
    assert d.max() <= 1 and (d == 0).mean() > 0.99


@pytest.mark.parametrize("transfer", [Transfer.PU, Transfer.SRGB, Transfer.LOG])
def test_inverse_undoes_forward(transfer, rng) -> None:
    hi = 1.0 if transfer is Transfer.SRGB else 60000.0
    y = np.concatenate([rng.uniform(0, 1, 300), rng.uniform(0, hi, 300)]).astype(np.float32)
    back = inverse(transfer, forward(transfer, y))
    # log(1 + y) loses the low bits of tiny y (as in OIDN): hence the absolute slack
    np.testing.assert_allclose(back, y, rtol=2e-5, atol=1e-7)


def test_linear_is_identity() -> None:
    y = np.array([-1.0, 0.0, 0.5, 1e30, np.inf], dtype=np.float32)
    assert np.array_equal(forward(Transfer.LINEAR, y), y)
    assert np.array_equal(inverse(Transfer.LINEAR, y), y)


def test_pu_known_values() -> None:
    assert forward(Transfer.PU, np.float32([1.0]))[0] == pytest.approx(0.31891, abs=1e-5)
    fmax = np.finfo(np.float32).max
    assert forward(Transfer.PU, np.float32([fmax]))[0] == pytest.approx(5.77, abs=0.01)
    assert forward(Transfer.PU, np.float32([65504.0]))[0] == pytest.approx(1.0, abs=1e-7)
    for t in Transfer:
        assert forward(t, np.float32([0.0]))[0] == 0.0  # zero padding is zero in every space


def test_float32_arrays_stay_float32_with_numpy_scalars() -> None:
    # NEP 50 (numpy 2): python-float scalars do not upcast float32 arrays.
    x = np.ones(4, dtype=np.float32)
    assert (x * 0.1 + 0.2).dtype == np.float32
    for t in Transfer:
        assert forward(t, x).dtype == np.float32
        assert inverse(t, x).dtype == np.float32
    assert forward(Transfer.PU, np.ones(3, dtype=np.float16)).dtype == np.float32


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("RT", {}), Transfer.SRGB),
        (("RT", {"hdr": True}), Transfer.PU),
        (("RT", {"srgb": True}), Transfer.LINEAR),
        (("RT", {"snorm": True}), Transfer.LINEAR),
        (("RT", {"hdr": True, "snorm": True}), Transfer.LINEAR),
        (("RTLightmap", {}), Transfer.LOG),
        (("RTLightmap", {"directional": True}), Transfer.LINEAR),
    ],
)
def test_transfer_for_follows_oidn_table(args, expected) -> None:
    filter_type, flags = args
    assert transfer_for(filter_type, **flags) is expected


def test_transfer_for_rejects_unknown_filter() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown filter type 'Foo'"):
        transfer_for("Foo")


def test_enum_methods_delegate() -> None:
    y = np.float32([0.25, 2.0])
    assert np.array_equal(Transfer.PU.forward(y), forward(Transfer.PU, y))
    assert np.array_equal(Transfer.SRGB.inverse(y), inverse(Transfer.SRGB, y))
