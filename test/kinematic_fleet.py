"""A kinematic fleet for the onboard autopilot's tests: each vehicle's velocity follows its set point
with a lag, the ground (down = 0) stops a descent, a disarmed vehicle in the air falls; its estimated
state eX is its true state (no sensor noise), so that a test checks the autopilot and nothing else."""

from __future__ import annotations

import numpy as np

from qrsim_ros.core.onboard.autopilot import OnboardAutopilot
from qrsim_ros.core.vehicles.estimated_state import (
    GROUND_VELOCITY_NE,
    HEADING,
    HEIGHT,
    POSITION_NED,
    VERTICAL_SPEED,
    empty_estimated_state,
)

DT_S = 0.02
LAG_S = 0.3  # the kinematic vehicle's velocity lag [s]


class KinematicFleet:
    """N point vehicles: velocity follows the set point (first order, ``LAG_S``), heading jumps to its
    set point, the ground (down = 0) stops a descent; a disarmed vehicle in the air falls at 9.81 m/s^2."""

    def __init__(self, positions_ned: list[tuple[float, float, float]]) -> None:
        self.pos = np.array(positions_ned, float)
        self.vel = np.zeros_like(self.pos)
        self.heading = np.zeros(len(self.pos))
        self.t = 0.0

    def ex(self) -> np.ndarray:
        ex = empty_estimated_state(len(self.pos))
        ex[:, POSITION_NED] = self.pos
        ex[:, 3:5] = 0.0
        ex[:, HEADING] = self.heading
        ex[:, 9:12] = 0.0
        ex[:, 13:16] = 0.0
        ex[:, HEIGHT] = -self.pos[:, 2]
        ex[:, GROUND_VELOCITY_NE] = self.vel[:, 0:2]
        ex[:, VERTICAL_SPEED] = -self.vel[:, 2]
        return ex

    def fly(self, ap: OnboardAutopilot, seconds: float, valid: np.ndarray | None = None,
            before_tick=None, after_step=None) -> list[np.ndarray]:
        """Step ``ap`` and the fleet for ``seconds``; the velocity set points of every tick.
        ``before_tick(t)`` runs before each step, ``after_step(t, ex)`` after it (a front end's outputs)."""
        valid = np.ones(len(self.pos), bool) if valid is None else valid
        out = []
        for _ in range(round(seconds / DT_S)):
            if before_tick is not None:
                before_tick(self.t)
            ex = self.ex()
            sp = ap.step(self.t, ex, valid)
            if after_step is not None:
                after_step(self.t, ex)
            out.append(sp.velocity_ned_mps)
            falling = ~sp.armed & (self.pos[:, 2] < 0)
            target = np.where(sp.armed[:, None], sp.velocity_ned_mps, self.vel)
            target[falling, 2] = self.vel[falling, 2] + 9.81 * LAG_S
            target[~sp.armed & ~falling] = 0.0
            self.vel += (target - self.vel) * (DT_S / LAG_S)
            self.heading = np.where(sp.armed, sp.heading_rad, self.heading)
            self.pos += self.vel * DT_S
            ground = self.pos[:, 2] > 0
            self.pos[ground, 2] = 0.0
            self.vel[ground, 2] = np.minimum(self.vel[ground, 2], 0.0)
            self.t += DT_S
        return out
