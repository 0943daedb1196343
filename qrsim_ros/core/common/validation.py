"""Parameter checks shared by every model: one clear error naming the parameter and what is allowed.

Models call these once, at construction; nothing is silently clamped. A frozen parameter dataclass
declares each field's check with the field (``checked``) and runs them all from ``__post_init__``
(``check_fields``), followed by its checks that involve several fields.
"""

from __future__ import annotations

import inspect
import math
import reprlib
from collections.abc import Callable
from dataclasses import field, fields
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.ticks import BASE_DT_S


class ConfigError(ValueError):
    """A model parameter is missing, malformed or out of range."""


#: Longest value an error message shows [characters]; longer ones end in "…".
SHORT_VALUE_CHARS = 80

_repr = reprlib.Repr()  # (keyword arguments only from Python 3.12)
_repr.maxlevel, _repr.maxtuple, _repr.maxlist, _repr.maxdict, _repr.maxset = 3, 6, 6, 4, 6
_repr.maxstring = _repr.maxother = 60


def shorten(value: object, limit: int = SHORT_VALUE_CHARS) -> str:
    """``repr(value)`` cut to at most ``limit`` characters (ending in "…"), for error messages.

    Nested containers are elided level by level (reprlib) before the text is built, so a huge or
    deeply shared value (a YAML alias bomb) costs microseconds, never its full expansion.
    """
    text = _repr.repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


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
    """``value`` as a finite float, else ConfigError. A number only, as the scenario loader takes it:
    true/false and numeric strings ('12') are refused, not read as 1 and 12."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"{name}={shorten(value)} must be a number")
    v = float(value)
    if not math.isfinite(v):
        raise ConfigError(f"{name}={shorten(value)} must be finite")
    return v


def flag(name: str, value: object, *, allow_01: bool = False) -> bool:
    """A boolean switch (e.g. a model's ``on``) as a bool, else ConfigError; with ``allow_01`` also the
    integers 0 and 1 (QRSim configs and YAML write ``on: 1``)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if allow_01:
        if isinstance(value, (int, np.integer)) and value in (0, 1):
            return bool(value)
        raise ConfigError(f"{name}={value!r} must be a boolean (true/false or 1/0)")
    raise ConfigError(f"{name}={value!r} must be true or false")


def set_frozen_field(obj: object, field_name: str, value: object) -> None:
    """Store a normalised value in a field of a frozen dataclass (from its ``__post_init__``)."""
    object.__setattr__(obj, field_name, value)


def _numbers(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """``value`` as a float array, else ConfigError (a string or None is not a ValueError deep inside;
    true/false and numeric strings are refused, not read as 1 and their number)."""
    try:
        raw = np.asarray(value)
        if raw.dtype.kind not in "iuf":  # bools, strings, None and mixed lists (object)
            raise ValueError(raw.dtype)
        if isinstance(value, (list, tuple)) and any(  # [1.0, true]: numpy made the bool a number
                isinstance(x, (bool, np.bool_)) for x in np.asarray(value, dtype=object).ravel()):
            raise ValueError("a bool among numbers")
        return raw.astype(float)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={shorten(value)} must be a number or a list of numbers") from None


def non_negative(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """Array of finite values >= 0 (e.g. noise standard deviations), else ConfigError."""
    a = _numbers(name, value)
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ConfigError(f"{name}={np.asarray(value).tolist()!r} must be finite and >= 0")
    return a


def positive(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """Array of finite values > 0, else ConfigError."""
    a = _numbers(name, value)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ConfigError(f"{name}={np.asarray(value).tolist()!r} must be finite and > 0")
    return a


def single_non_negative(name: str, value: ArrayLike) -> float:
    """One finite number >= 0 (not a list) as a float, else ConfigError."""
    return _single(name, value, non_negative(name, value))


def single_positive(name: str, value: ArrayLike) -> float:
    """One finite number > 0 (not a list) as a float, else ConfigError."""
    return _single(name, value, positive(name, value))


def _single(name: str, value: ArrayLike, checked: NDArray[np.float64]) -> float:
    if checked.ndim != 0:
        raise ConfigError(f"{name}={np.asarray(value).tolist()!r} must be a single number")
    return float(checked)


def in_range(name: str, value: float, lo: float, hi: float) -> float:
    """Finite float in [lo, hi], else ConfigError."""
    v = finite(name, value)
    if not lo <= v <= hi:
        raise ConfigError(f"{name}={value!r} must be in [{lo}, {hi}]")
    return v


def shape(name: str, value: ArrayLike, expected: tuple[int, ...]) -> NDArray[np.float64]:
    """Finite float array of exactly ``expected`` shape, else ConfigError."""
    a = _numbers(name, value)
    if a.shape != expected:
        raise ConfigError(f"{name} must be a finite array of shape {expected}, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ConfigError(f"{name} must be finite, got {shorten(a.tolist())}")
    return a


def area_limits(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """Flight-area limits [xmin xmax ymin ymax zmin zmax] (NED, m) with each min < max."""
    a = shape(name, value, (6,))
    if not (a[0] < a[1] and a[2] < a[3] and a[4] < a[5]):
        raise ConfigError(f"{name}={a.tolist()} must be [xmin xmax ymin ymax zmin zmax] with min < max")
    return a


# --- per-field checks declared with the field ---------------------------------------------------------

#: A field's check: ``rule(name, value)`` returns the value normalised, else raises ConfigError naming
#: ``name``. Every checker above taking (name, value) is one: finite, flag, positive, non_negative,
#: single_positive, single_non_negative, ticks_per_update.
Rule = Callable[[str, Any], Any]


def checked(default: Any, *rules: Rule, store: bool = False) -> Any:
    """A dataclass field with ``default`` whose value ``check_fields`` passes through ``rules`` in turn (each
    gets the previous one's result); with ``store`` the last result replaces the value (its normalised
    form, e.g. a float or a bool), else the value stays as given."""
    return field(default=default, metadata={"check": rules, "store": store})


def between(lo: float, hi: float) -> Rule:
    """Rule: a finite float in [lo, hi] (``in_range``)."""
    return partial(in_range, lo=lo, hi=hi)


def optional(*rules: Rule) -> Rule:
    """Rule: None (unset) passes unchanged, any other value goes through ``rules``."""
    def rule(name: str, value: Any) -> Any:
        return value if value is None else _apply(rules, name, value)
    return rule


def integer_at_least(minimum: int) -> Rule:
    """Rule: an integer (not a bool) >= ``minimum``, as an int."""
    def rule(name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ConfigError(f"{name}={value!r} must be an integer >= {minimum}")
        return int(value)
    return rule


def check_fields(obj: Any, section: str, owner: type | None = None) -> None:
    """Run the rules of ``obj``'s ``checked`` fields in declaration order, naming each field
    ``section.field`` (just ``field`` when ``section`` is ""); store the results of the ``store`` ones.
    Called from the dataclass's ``__post_init__``.

    owner: check only the fields this dataclass declares itself, not the inherited ones (a base class's
    ``__post_init__`` checks those, under its own section); default: every field of ``obj``'s class.
    """
    own = None if owner is None else inspect.get_annotations(owner)
    for f in fields(type(obj) if owner is None else owner):
        rules = f.metadata.get("check")
        if rules is None or (own is not None and f.name not in own):
            continue
        name = f"{section}.{f.name}" if section else f.name
        value = _apply(rules, name, getattr(obj, f.name))
        if f.metadata["store"]:
            set_frozen_field(obj, f.name, value)


def _apply(rules: tuple[Rule, ...], name: str, value: Any) -> Any:
    for rule in rules:
        value = rule(name, value)
    return value
