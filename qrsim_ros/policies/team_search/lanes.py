"""The team's lanes and their split into bands (siegemund_2011 section 5.4.1): every vehicle computes the
same lanes and the same split, so no message is needed to start; the lanes of a gone vehicle are
re-assigned by the same deterministic rule everywhere."""

from __future__ import annotations

import math

import numpy as np

from qrsim_ros.policies.base import Array
from qrsim_ros.policies.search_pattern import lanes_in_rectangle

#: Track of the lanes [rad from north]: the body diagonal of a north-facing vehicle.
LANE_TRACK_RAD = math.pi / 4


def search_lanes(limits_ned: tuple[float, ...], spacing_m: float, margin_fraction: float,
                 track_rad: float = LANE_TRACK_RAD) -> list[tuple[Array, Array]]:
    """The team's lanes (start, end) (NE, m) over the area without its rim (``margin_fraction`` per side),
    in order of across-track offset (``search_pattern.lanes_in_rectangle``)."""
    lim, f = limits_ned, margin_fraction
    rect = (lim[0] + f * (lim[1] - lim[0]), lim[1] - f * (lim[1] - lim[0]),
            lim[2] + f * (lim[3] - lim[2]), lim[3] - f * (lim[3] - lim[2]))
    return lanes_in_rectangle(rect, track_rad, spacing_m)


def split_lanes(lengths_m: list[float] | Array, num_bands: int) -> list[list[int]]:
    """Contiguous bands of lane indices, one per vehicle, balanced by total lane length: band k takes the
    lanes whose cumulative-length midpoint falls in [k, k + 1) / num_bands of the total. Every lane is in
    exactly one band (a band may be empty when there are more vehicles than lanes)."""
    if num_bands < 1:
        raise ValueError(f"num_bands must be >= 1, got {num_bands}")
    lengths = np.asarray(lengths_m, float)
    total = float(lengths.sum())
    bands: list[list[int]] = [[] for _ in range(num_bands)]
    if lengths.size == 0:
        return bands
    mids = (np.cumsum(lengths) - 0.5 * lengths) / max(total, 1e-12)
    for lane, m in enumerate(mids):
        bands[min(num_bands - 1, int(m * num_bands))].append(lane)
    return bands


def reassign(released: list[int], active_band_centres: dict[int, float]) -> dict[int, list[int]]:
    """Released lanes -> {vehicle row: lanes}: each lane to the active row whose band centre (in lane
    index) is nearest (ties: the lower row). Empty without an active row."""
    out: dict[int, list[int]] = {}
    if not active_band_centres:
        return out
    rows = sorted(active_band_centres)
    for lane in sorted(released):
        best = min(rows, key=lambda r: (abs(active_band_centres[r] - lane), r))
        out.setdefault(best, []).append(lane)
    return out
