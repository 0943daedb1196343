"""The abstract chain in the PRISM language, and the properties checked on it.

One module ``mission`` with one variable ``s`` (the state index; the state names are comments). The
DTMC's probabilities are exact fractions ``count/visits``; the MDP gives every state one command per
vertex of its transition probabilities' interval set (nondeterministic choice, as the paper's section 7
abstracts an unknown value to its bounds). Labels: each outcome, ``fault_<event>``, ``done``. Rewards:
``time`` (mean sojourn per visit, s) and, in the MDP, ``time_low`` / ``time_high`` (its interval).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from qrsim_ros.verification.abstraction import DONE, FAULT_LABEL_PREFIX, AbstractChain, mdp_choices
from qrsim_ros.verification.formats import SUCCESS

MODULE = "mission"
VARIABLE = "s"


@dataclass(frozen=True)
class Query:
    """One quantity asked of the model: ``name`` as printed, the DTMC formula and the MDP's min / max."""

    name: str
    dtmc: str
    mdp_min: str
    mdp_max: str


def _num(x: float) -> str:
    """A non-negative real as a PRISM literal (plain decimals: PRISM has no exponent notation)."""
    return f"{float(x):.17f}".rstrip("0").rstrip(".") or "0"


def _exact_distribution(q: np.ndarray, denominator: int = 10**15) -> list[Fraction]:
    """``q`` (sums to 1 up to rounding) as fractions summing to exactly 1: each rounded to
    1/``denominator`` but the largest, which takes the rest (so the exact model checker accepts it)."""
    big = int(np.argmax(q))
    out = [Fraction(round(float(x) * denominator), denominator) for x in q]
    out[big] = 1 - (sum(out) - out[big])
    return out


def _state(i: int) -> str:
    return f"{VARIABLE}={i}"


def _guard(states: tuple[int, ...]) -> str:
    return " | ".join(_state(i) for i in states) if states else "false"


def _header(kind: str, chain: AbstractChain, title: str) -> list[str]:
    lines = [f"// {line}" for line in title.splitlines()]
    lines += [kind, "", f"module {MODULE}", f"  {VARIABLE} : [0..{len(chain.states) - 1}] init 0;"]
    return lines


def _footer(chain: AbstractChain, rewards: dict[str, np.ndarray]) -> list[str]:
    lines = ["endmodule", ""]
    lines += [f'label "{name}" = {_guard(states)};' for name, states in chain.labels.items()]
    for name, values in rewards.items():
        lines += ["", f'rewards "{name}"']
        lines += [f"  {_state(i)} : {_num(v)};  // {chain.states[i]}" for i, v in enumerate(values) if v > 0]
        lines.append("endrewards")
    return [*lines, ""]


def _absorbing_command(i: int, name: str) -> str:
    return f"  [] {_state(i)} -> 1 : ({VARIABLE}'={i});  // {name} (absorbing)"


def dtmc_text(chain: AbstractChain, title: str) -> str:
    """The maximum-likelihood DTMC with the "time" reward, as PRISM language text."""
    lines = _header("dtmc", chain, title)
    for i, successors in enumerate(chain.probabilities()):
        if not successors:
            lines.append(_absorbing_command(i, chain.states[i]))
            continue
        update = " + ".join(f"{p.numerator}/{p.denominator} : ({VARIABLE}'={j})"
                            for j, p in successors.items())
        lines.append(f"  [] {_state(i)} -> {update};  // {chain.states[i]}")
    return "\n".join(lines + _footer(chain, {"time": chain.sojourn_s}))


def mdp_text(chain: AbstractChain, title: str, confidence: float = 0.95) -> str:
    """The interval MDP: per state, one command per vertex of its probabilities' interval set; rewards
    "time", "time_low" and "time_high"."""
    lines = _header("mdp", chain, title)
    for i, (targets, vertices) in enumerate(mdp_choices(chain, confidence)):
        if not targets:
            lines.append(_absorbing_command(i, chain.states[i]))
            continue
        lines.append(f"  // {chain.states[i]}: {len(vertices)} choice(s)")
        for q in vertices:
            exact = _exact_distribution(q)
            update = " + ".join(f"{p.numerator}/{p.denominator} : ({VARIABLE}'={j})"
                                for j, p in zip(targets, exact, strict=True) if p > 0)
            lines.append(f"  [] {_state(i)} -> {update};")
    rewards = {"time": chain.sojourn_s, "time_low": chain.sojourn_low_s, "time_high": chain.sojourn_high_s}
    return "\n".join(lines + _footer(chain, rewards))


def queries(chain: AbstractChain) -> list[Query]:
    """P(F outcome) for each outcome (success first), P(F fault_<event>) for each event, and the expected
    time to the end (s)."""
    out = []
    names = [n for n in chain.labels if n != DONE]
    for label in sorted(names, key=lambda n: (n.startswith(FAULT_LABEL_PREFIX), n != SUCCESS, n)):
        reach = f'[ F "{label}" ]'
        out.append(Query(f"P({label})", f"P=? {reach}", f"Pmin=? {reach}", f"Pmax=? {reach}"))
    done = f'[ F "{DONE}" ]'
    out.append(Query("E[mission time] (s)", f'R{{"time"}}=? {done}', f'R{{"time_low"}}min=? {done}',
                     f'R{{"time_high"}}max=? {done}'))
    return out


def properties_text(items: list[Query]) -> str:
    """The queries as a PRISM properties file (DTMC formulas, then the MDP's)."""
    lines = ["// DTMC (abstract_dtmc.prism)"] + [f"{q.dtmc};" for q in items]
    lines += ["", "// interval MDP (abstract_mdp.prism)"]
    lines += [f"{f};" for q in items for f in (q.mdp_min, q.mdp_max)]
    return "\n".join([*lines, ""])
