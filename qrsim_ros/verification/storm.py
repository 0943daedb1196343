"""Check PRISM language models with Storm (stormpy): the package's only stormpy user.

Models are built with exact rational values and checked in Storm's exact environment (rational linear
equation solving for DTMCs, policy iteration for MDPs), so a value is the model's exact answer, converted
to the nearest float; the DTMC's, built from counts, reproduces the Monte Carlo fractions bit for bit.
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
    exact: tuple[Fraction, ...]
    states: int
    transitions: int
    choices: int
    seconds: float
    storm_version: str


def _fraction(value: object) -> Fraction:
    """A stormpy Rational (printed ``p/q`` or ``p``) as a Fraction."""
    return Fraction(str(value))


def check(program: str, formulas: list[str]) -> CheckResult:
    """Build the PRISM ``program`` (text) with the rewards and labels the ``formulas`` use and check each
    formula (``P=? [...]``, ``Pmax=? [...]``, ``R{"r"}min=? [...]`` ...) at the initial state."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="qrsim-verify-") as tmp:
        path = Path(tmp) / "model.prism"
        path.write_text(program, encoding="utf-8")
        try:
            prism = stormpy.parse_prism_program(str(path))
            properties = stormpy.parse_properties(";".join(formulas), prism)
            model = stormpy.build_model[stormpy.Rational](prism, properties)
        except RuntimeError as exc:
            raise CheckError(f"Storm refused the model: {exc}") from exc
    if len(model.initial_states) != 1:
        raise CheckError(f"the model has {len(model.initial_states)} initial states, expected 1")
    initial = model.initial_states[0]
    env = stormpy.environments.exact()
    exact = []
    for prop in properties:
        result = stormpy.model_checking(model, prop, only_initial_states=True, environment=env)
        exact.append(_fraction(result.get_value(initial)))
    return CheckResult(tuple(float(v) for v in exact), tuple(exact), model.nr_states, model.nr_transitions,
                       model.nr_choices, time.perf_counter() - t0, stormpy.info.storm_version())
