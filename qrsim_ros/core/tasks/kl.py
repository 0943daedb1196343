"""KL divergence estimate and the plume-task rewards (spec 5.4).

``kl_divergence_1nn`` is the 1-nearest-neighbour estimator of Wang, Kulkarni and Verdú (2009, "Divergence
estimation for multidimensional densities via k-nearest-neighbor distances", IEEE Trans. Inf. Theory 55(5)),
exactly as QRSim's ``kl.m`` computes it, including its handling of coincident samples. The puff tasks
(3E-3G) reward an agent with ``-KL(reference || estimate)``, the static plume tasks (3A-3D) with the
negative sum of squared errors.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]

#: Nearest-neighbour distances at or below this are treated as coincident samples and skipped (kl.m).
COINCIDENT_DISTANCE = 1e-20


def _samples(name: str, value: ArrayLike) -> Array:
    """Samples as a finite (n, d) array; a 1-D array is n samples of dimension 1."""
    a = np.asarray(value, dtype=float)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{name} must be an (n, d) array of samples, got shape {np.shape(value)}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite")
    return a


def kl_divergence_1nn(p_samples: ArrayLike, q_samples: ArrayLike) -> float:
    """Estimate KL(P || Q) [nats] from samples P (n, d) and Q (m, d) (spec 5.4, QRSim's ``kl.m``).

    For each P_i: ρ_i = Euclidean distance to its nearest neighbour among the other P samples (itself
    excluded; a duplicate of P_i counts, at distance 0), ν_i = distance to the nearest Q sample. Samples with
    ρ_i <= 1e-20 or ν_i <= 1e-20 are skipped and counted in w. Then
    ``KL = d/(n − w) · Σ ln(ν_i/ρ_i) + ln((m − w)/(n − w − 1))``, and 0 when ``m == w`` (kl.m's rule;
    e.g. KL(P || P) = 0). Returns NaN when fewer than two P samples remain (n − w < 2) or m < w: the
    estimate is undefined there (kl.m would return NaN, Inf or a complex number).

    The neighbour searches use ``scipy.spatial.cKDTree`` (exact, Euclidean).
    """
    p = _samples("p_samples", p_samples)
    q = _samples("q_samples", q_samples)
    n, d = p.shape
    m = q.shape[0]
    if q.shape[1] != d:
        raise ValueError(f"p_samples and q_samples must have the same dimension, got {d} and {q.shape[1]}")
    if n < 2:
        raise ValueError(f"p_samples needs at least 2 samples for the 1-NN estimate, got {n}")
    # imported here: every task module imports this one, and scipy.spatial costs each node process ~0.35 s
    from scipy.spatial import cKDTree

    # k=2 on P itself: column 0 is the sample (or a duplicate of it) at distance 0, column 1 its nearest
    # other sample -- which is 0 for a duplicate, as in kl.m's exclusion by index.
    rho = cKDTree(p).query(p, k=2, workers=-1)[0][:, 1]
    nu = cKDTree(q).query(p, k=1, workers=-1)[0]
    usable = (rho > COINCIDENT_DISTANCE) & (nu > COINCIDENT_DISTANCE)
    w = n - int(np.count_nonzero(usable))
    if m == w:
        return 0.0
    if n - w < 2 or m < w:
        return math.nan
    sum_log = float(np.sum(np.log(nu[usable] / rho[usable])))
    return d / (n - w) * sum_log + math.log((m - w) / (n - w - 1))


def _matching(reference: ArrayLike, estimate: ArrayLike) -> tuple[Array, Array]:
    ref = np.atleast_2d(np.asarray(reference, dtype=float))
    est = np.atleast_2d(np.asarray(estimate, dtype=float))
    return ref, est


def plume_mse_reward(reference: ArrayLike, estimate: ArrayLike) -> float:
    """Reward of the static plume tasks 3A-3D: ``-Σ (reference − estimate)²`` over all K x M entries."""
    ref, est = _matching(reference, estimate)
    if ref.shape != est.shape:
        raise ValueError(f"estimate must have the reference's shape {ref.shape}, got {est.shape}")
    return -float(np.sum((ref - est) ** 2))


def plume_kl_reward(reference: ArrayLike, estimate: ArrayLike) -> float:
    """Reward of the puff tasks 3E-3G: ``-KL(reference || estimate)`` with samples as rows (K x M each;
    the estimate may have a different number of rows, never of columns = locations)."""
    ref, est = _matching(reference, estimate)
    if ref.shape[1] != est.shape[1]:
        raise ValueError(f"estimate must have one column per location ({ref.shape[1]}), got {est.shape[1]}")
    return -kl_divergence_1nn(ref, est)
