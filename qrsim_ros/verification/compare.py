"""Model-checked values beside the Monte Carlo estimates of the same batch.

Built from the same runs, the DTMC reproduces the Monte Carlo outcome probabilities and mean mission
time exactly (flow conservation: docs/VERIFICATION.md), so each must fall inside its Monte Carlo
interval; a fault's probability does when the fault happens at most once per episode and the modes
after it cannot lead back to it, and is otherwise the Markov abstraction's estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from qrsim_ros.verification.abstraction import AbstractChain, build_chain
from qrsim_ros.verification.estimates import Estimate, monte_carlo
from qrsim_ros.verification.formats import Batch
from qrsim_ros.verification.prism import Query, dtmc_text, mdp_text, properties_text, queries
from qrsim_ros.verification.storm import CheckResult, check


@dataclass(frozen=True)
class Row:
    """One quantity: the DTMC's value, the MDP's [min, max] and the Monte Carlo estimate."""

    name: str
    checked: float
    mdp_min: float
    mdp_max: float
    monte_carlo: Estimate

    @property
    def inside(self) -> bool:
        """Whether the model-checked value lies in the Monte Carlo interval."""
        return self.monte_carlo.contains(self.checked, tol=1e-9 * max(1.0, abs(self.checked)))


@dataclass(frozen=True)
class Verification:
    """The comparison and what produced it: the PRISM texts and Storm's results."""

    chain: AbstractChain
    rows: tuple[Row, ...]
    dtmc: str
    mdp: str
    properties: str
    dtmc_result: CheckResult
    mdp_result: CheckResult


def verify(batch: Batch, confidence: float = 0.95) -> Verification:
    """Build the DTMC and the interval MDP of ``batch``, check them with Storm, compare with Monte Carlo."""
    chain = build_chain(batch, confidence)
    title = (f"Abstract model of the batch {batch.directory} ({len(batch.episodes)} episodes), "
             "written by qrsim verify")
    items: list[Query] = queries(chain)
    dtmc = dtmc_text(chain, title)
    mdp = mdp_text(chain, title + f"; {confidence:.0%} interval MDP", confidence)
    dtmc_result = check(dtmc, [q.dtmc for q in items])
    mdp_result = check(mdp, [f for q in items for f in (q.mdp_min, q.mdp_max)], exact=False)
    estimates = monte_carlo(batch, confidence)
    rows = tuple(Row(q.name, dtmc_result.values[i], mdp_result.values[2 * i], mdp_result.values[2 * i + 1],
                     estimates[q.name]) for i, q in enumerate(items))
    return Verification(chain, rows, dtmc, mdp, properties_text(items), dtmc_result, mdp_result)


def table_lines(v: Verification) -> list[str]:
    """The comparison as text: one line per quantity, then a verdict line."""
    lines = [f"{'quantity':<24} {'DTMC (Storm)':>13}   {'Monte Carlo [95% CI]':<34} "
             f"{'MDP [min, max]':<26} in CI"]
    for r in v.rows:
        mc = r.monte_carlo
        estimate = f"{mc.value:.6g} [{mc.low:.6g}, {mc.high:.6g}]"
        bounds = f"[{r.mdp_min:.6g}, {r.mdp_max:.6g}]"
        lines.append(f"{r.name:<24} {r.checked:>13.6g}   {estimate:<34} {bounds:<26} "
                     f"{'yes' if r.inside else 'NO'}")
    outside = [r.name for r in v.rows if not r.inside]
    lines.append("")
    lines.append("every model-checked value lies in its Monte Carlo interval" if not outside
                 else f"outside the Monte Carlo interval: {', '.join(outside)}")
    return lines
