"""Observation model of the person classifier: ``IndepObsModel`` (spec 3.5).

Each window's classifier score is an independent Gaussian whose mean and std depend on the slant range
``h`` camera -> window centre [m] (clipped to [0, 50]) and the window's terrain class ``c``
(0 clear, 1 clutter: wider negatives, 2 occlusion: lower positives):

    m+(h, c) = [h <= 11] (0.55 + 0.11 cos(pi (1 + h / 11))) + [h > 11] (0.66 - 0.005 (h - 11)) - 0.1 [c == 2]
    s+(h)    = (7.4e-5 h - 0.0061) h + 0.16
    m-(h)    = [h <= 11] (0.34 + (0.076 / 11) h) + [h > 11] 0.416
    s-(h, c) = (2.4e-5 h - 0.0016) h + 0.09 + 0.04 [c == 1]

A window with a person has score ``y ~ N(m+, s+)``, otherwise ``y ~ N(m-, s-)``; the output is the log
likelihood difference ``log N(y; m+, s+) - log N(y; m-, s-)`` at the window's own (h, c).
QRSim's alternative ``GPObsModel`` (gpml Gaussian processes, used by no scenario) is not implemented.

The formulas are written once, as scalar kernels (``_stats``, ``_log_normal_pdf``) compiled by numba when
available (``qrsim_ros.core.common.jit``); a camera frame evaluates all its windows in one compiled call.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.jit import F8_1D_IN, njit

Array = NDArray[np.float64]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)

CH_M = 11.0  # range where the positive/negative means change regime [m]
CH_MAX_M = 50.0  # ranges are clipped to [0, CH_MAX_M] [m]


def log_normal_pdf(y: ArrayLike, mean: ArrayLike, std: ArrayLike) -> Array:
    """log N(y; mean, std) (closed form; ``_log_normal_pdf`` is the same formula for one value)."""
    z = (np.asarray(y, float) - mean) / std
    return -np.log(std) - _LOG_SQRT_2PI - 0.5 * z * z


# --- kernels ----------------------------------------------------------------------------------------

_B1_IN = "Array(boolean, 1, 'A', readonly=True)"
_I8_1D_IN = "Array(int64, 1, 'A', readonly=True)"


@njit("float64(float64, float64, float64)")
def _log_normal_pdf(y, mean, std):
    z = (y - mean) / std
    return -math.log(std) - _LOG_SQRT_2PI - 0.5 * z * z


@njit("UniTuple(float64, 4)(float64, float64)")
def _stats(range_m, terrain_class):
    """(m+, s+, m-, s-) of one window (module doc); NaN range gives NaN."""
    h = range_m
    if h < 0.0:
        h = 0.0
    elif h > CH_MAX_M:
        h = CH_MAX_M
    if h <= CH_M:
        mean_pos = 0.55 + 0.11 * math.cos(math.pi * (1.0 + h / CH_M))
        mean_neg = 0.34 + (0.076 / CH_M) * h
    else:
        mean_pos = 0.66 - 0.005 * (h - CH_M)
        mean_neg = 0.416
    if terrain_class == 2.0:
        mean_pos = mean_pos - 0.1
    std_pos = (7.4e-5 * h - 0.0061) * h + 0.16
    std_neg = (2.4e-5 * h - 0.0016) * h + 0.09
    if terrain_class == 1.0:
        std_neg = std_neg + 0.04
    return mean_pos, std_pos, mean_neg, std_neg


@njit(f"void({F8_1D_IN}, {F8_1D_IN}, float64[::1], float64[::1], float64[::1], float64[::1])")
def _stats_rows(range_m, terrain_class, mean_pos, std_pos, mean_neg, std_neg):
    for k in range(range_m.shape[0]):
        mean_pos[k], std_pos[k], mean_neg[k], std_neg[k] = _stats(range_m[k], terrain_class[k])


@njit(f"void({F8_1D_IN}, {F8_1D_IN}, {F8_1D_IN}, float64[::1])")
def _llkd_rows(y, range_m, terrain_class, llkd):
    for k in range(y.shape[0]):
        mp, sp, mn, sn = _stats(range_m[k], terrain_class[k])
        llkd[k] = _log_normal_pdf(y[k], mp, sp) - _log_normal_pdf(y[k], mn, sn)


@njit(f"void({_B1_IN}, {F8_1D_IN}, {_I8_1D_IN}, {F8_1D_IN}, int64, int64, float64[::1], float64[::1])")
def _frame_scores_into(positive, range_m, terrain_class, eta, k0, k1, y, llkd):
    """Scores y and llkd of the windows k0..k1-1 of one frame from the standard normals eta[k0:k1]: the
    positives use the first ones in window order, the negatives the rest. A window without a range
    (NaN: it does not see the ground) gets NaN but still uses its normal."""
    n_pos = 0
    for k in range(k0, k1):
        if positive[k]:
            n_pos += 1
    kp, kn = k0, k0 + n_pos
    for k in range(k0, k1):
        if positive[k]:
            e = eta[kp]
            kp += 1
        else:
            e = eta[kn]
            kn += 1
        if math.isnan(range_m[k]):
            y[k] = math.nan
            llkd[k] = math.nan
            continue
        mp, sp, mn, sn = _stats(range_m[k], float(terrain_class[k]))
        yk = mp + sp * e if positive[k] else mn + sn * e
        y[k] = yk
        llkd[k] = _log_normal_pdf(yk, mp, sp) - _log_normal_pdf(yk, mn, sn)


@njit(f"void({_B1_IN}, {F8_1D_IN}, {_I8_1D_IN}, {F8_1D_IN}, {_I8_1D_IN}, float64[::1], float64[::1])")
def _frames_scores_into(positive, range_m, terrain_class, eta, starts, y, llkd):
    """``_frame_scores_into`` for the frames whose windows are rows starts[f]:starts[f+1]."""
    for f in range(starts.shape[0] - 1):
        _frame_scores_into(positive, range_m, terrain_class, eta, starts[f], starts[f + 1], y, llkd)


def _flat_pair(range_m: ArrayLike, terrain_class: ArrayLike) -> tuple[Array, Array, tuple[int, ...]]:
    h, c = np.broadcast_arrays(np.asarray(range_m, float), np.asarray(terrain_class, float))
    return h.reshape(-1), c.reshape(-1), h.shape


class IndepObsModel:
    """QRSim's independent bimodal Gaussian classifier model (``IndepObsModel.m``); stateless."""

    name = "IndepObsModel"
    CH_M = CH_M
    CH_MAX_M = CH_MAX_M

    @classmethod
    def stats(cls, range_m: ArrayLike, terrain_class: ArrayLike) -> tuple[Array, Array, Array, Array]:
        """(m+, s+, m-, s-) of windows at slant ranges ``range_m`` [m] with terrain classes (broadcast)."""
        h, c, shape = _flat_pair(range_m, terrain_class)
        out = [np.empty(h.size) for _ in range(4)]
        _stats_rows(h, c, *out)
        mp, sp, mn, sn = (a.reshape(shape) for a in out)
        return mp, sp, mn, sn

    @classmethod
    def positive_stats(cls, range_m: ArrayLike, terrain_class: ArrayLike) -> tuple[Array, Array]:
        """Mean and std of the score of a window that contains a person."""
        mp, sp, _, _ = cls.stats(range_m, terrain_class)
        return mp, sp

    @classmethod
    def negative_stats(cls, range_m: ArrayLike, terrain_class: ArrayLike) -> tuple[Array, Array]:
        """Mean and std of the score of a window without a person."""
        _, _, mn, sn = cls.stats(range_m, terrain_class)
        return mn, sn

    @classmethod
    def scores_from_normals(
        cls, positive: ArrayLike, range_m: ArrayLike, terrain_class: ArrayLike, eta: ArrayLike,
        frame_starts: ArrayLike | None = None,
    ) -> tuple[Array, Array]:
        """Scores and log likelihood differences (n,) of n windows from n standard normals ``eta``, used
        by the positives first (in window order), then by the negatives, as QRSim does.

        frame_starts: (F + 1,) window rows where each of F stacked frames starts (and the end); each
        frame uses its own normals eta[starts[f]:starts[f+1]] that way. Default: one frame. Windows with a
        NaN range (that do not see the ground) get NaN.
        """
        positive = np.asarray(positive, bool).reshape(-1)
        range_m = np.asarray(range_m, float).reshape(-1)
        terrain_class = np.asarray(terrain_class).reshape(-1)
        eta = np.asarray(eta, float).reshape(-1)
        n = positive.size
        if not (range_m.size == terrain_class.size == eta.size == n):
            raise ValueError(f"positive, range_m, terrain_class and eta must have {n} elements each, got "
                             f"{range_m.size}, {terrain_class.size}, {eta.size}")
        if terrain_class.dtype != np.int64:  # only classes 1 and 2 matter: anything else acts as 0
            with np.errstate(invalid="ignore"):
                as_int = terrain_class.astype(np.int64)
            terrain_class = np.where(as_int == terrain_class, as_int, 0)
        starts = np.array([0, n]) if frame_starts is None else np.asarray(frame_starts, np.int64).reshape(-1)
        if starts.size < 1 or starts[0] != 0 or starts[-1] != n or np.any(np.diff(starts) < 0):
            raise ValueError(f"frame_starts must rise from 0 to {n}, got {starts}")
        return cls.scores_of_frames(positive, range_m, terrain_class, eta, starts)

    @classmethod
    def scores_of_frames(
        cls, positive: NDArray[np.bool_], range_m: Array, terrain_class: NDArray[np.int64], eta: Array,
        frame_starts: NDArray[np.int64],
    ) -> tuple[Array, Array]:
        """``scores_from_normals`` without conversions or checks, for the camera's frames: 1-D arrays of
        n elements (bool, float64, int64, float64) and int64 frame_starts rising from 0 to n."""
        y, llkd = np.empty(positive.size), np.empty(positive.size)
        _frames_scores_into(positive, range_m, terrain_class, eta, frame_starts, y, llkd)
        return y, llkd

    @classmethod
    def sample(
        cls, positive: ArrayLike, range_m: ArrayLike, terrain_class: ArrayLike, rng: np.random.Generator
    ) -> Array:
        """Scores (n,) for n windows: exactly n standard normals, used by the positives first (in window
        order), then by the negatives, as QRSim does."""
        positive = np.asarray(positive, bool)
        eta = rng.standard_normal(positive.size)
        return cls.scores_from_normals(positive, range_m, terrain_class, eta)[0]

    @classmethod
    def log_likelihood_difference(cls, y: ArrayLike, range_m: ArrayLike, terrain_class: ArrayLike) -> Array:
        """log p(y | person) - log p(y | no person) per window (same range and class for both terms)."""
        y_b, h, c = np.broadcast_arrays(np.asarray(y, float), np.asarray(range_m, float),
                                        np.asarray(terrain_class, float))
        out = np.empty(y_b.size)
        _llkd_rows(y_b.reshape(-1), h.reshape(-1), c.reshape(-1), out)
        return out.reshape(y_b.shape)


#: Observation models selectable by name (QRSim's ``obsmodeltype``).
OBS_MODELS: dict[str, type[IndepObsModel]] = {IndepObsModel.name: IndepObsModel}
