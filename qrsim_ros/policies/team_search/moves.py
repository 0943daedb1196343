"""How the team's set points are shaped before they are flown: no descent onto a candidate from afar, no
closing in on another vehicle's broadcast position, no leaving the area, a landing slowing near the
ground (docs/TEAMS.md, "Team search"). Pure functions of the set point and what the vehicle heard."""

from __future__ import annotations

import math

import numpy as np

from qrsim_ros.core.vehicles.controllers import MAX_SPEED_MPS
from qrsim_ros.core.vehicles.estimated_state import GROUND_VELOCITY_NE, HEIGHT, NORTH_EAST
from qrsim_ros.policies.base import Array
from qrsim_ros.policies.team_search.messages import ProgressMessage, extrapolated_ne, recent
from qrsim_ros.policies.team_search.params import (
    APPROACH_DESCENT_RADIUS_M,
    LANDED_HEIGHT_M,
    LANDING_FINAL_RATE_MPS,
    SEPARATION_LOOKAHEAD_S,
    TeamSearchParams,
)


def descend_only_over(v_ned: Array, target_ne: Array, pos_ne: Array) -> Array:
    """``v_ned`` [m/s] without its descent while ``pos_ne`` is more than ``APPROACH_DESCENT_RADIUS_M`` from
    ``target_ne`` [m]: across at the layer's height, then down (a slanting descent to a candidate met the
    sides of obstacles up to 20 m tall; over it, the down beam guards the descent)."""
    if v_ned[2] > 0.0 and float(np.linalg.norm(np.asarray(target_ne) - pos_ne)) > APPROACH_DESCENT_RADIUS_M:
        v_ned = v_ned.copy()
        v_ned[2] = 0.0
    return v_ned


def landing_rate(height_m: float, descent_rate_mps: float) -> float:
    """Descent rate [m/s] of a landing at ``height_m`` above ground: ``descent_rate_mps``, slower over
    the last metres (a zero set point at 1 m/s sank the vehicle 0.3 m further, into the ground: out of
    the area, lost), 0 from ``LANDED_HEIGHT_M``."""
    if height_m <= LANDED_HEIGHT_M:
        return 0.0
    return min(descent_rate_mps, max(LANDING_FINAL_RATE_MPS, 0.5 * (height_m - LANDED_HEIGHT_M)))


def crowded(heard: dict[int, ProgressMessage], now_s: float, ex: Array, separation_m: float) -> bool:
    """Whether another vehicle's broadcast position is within 3 x ``separation_m`` (and 2.5 m in
    height): the positions are then broadcast every ``near_broadcast_period_s``. ``heard``: vehicle ->
    its last message."""
    for _, m in recent(heard, now_s):
        q = extrapolated_ne(m, now_s)
        if float(np.linalg.norm(ex[NORTH_EAST] - q)) < 3.0 * separation_m and \
                abs(float(ex[HEIGHT]) - m.height_m) <= 2.5:
            return True
    return False


def separate(p: TeamSearchParams, heard: dict[int, ProgressMessage], now_s: float, ex: Array,
             v: Array) -> Array:
    """``v`` plus the push away from the others' broadcast positions (``separation_m``; the closest
    approach within ``SEPARATION_LOOKAHEAD_S``); no vertical move towards another within half of it.
    ``heard``: vehicle -> its last message; ``ex``: the vehicle's estimated state (eX)."""
    if p.separation_m <= 0.0 or not heard:
        return v
    pos, height = ex[NORTH_EAST], float(ex[HEIGHT])
    # the heights this vehicle passes in the next SEPARATION_LOOKAHEAD_S (climbing or descending
    # through the others' layers), +-2.5 m
    ahead = height - float(v[2]) * SEPARATION_LOOKAHEAD_S if math.isfinite(v[2]) else height
    low, high = min(height, ahead) - 2.5, max(height, ahead) + 2.5
    own_v = ex[GROUND_VELOCITY_NE] if np.all(np.isfinite(ex[GROUND_VELOCITY_NE])) else np.zeros(2)
    push = np.zeros(2)
    aways: list[Array] = []  # from each vehicle within separation_m, now or at the closest approach
    for other, m in recent(heard, now_s):
        if not low <= m.height_m <= high:
            continue
        # the horizontal offset at the closest approach within SEPARATION_LOOKAHEAD_S, both keeping
        # their velocities (this one's estimated, the other's broadcast one)
        r = now = pos - extrapolated_ne(m, now_s)
        d_now = float(np.linalg.norm(now))
        if 1e-6 < d_now < p.separation_m:  # (the closest approach's direction can differ)
            aways.append(now / d_now)
        w = own_v - np.asarray(m.velocity_ne_mps)
        ww = float(w @ w)
        if ww > 1e-9:
            r = r + w * min(max(-float(r @ w) / ww, 0.0), SEPARATION_LOOKAHEAD_S)
        d = float(np.linalg.norm(r))
        if d >= p.separation_m:
            continue
        away = r / d if d > 1e-6 else np.array([math.cos(other), math.sin(other)])
        push += p.separation_gain_per_s * (p.separation_m - d) * away
        aways.append(away)
        if d < p.separation_m / 2 and ((v[2] > 0.0 and m.height_m < height) or
                                       (v[2] < 0.0 and m.height_m > height)):
            v = v.copy()  # nearly above or below it: no descent or climb onto it until pushed aside
            v[2] = 0.0
    if not aways:
        return v
    out = v.copy()
    out[0:2] += push
    speed = float(np.linalg.norm(out[0:2]))
    cap = math.sqrt(2) * MAX_SPEED_MPS
    if speed > cap:
        out[0:2] *= cap / speed
    # no closing in on any of them: the components towards each go (the set point's and the pushes
    # from the others: in a crowd their sum can point at a neighbour); repeated, as removing one
    # can bring back another
    for _ in range(3):
        for away in aways:
            toward = -float(out[0:2] @ away)
            if toward > 0.0:
                out[0:2] += toward * away
    return out


def keep_inside(limits_ne: tuple[float, ...], rim_m: float, pos: Array, v: Array) -> Array:
    """``v`` with its north/east components towards a limit within ``rim_m`` capped
    (``TeamSearchParams.rim_m``); ``limits_ne``: the area's north lo/hi, east lo/hi [m]."""
    rim = rim_m
    if rim <= 0.0:
        return v
    out = v
    for j in (0, 1):
        lo, hi = limits_ne[2 * j], limits_ne[2 * j + 1]
        for gap, sign in ((float(pos[j]) - lo, -1.0), (hi - float(pos[j]), 1.0)):
            if gap >= rim:
                continue
            allowed = max(0.0, (gap - rim / 2) / (rim / 2)) * MAX_SPEED_MPS
            if gap < rim / 2:
                allowed = -0.5  # back in
            if sign * float(out[j]) > allowed:
                out = out.copy() if out is v else out
                out[j] = sign * allowed
    return out
