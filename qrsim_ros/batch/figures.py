"""The PNG figures of a batch report (matplotlib's Agg renderer through ``Figure``: no pyplot, no GUI):
outcome probabilities with their Wilson 95 % intervals, and a histogram of every summarised column."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from matplotlib.figure import Figure

from qrsim_ros.batch.jobs import Record
from qrsim_ros.batch.summary import Summary

DPI = 100


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=DPI, format="png", facecolor="white", metadata={"Software": None})
    return buffer.getvalue()


def outcomes_png(summary: Summary, title: str) -> bytes:
    """Bars of the outcome probabilities, the Wilson 95 % interval of each as an error bar."""
    fig = Figure(figsize=(8.0, 4.5), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    names = [o.name for o in summary.outcomes]
    p = [o.p for o in summary.outcomes]
    err = [[o.p - o.wilson95[0] for o in summary.outcomes], [o.wilson95[1] - o.p for o in summary.outcomes]]
    ax.bar(names, p, yerr=err, capsize=6, color="#1f77b4", alpha=0.8)
    for x, o in enumerate(summary.outcomes):
        ax.annotate(f"{o.count}/{summary.episodes}", (x, o.wilson95[1]), textcoords="offset points",
                    xytext=(0, 4), ha="center", fontsize=9)
    ax.set_ylim(0.0, 1.1)
    ax.set_ylabel("probability (95 % Wilson interval)")
    ax.set_title(f"{title}: outcomes of {summary.episodes} episodes")
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def distributions_png(summary: Summary, records: Sequence[Record], title: str) -> bytes | None:
    """One histogram per summarised column (mean and quartiles marked); None if there is none."""
    columns = list(summary.distributions)
    if not columns:
        return None
    cols = min(2, len(columns))
    rows = math.ceil(len(columns) / cols)
    fig = Figure(figsize=(5.5 * cols, 3.6 * rows), dpi=DPI, layout="constrained")
    for k, column in enumerate(columns):
        ax = fig.add_subplot(rows, cols, k + 1)
        d = summary.distributions[column]
        ax.hist([float(r[column]) for r in records], bins="auto", color="#1f77b4", alpha=0.75)
        ax.axvline(d.mean, color="#d62728", label=f"mean {d.mean:.4g}")
        for q in (d.q1, d.median, d.q3):
            ax.axvline(q, color="#2ca02c", linestyle="--", linewidth=1)
        ax.set_xlabel(summary.label(column))
        ax.set_ylabel("episodes")
        ax.legend(fontsize=8, title="dashed: quartiles", title_fontsize=8)
    fig.suptitle(f"{title}: distributions over {summary.episodes} episodes")
    return _png(fig)
