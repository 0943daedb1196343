"""Check PRISM language models with Storm (stormpy): the package's only stormpy user.

``exact=True`` (the DTMC) builds the model with rational values and checks it in Storm's exact
environment (rational equation solving): a value is the model's exact answer, rounded to a float, so the
DTMC built from counts reproduces the Monte Carlo fractions exactly. ``exact=False`` (the interval MDP,
where exact policy iteration over many choices is slow) uses floats and Storm's sound environment
(sound value iteration: a guaranteed error bound, 1e-6 by default).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import stormpy
import stormpy.info


class CheckError(RuntimeError):
    """Storm refused the model or a property (a bug of the writer; the message is Storm's)."""


@dataclass(frozen=True)
class CheckResult:
    """Values of the properties at the initial state (probabilities; expected rewards in the reward's
    unit), the model's size and the build + check time (s, wall)."""

    values: tuple[float, ...]
    exact: tuple[Fraction, ...]  # the exact values (exact mode; empty otherwise)
    states: int
    transitions: int
    choices: int
    seconds: float
    storm_version: str


def _fraction(value: object) -> Fraction:
    """A stormpy Rational (printed ``p/q`` or ``p``) as a Fraction."""
    return Fraction(str(value))


def check(program: str, formulas: list[str], exact: bool = True) -> CheckResult:
    """Build the PRISM ``program`` (text) with the rewards and labels the ``formulas`` use and check each
    formula (``P=? [...]``, ``Pmax=? [...]``, ``R{"r"}min=? [...]`` ...) at the initial state; exactly
    (rationals) or soundly (floats, error <= 1e-6)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="qrsim-verify-") as tmp:
        path = Path(tmp) / "model.prism"
        path.write_text(program, encoding="utf-8")
        try:
            prism = stormpy.parse_prism_program(str(path))
            properties = stormpy.parse_properties(";".join(formulas), prism)
            if exact:
                model = stormpy.build_model[stormpy.Rational](prism, properties)
            else:
                model = stormpy.build_model(prism, properties)
        except RuntimeError as exc:
            raise CheckError(f"Storm refused the model: {exc}") from exc
    if len(model.initial_states) != 1:
        raise CheckError(f"the model has {len(model.initial_states)} initial states, expected 1")
    initial = model.initial_states[0]
    env = stormpy.environments.exact() if exact else stormpy.environments.sound()
    raw = [stormpy.model_checking(model, prop, only_initial_states=True, environment=env).get_value(initial)
           for prop in properties]
    fractions = tuple(_fraction(v) for v in raw) if exact else ()
    values = tuple(float(v) for v in fractions) if exact else tuple(float(v) for v in raw)
    return CheckResult(values, fractions, model.nr_states, model.nr_transitions, model.nr_choices,
                       time.perf_counter() - t0, stormpy.info.storm_version())
