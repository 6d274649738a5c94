"""The correctness check: a result against its float64 reference, with a bound for rounding of its terms."""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

__all__ = ["TOL", "check_result", "rounding_scale"]

#: Relative error (||y - ref|| / ||ref||) allowed per dtype; peers may carry their own (TF32).
TOL = {"float32": 1e-5, "float64": 1e-10}


def _from_torch(y):
    """A torch result as a cupy/numpy array (dlpack, no copy on the device); other arrays unchanged."""
    if type(y).__module__.split(".")[0] == "torch":
        if y.device.type == "cuda":
            import cupy

            return cupy.from_dlpack(y.contiguous())
        return y.numpy()
    return y


def check_result(xp, y, ref, tol: float, rounding: Optional[Callable[[], tuple]] = None) -> tuple[bool, float, str]:
    """(ok, relative error ||y - ref|| / ||ref||, note).

    A result passes when its relative error is within ``tol``; or, failing that, when every element's
    error is within what rounding its terms allows: |y - ref| <= 8 eps (sqrt(terms) + log2 n) (|x| * |w|),
    elementwise, with ``rounding()`` giving (|x| * |w|, eps, terms) (:func:`rounding_scale`, computed only
    when needed). The second test is for data whose result is much smaller than its terms (a log with a large
    offset through a high-pass): a float32 sum of products carries an error proportional to sum |w||x|,
    not to |sum w x|, so the first test would flag a correct kernel. A wrong tap, a shifted window or an
    unwritten element still fails both."""
    y = _from_torch(y)
    if tuple(y.shape) != tuple(ref.shape):
        return False, float("nan"), f"shape {tuple(y.shape)} != expected {tuple(ref.shape)}"
    d = y.astype(np.float64) - ref
    nref = float(xp.linalg.norm(ref))
    err = float(xp.linalg.norm(d)) / (nref if nref > 0 else 1.0)
    if math.isfinite(err) and err <= tol:
        return True, err, ""
    if not ref.size:
        return False, err, f"rel err {err:.2e} > {tol:g}"
    if rounding is not None and math.isfinite(err):
        absref, eps, terms = rounding()
        bound = 8.0 * eps * (math.sqrt(max(1.0, terms)) + math.log2(max(2, ref.shape[-1])))
        if bool((xp.abs(d) <= bound * absref).all()):
            worst = float(xp.max(xp.abs(d) / xp.maximum(absref, np.finfo(np.float64).tiny)))
            return True, err, (f"rel err {err:.1e} > {tol:g}, but every element is within rounding of its terms "
                               f"(|y - ref| <= {worst:.1e} x (|x| * |w|), bound {bound:.1e}): the result is small "
                               "beside its terms, as for an offset through a high-pass")
    amax = float(xp.abs(ref).max())
    bad = ~(xp.abs(d) <= tol * (amax or 1.0))  # NaN counts as bad
    idx = int(xp.argmax(bad.ravel()))
    where = np.unravel_index(idx, ref.shape)
    got, want = float(y[where]), float(ref[where])
    return False, err, (f"rel err {err:.2e} > {tol:g}; first mismatch at {tuple(int(i) for i in where)}: "
                        f"got {got:.6g}, want {want:.6g}")


def rounding_scale(xp, case, inp, ref, dtype: str) -> Callable[[], tuple]:
    """A memoised () -> (|x| correlated with |w| elementwise, unit roundoff of ``dtype``, products per
    output): the scale of a correct result's rounding error (see :func:`check_result`)."""
    memo: list = []

    def get():
        if not memo:
            x, w = inp
            memo.append((case.reference(xp, (xp.abs(x), xp.abs(w))), float(np.finfo(dtype).eps) / 2,
                         case.macs() / max(1, ref.size)))
        return memo[0]

    return get
