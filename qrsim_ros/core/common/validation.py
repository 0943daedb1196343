"""Parameter checks shared by every model: one clear error naming the parameter and what is allowed.

Models call these once, at construction; nothing is silently clamped.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.ticks import BASE_DT_S


class ConfigError(ValueError):
    """A model parameter is missing, malformed or out of range."""


def ticks_per_update(name: str, dt_s: float, base_dt_s: float = BASE_DT_S) -> int:
    """Number of base steps between updates of a component with period ``dt_s``.

    Raises ConfigError unless ``dt_s`` is a positive multiple of ``base_dt_s`` (within 1e-6 s).
    """
    dt_s = finite(name, dt_s)
    ticks = round(dt_s / base_dt_s)
    if dt_s <= 0 or ticks < 1 or abs(ticks * base_dt_s - dt_s) > 1e-6:
        raise ConfigError(f"{name}={dt_s!r} s must be a positive multiple of {base_dt_s} s")
    return ticks


def finite(name: str, value: float) -> float:
    """``value`` as a finite float, else ConfigError."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r} must be a number") from None
    if not math.isfinite(v):
        raise ConfigError(f"{name}={value!r} must be finite")
    return v


def non_negative(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """Array of finite values >= 0 (e.g. noise standard deviations), else ConfigError."""
    a = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ConfigError(f"{name}={np.asarray(value).tolist()!r} must be finite and >= 0")
    return a


def positive(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """Array of finite values > 0, else ConfigError."""
    a = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ConfigError(f"{name}={np.asarray(value).tolist()!r} must be finite and > 0")
    return a


def in_range(name: str, value: float, lo: float, hi: float) -> float:
    """Finite float in [lo, hi], else ConfigError."""
    v = finite(name, value)
    if not lo <= v <= hi:
        raise ConfigError(f"{name}={value!r} must be in [{lo}, {hi}]")
    return v


def shape(name: str, value: ArrayLike, expected: tuple[int, ...]) -> NDArray[np.float64]:
    """Finite float array of exactly ``expected`` shape, else ConfigError."""
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be numeric with shape {expected}") from None
    if a.shape != expected or not np.all(np.isfinite(a)):
        raise ConfigError(f"{name} must be a finite array of shape {expected}, got shape {a.shape}")
    return a


def area_limits(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """Flight-area limits [xmin xmax ymin ymax zmin zmax] (NED, m) with each min < max."""
    a = shape(name, value, (6,))
    if not (a[0] < a[1] and a[2] < a[3] and a[4] < a[5]):
        raise ConfigError(f"{name}={a.tolist()} must be [xmin xmax ymin ymax zmin zmax] with min < max")
    return a
