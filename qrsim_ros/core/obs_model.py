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
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def log_normal_pdf(y: ArrayLike, mean: ArrayLike, std: ArrayLike) -> Array:
    """log N(y; mean, std) (closed form; the one place the Gaussian density is written)."""
    z = (np.asarray(y, float) - mean) / std
    return -np.log(std) - _LOG_SQRT_2PI - 0.5 * z * z


class IndepObsModel:
    """QRSim's independent bimodal Gaussian classifier model (``IndepObsModel.m``); stateless."""

    name = "IndepObsModel"
    CH_M = 11.0  # range where the positive/negative means change regime [m]
    CH_MAX_M = 50.0  # ranges are clipped to [0, CH_MAX_M] [m]

    @classmethod
    def _h(cls, range_m: ArrayLike) -> Array:
        return np.clip(np.asarray(range_m, float), 0.0, cls.CH_MAX_M)

    @classmethod
    def positive_stats(cls, range_m: ArrayLike, terrain_class: ArrayLike) -> tuple[Array, Array]:
        """Mean and std of the score of a window that contains a person."""
        h = cls._h(range_m)
        near = h <= cls.CH_M
        mean = np.where(
            near, 0.55 + 0.11 * np.cos(np.pi * (1.0 + h / cls.CH_M)), 0.66 - 0.005 * (h - cls.CH_M)
        )
        mean = mean - 0.1 * (np.asarray(terrain_class) == 2)
        std = (7.4e-5 * h - 0.0061) * h + 0.16
        return mean, std

    @classmethod
    def negative_stats(cls, range_m: ArrayLike, terrain_class: ArrayLike) -> tuple[Array, Array]:
        """Mean and std of the score of a window without a person."""
        h = cls._h(range_m)
        mean = np.where(h <= cls.CH_M, 0.34 + (0.076 / cls.CH_M) * h, 0.416)
        std = (2.4e-5 * h - 0.0016) * h + 0.09 + 0.04 * (np.asarray(terrain_class) == 1)
        return mean, std

    @classmethod
    def sample(
        cls, positive: ArrayLike, range_m: ArrayLike, terrain_class: ArrayLike, rng: np.random.Generator
    ) -> Array:
        """Scores (n,) for n windows: exactly n standard normals, used by the positives first (in window
        order), then by the negatives, as QRSim does."""
        positive = np.asarray(positive, bool)
        range_m = np.asarray(range_m, float)
        terrain_class = np.asarray(terrain_class)
        eta = rng.standard_normal(positive.size)
        n_pos = int(np.count_nonzero(positive))
        y = np.empty(positive.size)
        mp, sp = cls.positive_stats(range_m[positive], terrain_class[positive])
        y[positive] = mp + sp * eta[:n_pos]
        mn, sn = cls.negative_stats(range_m[~positive], terrain_class[~positive])
        y[~positive] = mn + sn * eta[n_pos:]
        return y

    @classmethod
    def log_likelihood_difference(cls, y: ArrayLike, range_m: ArrayLike, terrain_class: ArrayLike) -> Array:
        """log p(y | person) - log p(y | no person) per window (same range and class for both terms)."""
        mp, sp = cls.positive_stats(range_m, terrain_class)
        mn, sn = cls.negative_stats(range_m, terrain_class)
        return log_normal_pdf(y, mp, sp) - log_normal_pdf(y, mn, sn)


#: Observation models selectable by name (QRSim's ``obsmodeltype``).
OBS_MODELS: dict[str, type[IndepObsModel]] = {IndepObsModel.name: IndepObsModel}
