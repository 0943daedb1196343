"""The ``retrieve:`` section of a scenario: ireland_2016's search-and-retrieve world and mission settings
(sections 4.7-4.8, Tables 3-4); ``core.tasks.retrieve`` runs it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from qrsim_ros.core.mission.guidance import GuidanceParams
from qrsim_ros.core.sensors.target_camera import TargetCameraParams
from qrsim_ros.core.world.targets import TargetParams


def _box(name: str, value: Any) -> tuple[float, float, float, float]:
    b = tuple(float(v) for v in value)
    if len(b) != 4 or not all(math.isfinite(v) for v in b) or b[0] >= b[1] or b[2] >= b[3]:
        raise ValueError(f"retrieve.{name}={list(value)!r} must be [north_min, north_max, east_min, "
                         "east_max] with min < max")
    return b  # type: ignore[return-value]


def _site(name: str, value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    s = tuple(float(v) for v in value)
    if len(s) != 2 or not all(math.isfinite(v) for v in s):
        raise ValueError(f"retrieve.{name}={list(value)!r} must be [north, east] [m] or null (random)")
    return s  # type: ignore[return-value]


@dataclass(frozen=True)
class RetrieveParams:
    """The scenario's ``retrieve:`` section (defaults: ireland_2016's full mission, section 6.1).

    num_targets: targets on the floor; landing_site_ne_m / heading_rad / drop_site_ne_m: fixed values or
    null for a uniform draw (section 4.8.1) in ``placement_box_ne_m`` / [-pi, pi) / ``drop_box_ne_m``;
    drop_radius_m: R_ds; self_test_failure_probability: P_s; grasp_tolerance_m: how close the grasper
    point must be to a target's top for the grasper to take it [m]; base_radius_m: how close to the
    landing site a landing counts as at the base [m]; targets: the targets' model (``TargetParams``);
    camera: the downward camera (``TargetCameraParams``); guidance: the mission's parameters
    (``GuidanceParams``, Table 4).
    """

    num_targets: int = 3
    landing_site_ne_m: tuple[float, float] | None = None
    heading_rad: float | None = None
    drop_site_ne_m: tuple[float, float] | None = None
    drop_radius_m: float = 0.25
    placement_box_ne_m: tuple[float, float, float, float] = (-1.9, 1.9, -3.4, 3.4)
    drop_box_ne_m: tuple[float, float, float, float] = (-1.5, 1.5, -3.0, 3.0)
    self_test_failure_probability: float = 0.05
    grasp_tolerance_m: float = 0.05
    base_radius_m: float = 0.25
    targets: TargetParams = field(default_factory=TargetParams)
    camera: TargetCameraParams = field(default_factory=TargetCameraParams)
    guidance: GuidanceParams = field(default_factory=GuidanceParams)

    def __post_init__(self) -> None:
        if isinstance(self.num_targets, bool) or int(self.num_targets) != self.num_targets or not (
                1 <= self.num_targets <= 50):
            raise ValueError(f"retrieve.num_targets={self.num_targets!r} must be an integer in [1, 50]")
        _box("placement_box_ne_m", self.placement_box_ne_m)
        _box("drop_box_ne_m", self.drop_box_ne_m)
        _site("landing_site_ne_m", self.landing_site_ne_m)
        _site("drop_site_ne_m", self.drop_site_ne_m)
        if self.heading_rad is not None and not math.isfinite(self.heading_rad):
            raise ValueError(f"retrieve.heading_rad={self.heading_rad!r} must be finite or null (random)")
        for name in ("drop_radius_m", "grasp_tolerance_m", "base_radius_m"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"retrieve.{name}={v!r} must be > 0")
        if not 0.0 <= self.self_test_failure_probability <= 1.0:
            raise ValueError(f"retrieve.self_test_failure_probability={self.self_test_failure_probability!r} "
                             "must be in [0, 1]")
