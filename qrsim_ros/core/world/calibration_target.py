"""Checkerboard calibration targets painted on the ground of the 3-D scene (beyond QRSim;
docs/CAMERAS.md).

A target is a flat mat lying on the ground (draped over a height map): ``squares`` = (n0, n1) squares
of side ``square_m`` [m], its first axis turned ``yaw_rad`` from north towards east, its centre at
``center_ne_m``, inside a white margin ``border_squares`` squares wide (the quiet zone a detector such as
``cv2.findChessboardCorners`` needs). Square (a, b) (a along the first axis from its negative end, b
along the second) is black when a + b is even. It has no thickness: the cameras see it, the lidar and
the range finders see the ground under it.

A pattern of (n0, n1) squares has (n0 - 1) x (n1 - 1) inner corners (OpenCV's ``patternSize``);
``inner_corners_ne`` lists them, the first axis varying fastest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.validation import ConfigError, finite

#: Largest number of targets in a scene (each is tested for every ground pixel).
MAX_TARGETS = 16


@dataclass(frozen=True)
class CalibrationTargetParams:
    """One checkerboard on the ground (module docstring). center_ne_m: north/east of its centre [m];
    squares: squares along its first and second axis (>= 2 each); square_m: side of a square [m];
    yaw_rad: angle of the first axis from north towards east [rad]; border_squares: width of the white
    margin around the board [squares]."""

    center_ne_m: tuple[float, float] = (0.0, 0.0)
    squares: tuple[int, int] = (9, 7)
    square_m: float = 0.5
    yaw_rad: float = 0.0
    border_squares: float = 1.0

    def __post_init__(self) -> None:
        for i, c in enumerate(self.center_ne_m):
            finite(f"calibration_targets.center_ne_m[{i}]", c)
        if len(self.squares) != 2 or any(isinstance(s, bool) or int(s) != s or not 2 <= s <= 100
                                         for s in self.squares):
            raise ConfigError(f"calibration_targets.squares={list(self.squares)!r} must be two integers "
                              "in 2..100 (squares along the first and second axis)")
        if not finite("calibration_targets.square_m", self.square_m) > 0.0:
            raise ConfigError(f"calibration_targets.square_m={self.square_m!r} must be > 0")
        finite("calibration_targets.yaw_rad", self.yaw_rad)
        if not 0.0 <= finite("calibration_targets.border_squares", self.border_squares) <= 10.0:
            raise ConfigError(f"calibration_targets.border_squares={self.border_squares!r} "
                              "must be in [0, 10]")

    @property
    def pattern_size(self) -> tuple[int, int]:
        """Inner corners along the first and second axis (OpenCV's ``patternSize``)."""
        return int(self.squares[0]) - 1, int(self.squares[1]) - 1

    def axes_ne(self) -> Array:
        """The board's first and second axis as unit north/east vectors (2, 2) (rows)."""
        c, s = math.cos(self.yaw_rad), math.sin(self.yaw_rad)
        return np.array([[c, s], [-s, c]])

    def inner_corners_ne(self) -> Array:
        """North/east [m] of the inner corners ((n0 - 1)(n1 - 1), 2), the first axis varying fastest."""
        n0, n1 = (int(s) for s in self.squares)
        a = (np.arange(1, n0) - 0.5 * n0) * self.square_m
        b = (np.arange(1, n1) - 0.5 * n1) * self.square_m
        aa, bb = np.meshgrid(a, b)  # rows along b, columns along a: a varies fastest
        axes = self.axes_ne()
        return np.asarray(self.center_ne_m) + aa.reshape(-1, 1) * axes[0] + bb.reshape(-1, 1) * axes[1]

    def packed(self) -> Array:
        """The renderer's row: centre n, e, cos yaw, sin yaw, square, n0, n1, border [squares]."""
        return np.array([self.center_ne_m[0], self.center_ne_m[1], math.cos(self.yaw_rad),
                         math.sin(self.yaw_rad), self.square_m, self.squares[0], self.squares[1],
                         self.border_squares], float)


def pack_targets(targets: tuple[CalibrationTargetParams, ...]) -> Array:
    """The rows (T, 8) of ``CalibrationTargetParams.packed`` for the renderer."""
    if len(targets) > MAX_TARGETS:
        raise ConfigError(f"calibration_targets: {len(targets)} targets, at most {MAX_TARGETS}")
    return np.array([t.packed() for t in targets], float).reshape(-1, 8)
