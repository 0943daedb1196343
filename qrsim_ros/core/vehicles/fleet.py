"""Fleet-level pieces of the Pelican model: the state limits of a scenario's vehicles (spec 2.7) and the
name of the dynamic-noise streams. ``engine.builders.build_fleet`` builds the fleet from a scenario."""

from __future__ import annotations

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.vehicles.pelican import STATE_VELOCITY_FRD, default_state_limits

#: Name of the dynamic-noise streams (one per vehicle).
DYNAMICS_STREAM = "pelican.dynamics"


def state_limits(area_limits_ned: tuple[float, ...], rate_limit_rads: float, velocity_limit_mps: float
                 ) -> Array:
    """State limits (12, 2) (spec 2.7): the area, angles, body velocities +/- ``velocity_limit_mps`` [m/s],
    body rates +/- ``rate_limit_rads`` [rad/s]."""
    limits = default_state_limits(area_limits_ned, rate_limit_rads)
    limits[STATE_VELOCITY_FRD] = [-velocity_limit_mps, velocity_limit_mps]
    return limits
