"""What every figure of ``qrsim plot`` shares: sizes, resolution, vehicle colours, figure creation and
saving (matplotlib's Agg renderer through ``matplotlib.figure.Figure``: no pyplot, no GUI)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from qrsim_ros.plots.bagdata import RunData

#: Resolution of every PNG [dots per inch].
DPI = 100
#: Size of each figure [in] (width, height); at DPI these give the PNG's pixel dimensions.
FIGURE_SIZES_IN: dict[str, tuple[float, float]] = {
    "top_view": (12.0, 9.0),
    "altitude_speed": (11.0, 7.5),
    "reward": (11.0, 7.5),
    "plume": (14.0, 6.5),
    "gps_error": (11.0, 7.5),
    "battery": (11.0, 7.5),
    "faults": (11.0, 6.0),
    "mission_path": (13.0, 7.5),
    "mission_height": (13.0, 7.5),
    "mission_battery": (12.0, 6.0),
}
#: Vehicle colours (matplotlib's tab10), cycled for more than ten vehicles.
VEHICLE_COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#d62728", "#17becf", "#e377c2", "#8c564b",
                   "#bcbd22", "#7f7f7f", "#2ca02c")


def vehicle_colour(i: int) -> str:
    return VEHICLE_COLOURS[i % len(VEHICLE_COLOURS)]


def estimate_colour(i: int) -> tuple[float, float, float]:
    """A darker shade of vehicle i's colour for its estimates (GPS, altimeter), drawn over the truth."""
    r, g, b = to_rgb(vehicle_colour(i))
    return (0.55 * r, 0.55 * g, 0.55 * b)


def new_figure(name: str) -> Figure:
    """An empty figure of ``FIGURE_SIZES_IN[name]`` at ``DPI``, constrained layout."""
    return Figure(figsize=FIGURE_SIZES_IN[name], dpi=DPI, layout="constrained")


def save(fig: Figure, path: Path) -> None:
    """Write the figure as a PNG on white."""
    fig.savefig(path, dpi=DPI, format="png", facecolor="white")


def title(run: RunData, what: str) -> str:
    return f"{run.scenario}: {what}"


def legend_outside(ax, handles=None, **kw) -> None:  # type: ignore[no-untyped-def]
    """Legend to the right of the axes, so it never covers the data."""
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              fontsize=9, **kw)
