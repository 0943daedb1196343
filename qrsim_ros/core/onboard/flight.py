"""Where the onboard autopilots enter a fleet's tick (``mavlink.on``; docs/MAVLINK.md): the one sequence
both front ends run, the in-process ``Simulator`` and the graph's ``mavlink_bridge``.

Per tick, before the fleet's controllers: the link hands the autopilots what arrived
(``OnboardLink.receive``), the autopilots step on the estimated states, and their velocity set points
and headings replace the agent vehicles' (``onboard_targets``). After the controllers: vehicles flown
by offboard attitude set points take them as their attitude commands, and disarmed vehicles' motors stop
(``onboard_controls``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.onboard.autopilot import OnboardAutopilot, Setpoints
from qrsim_ros.core.onboard.link import OnboardLink
from qrsim_ros.core.vehicles.pelican import MOTORS_OFF_CONTROL

Array = NDArray[np.float64]


def onboard_targets(onboard: OnboardAutopilot, link: OnboardLink | None, rows: NDArray[np.int_],
                    now_s: float, ex: Array, valid: NDArray[np.bool_], targets: Array,
                    headings: Array) -> Setpoints:
    """Step the autopilots of the fleet's vehicles ``rows`` at ``now_s`` [s] on the fleet's estimated
    states ``ex`` (N, 20) and validity (N,), after their ``link``'s commands; write their velocity set
    points into ``targets`` (N, >=3) and their headings into ``headings`` (N,); return their set points."""
    if link is not None:
        link.receive(now_s)
    sp = onboard.step(now_s, ex[rows], valid[rows])
    targets[rows, 0:3] = sp.velocity_ned_mps
    headings[rows] = sp.heading_rad
    return sp


def onboard_controls(sp: Setpoints, rows: NDArray[np.int_], controls: Array) -> None:
    """The fleet's controls (N, 5) after the controllers: attitude commands of the vehicles ``rows``
    flown by offboard attitude set points, motors off for the disarmed ones."""
    by_attitude = np.isfinite(sp.attitude_control[:, 0])
    if by_attitude.any():  # offboard attitude set points: the attitude loop's inputs as they are
        controls[rows[by_attitude], :4] = sp.attitude_control[by_attitude]
    if not sp.armed.all():
        controls[rows[~sp.armed]] = MOTORS_OFF_CONTROL
