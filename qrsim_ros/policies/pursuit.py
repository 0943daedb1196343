"""The cats' pursuit rule of QRSim's cats-and-mouse example (``scenarios/catsmouse/main_catsmouse.m``).

For every cat ``j``: ``u = m - c_j`` (horizontal NED, m) plus a lead ``(|u| / 2) v_m`` along the mouse's
horizontal velocity, then ``U_j = maxv u / |u|`` with ``maxv`` = 3 m/s (the velocity loops' clamp).

What a cat may observe: the example reads the mouse's position and velocity from the mouse's *estimated*
state ``eX(1:2)`` and ``eX(18:19)``, and so do we (``AutopilotView.estimated_state()`` row of the mouse,
the vehicle that is not agent-controlled); the cats' own positions are their estimated states too (one
version of the example used the cat's true position ``getX``; a cat's autopilot only has its estimate).
A cat whose estimate or the mouse's is missing (invalid vehicle) gets zero velocity.

One addition (``standoff_m``, default 5 m; 0 = the example's rule unchanged): the example's cats fly
into the mouse, and a collision (closer than the 2 m collision distance) invalidates both vehicles for a
reward of -1000. Within ``standoff_m`` of the mouse's estimate a cat matches the mouse's velocity plus a
P correction of the distance towards ``standoff_m``. And (``separation_m``, default 8 m; 0 = off) cats
closer to each other than ``separation_m`` add a repulsive velocity ``SEPARATION_GAIN (separation_m -
d) / separation_m`` away from each other (they otherwise bunch up behind the mouse and collide). The
command is then capped at ``speed_mps``. ``Pursuit(view, standoff_m=0, separation_m=0)`` is the example's
rule exactly.
"""

from __future__ import annotations

import numpy as np

from qrsim_ros.core.vehicles.controllers import MAX_SPEED_MPS
from qrsim_ros.core.vehicles.estimated_state import GROUND_VELOCITY_NE, NORTH_EAST
from qrsim_ros.policies.base import Array, AutopilotView, PolicyError

STANDOFF_GAIN_PER_S = 0.5  #: velocity per metre of stand-off error [1/s]
SEPARATION_GAIN_MPS = 3.0  #: repulsion between two cats at zero distance [m/s]


class Pursuit:
    """Velocity commands of the cats towards the mouse's predicted position (see the module docstring)."""

    def __init__(self, view: AutopilotView, speed_mps: float = MAX_SPEED_MPS, standoff_m: float = 5.0,
                 separation_m: float = 8.0) -> None:
        spec = view.action_spec
        self.rows = np.asarray(spec["vehicles"], int)
        others = sorted(set(range(view.num_vehicles)) - set(self.rows.tolist()))
        if view.task.type != "cats_mouse" or len(others) != 1:
            raise PolicyError("pursuit is the cats-and-mouse policy: it needs exactly one vehicle (the "
                              f"mouse) not controlled by the agent; task is {view.task.type!r}")
        if any(m not in ("velocity", "velocity_height") for m in spec["modes"]):
            raise PolicyError(f"pursuit needs velocity or velocity_height control, got {spec['modes']}")
        self.mouse = others[0]
        self.width = int(spec["width"])
        self.speed_mps = float(speed_mps)
        self.standoff_m = float(standoff_m)
        self.separation_m = float(separation_m)

    def __call__(self, view: AutopilotView) -> Array:
        ex = view.estimated_state()
        mouse_pos, mouse_vel = ex[self.mouse, NORTH_EAST], ex[self.mouse, GROUND_VELOCITY_NE]
        u = mouse_pos[None, :] - ex[self.rows, NORTH_EAST]
        dist = np.linalg.norm(u, axis=1, keepdims=True)
        u = u + 0.5 * dist * mouse_vel[None, :]  # lead the mouse more the farther it is
        norm = np.linalg.norm(u, axis=1, keepdims=True)
        ok = np.isfinite(norm[:, 0]) & (norm[:, 0] > 1e-9)
        a = np.zeros((len(self.rows), self.width))
        a[ok, 0:2] = self.speed_mps * u[ok] / norm[ok]
        close = ok & (dist[:, 0] < self.standoff_m)
        if close.any():  # hold the stand-off: follow the mouse, close the distance error slowly
            towards = (mouse_pos[None, :] - ex[self.rows, NORTH_EAST])[close] / np.maximum(dist[close], 1e-9)
            v = mouse_vel[None, :] + STANDOFF_GAIN_PER_S * (dist[close] - self.standoff_m) * towards
            speed = np.linalg.norm(v, axis=1, keepdims=True)
            a[close, 0:2] = v * np.minimum(1.0, self.speed_mps / np.maximum(speed, 1e-9))
        if self.separation_m > 0 and len(self.rows) > 1:
            cats = ex[self.rows, NORTH_EAST]
            diff = cats[:, None, :] - cats[None, :, :]  # (i, j): from cat j to cat i
            d = np.linalg.norm(diff, axis=2)
            near = np.isfinite(d) & (d < self.separation_m) & ~np.eye(len(self.rows), dtype=bool)
            push = np.where(near, SEPARATION_GAIN_MPS * (self.separation_m - d) / self.separation_m, 0.0)
            rep = np.sum(np.nan_to_num(push[:, :, None] * diff / np.maximum(d, 1e-9)[:, :, None]), axis=1)
            v = a[:, 0:2] + np.where(ok[:, None], rep, 0.0)
            speed = np.linalg.norm(v, axis=1, keepdims=True)
            a[:, 0:2] = v * np.minimum(1.0, self.speed_mps / np.maximum(speed, 1e-9))
        return a


def pursuit(view: AutopilotView) -> Pursuit:
    """Factory of ``Pursuit``."""
    return Pursuit(view)
