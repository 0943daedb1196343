"""The scenario's Pelican fleet, built once for the in-process Simulator and the vehicle_dynamics node.

``build_fleet(scenario, streams)``: a ``PelicanFleet`` with the scenario's vehicle parameters (mass,
state limits from the area and the rate/velocity limits, collision distance, dynamic noise) and one
dynamic-noise stream per vehicle, ``streams.per_vehicle("pelican.dynamics", N)``. Both the Simulator
and the node build their fleet here, so a lockstep ROS run integrates exactly the Simulator's noise.
This module imports only the dynamics and the scenario schema (a node needs no other model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from qrsim_ros.core.frames import Array
from qrsim_ros.core.pelican import PelicanFleet, PelicanParams, default_state_limits
from qrsim_ros.core.rng import RandomStreams

if TYPE_CHECKING:
    from qrsim_ros.core.scenario import Scenario

#: Name of the dynamic-noise streams (one per vehicle).
DYNAMICS_STREAM = "pelican.dynamics"


def state_limits(area_limits_ned: tuple[float, ...], rate_limit_rads: float, velocity_limit_mps: float
                 ) -> Array:
    """State limits (12, 2) (spec 2.7): the area, angles, body velocities +/- ``velocity_limit_mps`` [m/s],
    body rates +/- ``rate_limit_rads`` [rad/s]."""
    limits = default_state_limits(area_limits_ned, rate_limit_rads)
    limits[6:9] = [-velocity_limit_mps, velocity_limit_mps]
    return limits


def fleet_params(scenario: Scenario) -> PelicanParams:
    """The scenario's ``PelicanParams`` (``vehicle`` section and area limits)."""
    v = scenario.vehicle
    return PelicanParams(
        mass_kg=v.mass_kg,
        state_limits=state_limits(scenario.area_limits_ned, v.rate_limit_rads, v.velocity_limit_mps),
        collision_distance_m=v.collision_distance_m,
        dyn_noise=np.asarray(v.dyn_noise, float),
    )


def build_fleet(scenario: Scenario, streams: RandomStreams) -> PelicanFleet:
    """The scenario's fleet with its dynamic-noise streams (see the module docstring); vehicles unplaced."""
    n = scenario.num_vehicles
    return PelicanFleet(n, fleet_params(scenario), streams.per_vehicle(DYNAMICS_STREAM, n))
