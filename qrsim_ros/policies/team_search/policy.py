"""``TeamSearch``: the team's lane-by-lane search, one ``Agent`` per vehicle (the package docstring)."""

from __future__ import annotations

import logging
import math

import numpy as np

from qrsim_ros.core.comms import BROADCAST
from qrsim_ros.core.vehicles.controllers import MAX_SPEED_MPS
from qrsim_ros.core.vehicles.estimated_state import GROUND_VELOCITY_NE, HEIGHT, NORTH_EAST
from qrsim_ros.policies.base import Array, AutopilotView, PolicyError
from qrsim_ros.policies.search_pattern import (
    APPROACH,
    CLIMB,
    HOLD,
    SEARCH,
    SearchPattern,
    check_search_view,
    footprint_width_m,
    goto_velocity,
    lane_speed_mps,
    search_height_m,
)
from qrsim_ros.policies.team_search.agent import Agent, OneVehicleView
from qrsim_ros.policies.team_search.lanes import LANE_TRACK_RAD, reassign, search_lanes, split_lanes
from qrsim_ros.policies.team_search.messages import (
    GONE_STATES,
    ProgressMessage,
    VehicleState,
    decode_progress,
    encode_progress,
    extrapolated_ne,
    recent,
)
from qrsim_ros.policies.team_search.moves import (
    crowded,
    descend_only_over,
    keep_inside,
    landing_rate,
    separate,
)
from qrsim_ros.policies.team_search.params import (
    HOME_DESCENT_RADIUS_M,
    HOME_HOLD_GAIN_PER_S,
    LANDED_HEIGHT_M,
    LANDING_CLEARANCE_M,
    TeamSearchParams,
)

#: The package's logger (the team's warnings: malformed or forged messages).
LOG = logging.getLogger(__package__)


class TeamSearch:
    """The team search (see the package docstring). Public for inspection: ``agents`` (one ``Agent`` per
    agent row), ``lanes`` (start, end pairs), ``bands``, ``spacing_m``, ``messages_sent``,
    ``messages_received``, ``malformed_messages``."""

    def __init__(self, view: AutopilotView, params: TeamSearchParams | None = None) -> None:
        check_search_view(view, "team-search")
        if not view.has_radio:
            raise PolicyError(f"team-search needs the radio: scenario {view.scenario_name!r} has none "
                              "(comms.on: true)")
        self.p = params or TeamSearchParams()
        self.rows = [int(i) for i in view.action_spec["vehicles"]]
        self.dt_s = float(view.task.dt_s)
        self.ground_z = float(view.area_limits_ned[5])
        self.limits_ne = tuple(float(c) for c in view.area_limits_ned[0:4])  # north lo/hi, east lo/hi [m]
        sp = self.p.search
        self.search_height_m = search_height_m(sp, view)
        width = footprint_width_m(view.camera_params, self.search_height_m, 0.0, LANE_TRACK_RAD)
        self.spacing_m = width * (1.0 - sp.lane_overlap)
        self.lanes = search_lanes(view.area_limits_ned, self.spacing_m, sp.margin_fraction)
        lengths = [float(np.linalg.norm(b - a)) for a, b in self.lanes]
        self.lane_length_m = lengths
        self.lane_speed_mps = lane_speed_mps(sp)
        k = len(self.rows)
        self.bands = split_lanes(lengths, 1 if self.p.formation else k)
        if self.p.formation:
            self.bands += [[] for _ in range(k - 1)]
        self.band_centre = [float(np.mean(b)) if b else math.inf for b in self.bands]
        bases = view.bases_ned_m
        self.bases_ne = np.asarray(bases, float).reshape(-1, 3)[:, 0:2]
        self.agents = [Agent(r, v, self.bands[r], SearchPattern(OneVehicleView(view, v), sp))  # type: ignore
                       for r, v in enumerate(self.rows)]
        for a in self.agents:
            a.search.search_height_m = self.search_height_m + (a.row % self.p.layers) * self.p.layer_step_m
        self.num_vehicles = int(view.num_vehicles)
        self.messages_sent = 0
        self.messages_received = 0
        self.malformed_messages = 0
        self.claims_yielded = 0  # candidates given up to another vehicle's claim
        self.recalled: set[int] = set()

    # --- operator ----------------------------------------------------------------------------------
    def recall(self, vehicle: int) -> None:
        """Order ``vehicle`` home (an operator's recall, as the energy rule would): it announces ``H`` and
        its lanes are re-assigned by the others from its messages."""
        self.recalled.add(int(vehicle))

    # --- radio -------------------------------------------------------------------------------------
    def _hear(self, view: AutopilotView, a: Agent, decoded: dict[bytes, ProgressMessage | str]) -> None:
        """Take in what vehicle ``a`` received; ``decoded``: this step's payloads already decoded (the
        ProgressMessage, or why it was refused)."""
        for pkt in view.receive(a.vehicle):
            payload = bytes(pkt.payload)
            m = decoded.get(payload)
            if m is None:
                try:
                    m = decode_progress(payload, self.num_vehicles, len(self.lanes))
                except ValueError as exc:
                    m = str(exc)
                decoded[payload] = m
            if isinstance(m, str):
                self.malformed_messages += 1
                LOG.warning("team-search: vehicle %d ignored a malformed message from %d (%d so far): %s",
                            a.vehicle, pkt.source, self.malformed_messages, m)
                continue
            if m.sender != pkt.source or m.sender == a.vehicle:
                self.malformed_messages += 1
                LOG.warning("team-search: vehicle %d ignored a message claiming sender %d from %d",
                            a.vehicle, m.sender, pkt.source)
                continue
            self.messages_received += 1
            a.received += 1
            a.heard_s[m.sender] = view.time_s
            for v, age in enumerate(m.heard_age_s):  # gossip: when the sender last heard of v
                if age >= 0 and v != a.vehicle:
                    a.heard_s[v] = max(a.heard_s.get(v, -math.inf), m.time_s - age)
            a.heard[m.sender] = m
            a.timed_out.discard(m.sender)
            a.done |= m.lanes_done
            a.gone_announced |= m.gone - {a.vehicle}
            if m.state in GONE_STATES:
                a.gone_announced.add(m.sender)
            for f in m.found_ne_m:
                self._add_found(a, f)
            if m.target_ne_m is not None:
                self._respect_claim(a, m)
        for v, t in a.heard_s.items():
            if view.time_s - t > self._expected_work_s(a, v) + self.p.lost_timeout_s \
                    and v not in a.gone_announced:
                a.timed_out.add(v)
            else:
                a.timed_out.discard(v)

    def _respect_claim(self, a: Agent, m: ProgressMessage) -> None:
        """Another vehicle goes down to (or hovers over) a candidate: ``a`` never takes a point near it, and
        gives up its own candidate within ``separation_m`` of it unless ``a`` has the right of way (module
        docstring, "claims")."""
        s = a.search
        claim = np.asarray(m.target_ne_m, float)
        s.map.block(claim, s.p.exclusion_radius_m)
        mine = s.target[0]
        if mine is None or s.mode[0] not in (APPROACH, HOLD):
            return
        if float(np.linalg.norm(np.asarray(mine, float) - claim)) > self.p.separation_m:
            return
        if (s.mode[0] == HOLD, -a.vehicle) > (m.holding, -m.sender):
            return  # a's right of way: the other gives up
        s.target[0] = None  # (the point stays blocked in a's map: it took it)
        s.mode[0] = CLIMB
        self.claims_yielded += 1
        a.last_broadcast_s = -math.inf  # say so at once

    def _expected_work_s(self, a: Agent, v: int) -> float:
        """How long ``v`` may stay out of hearing: its lanes left as ``a`` knows them (its band and claims
        but the lanes known done) at the lane speed, times 1 + ``work_slack`` (section 5.4.1: the meeting
        is due when a subarea's estimated search time is over)."""
        r = self.rows.index(v) if v in self.rows else None
        lanes = set(self.bands[r]) if r is not None else set()
        heard = a.heard.get(v)
        if heard is not None:
            lanes |= heard.claimed
        length = sum(self.lane_length_m[k] for k in lanes - a.done)
        return (1.0 + self.p.work_slack) * length / self.lane_speed_mps

    def _add_found(self, a: Agent, ne: tuple[float, float]) -> None:
        if all(math.hypot(ne[0] - f[0], ne[1] - f[1]) > 5.0 for f in a.found):
            a.found.append((float(ne[0]), float(ne[1])))
            a.search.map.block(np.asarray(ne, float), a.search.p.exclusion_radius_m)

    def _broadcast(self, view: AutopilotView, a: Agent, ex: Array) -> None:
        pos = _pair(ex[NORTH_EAST])
        vel = _pair(ex[GROUND_VELOCITY_NE])
        found = tuple(a.found[-self.p.max_found_in_message:]) if self.p.max_found_in_message else ()
        h = float(ex[HEIGHT]) if math.isfinite(ex[HEIGHT]) else 0.0
        # whole seconds rounded up: relayed news never gets fresher (rounding down, three vehicles passing
        # it round keep a silent one alive)
        ages = tuple(-1 if v not in a.heard_s else
                     int(min(9999.0, math.ceil(max(0.0, view.time_s - a.heard_s[v]) - 1e-9)))
                     for v in range(self.num_vehicles))
        s = a.search
        target = s.target[0] if s.mode[0] in (APPROACH, HOLD) else None
        msg = ProgressMessage(a.vehicle, view.time_s, pos, vel, h, a.state, frozenset(a.done),
                       frozenset(a.gone_announced), frozenset(a.claimed), found, ages,
                       None if target is None else (float(target[0]), float(target[1])), s.mode[0] == HOLD)
        view.send(a.vehicle, BROADCAST, encode_progress(msg))
        a.last_broadcast_s = view.time_s
        self.messages_sent += 1

    # --- re-assignment ------------------------------------------------------------------------------
    def _take_over(self, a: Agent, pos_ne: Array) -> None:
        """Add to ``a``'s queue the lanes the re-assignment rule gives it (the package docstring)."""
        gone_rows = [r for r, v in enumerate(self.rows) if v in a.gone]
        if not gone_rows:
            return
        released: dict[int, int] = {}  # lane -> gone vehicle it came from
        for r in gone_rows:
            v = self.rows[r]
            mine = set(self.bands[r])
            heard = a.heard.get(v)
            if heard is not None:
                mine |= heard.claimed
            for lane in sorted(mine - a.done):
                released.setdefault(lane, v)
        active = {r: self.band_centre[r] for r, v in enumerate(self.rows)
                  if v not in a.gone and math.isfinite(self.band_centre[r])}
        if not self.bands[a.row]:
            active.pop(a.row, None)
        given = reassign(list(released), active).get(a.row, [])
        new = [lane for lane in given if lane not in a.claimed and lane not in a.band]
        if not new:
            return
        for lane in new:
            a.claimed.add(lane)
            a.reassigned_from.setdefault(released[lane], []).append(lane)
        # the new lanes after the own band, nearest first from where the queue will end
        a.queue += sorted(new, key=lambda lane: self._lane_distance(lane, pos_ne))
        if a.state == VehicleState.RENDEZVOUS:
            a.state = VehicleState.SEARCHING

    def _lane_distance(self, lane: int, pos_ne: Array) -> float:
        s, e = self.lanes[lane]
        return float(min(np.linalg.norm(s - pos_ne), np.linalg.norm(e - pos_ne)))

    # --- energy (section 4.5) ------------------------------------------------------------------------
    def _energy_state(self, view: AutopilotView, a: Agent, ex: Array, charge: float) -> VehicleState | None:
        """RETURNING, LANDING or None by the energy rule (the package docstring)."""
        if not math.isfinite(charge):
            return None
        a.charge_history.append((view.time_s, charge))
        if len(a.charge_history) > 50:
            a.charge_history.pop(0)
        if charge <= self.p.land_below:
            return VehicleState.LANDING
        if charge > self.p.return_below or len(a.charge_history) < 10:
            return None
        (t0, c0), (t1, c1) = a.charge_history[0], a.charge_history[-1]
        drain = max(0.0, (c0 - c1) / (t1 - t0)) if t1 > t0 else 0.0
        t_return = self._home_distance(ex[NORTH_EAST]) / self.p.return_speed_mps + \
            max(0.0, float(ex[HEIGHT])) / self.p.descent_rate_mps
        if charge - self.p.return_margin * drain * t_return <= self.p.reserve:
            return VehicleState.RETURNING
        return None

    def _home(self, pos_ne: Array, a: Agent | None = None) -> Array:
        """Where to land: the vehicle's own take-off spot (the team's grid around the base: no two
        vehicles land on one point), else the nearest base's centre (no bases: here)."""
        if self.bases_ne.size == 0:
            return pos_ne
        if a is not None and a.takeoff_ne is not None:
            return a.takeoff_ne
        d = np.linalg.norm(self.bases_ne - pos_ne, axis=1)
        return self.bases_ne[int(np.argmin(d))]

    def _home_distance(self, pos_ne: Array) -> float:
        return float(np.linalg.norm(self._home(pos_ne) - pos_ne))

    # --- flying -------------------------------------------------------------------------------------
    def _goto(self, pos: Array, height: float, target: Array, target_height: float, speed: float) -> Array:
        """``search_pattern.goto_velocity`` with the search's ``position_gain_per_s``."""
        return goto_velocity(pos, height, target, target_height, speed, self.p.search.position_gain_per_s)

    def _next_lane(self, a: Agent, pos_ne: Array) -> None:
        """Start the next lane of the queue not known done (nearest end first)."""
        while a.queue and a.queue[0] in a.done:
            a.queue.pop(0)
        if not a.queue:
            a.lane = None
            a.search.routes = [[]]
            return
        a.lane = a.queue.pop(0)
        s, e = self.lanes[a.lane]
        if np.linalg.norm(e - pos_ne) < np.linalg.norm(s - pos_ne):
            s, e = e, s
        a.search.routes = [[s.copy(), e.copy()]]

    def _rendezvous_point(self, a: Agent) -> Array:
        """The middle of the first lane of the next band (the last band: of the previous one)."""
        lane = max(a.band) + 1 if a.band else 0
        if lane >= len(self.lanes):
            lane = min(a.band) - 1 if a.band else 0
        lane = int(np.clip(lane, 0, len(self.lanes) - 1))
        s, e = self.lanes[lane]
        return 0.5 * (s + e)

    def _search_step(self, view: AutopilotView, a: Agent, ex: Array, speed: float | None = None) -> Array:
        pos = ex[NORTH_EAST]
        s = a.search
        route = s.routes[0] if s.routes else []
        if s.mode[0] == SEARCH and a.lane is not None:
            while route and float(np.linalg.norm(route[0] - pos)) < s.p.waypoint_radius_m:
                route.pop(0)
            if not route:  # the lane is flown
                a.done.add(a.lane)
                a.lane = None
                a.last_broadcast_s = -math.inf  # announce it now
        if a.lane is None and s.mode[0] == SEARCH:
            self._next_lane(a, pos)
        if a.lane is None and s.mode[0] == SEARCH:
            return self._rendezvous(view, a, ex)
        was_hold, was_free = s.mode[0] == HOLD, s.mode[0] in (SEARCH, CLIMB)
        if speed is not None:
            s.speed_mps = speed
        out = np.asarray(s(OneVehicleView(view, a.vehicle)), float)[0]  # type: ignore[arg-type]
        if was_free and s.mode[0] == APPROACH:
            a.last_broadcast_s = -math.inf  # claim the candidate at once
        if s.mode[0] == APPROACH and s.target[0] is not None:
            out = descend_only_over(out, s.target[0], pos)
        if was_hold and s.mode[0] == CLIMB and s.visited:
            a.confirmed.append((float(s.visited[-1][0]), float(s.visited[-1][1])))
            self._add_found(a, a.confirmed[-1])
            a.last_broadcast_s = -math.inf
        return out

    def _rendezvous(self, view: AutopilotView, a: Agent, ex: Array) -> Array:
        pos, height = ex[NORTH_EAST], float(ex[HEIGHT])
        if a.state == VehicleState.SEARCHING:
            a.state = VehicleState.RENDEZVOUS
            a.rendezvous_left_s = self.p.rendezvous_wait_s
        point = self._rendezvous_point(a)
        away = np.linalg.norm(point - pos) > 3.0
        if away and a.state == VehicleState.RENDEZVOUS and a.rendezvous_left_s > 0:
            return self._goto(pos, height, point, a.search.search_height_m, a.search.speed_mps)
        a.rendezvous_left_s -= self.dt_s
        if a.rendezvous_left_s > 0:
            return self._goto(pos, height, point, a.search.search_height_m, 1.0)
        a.state = VehicleState.DONE  # nothing left: home
        return self._fly_home(view, a, ex)

    def _fly_home(self, view: AutopilotView, a: Agent, ex: Array) -> Array:
        """Home to the take-off spot: up to the layer's height, across, then straight down onto the spot
        (``landing_home``: no separation push; no descent onto a vehicle below within
        ``LANDING_CLEARANCE_M``); landed, motionless."""
        if a.landed_home:
            return np.zeros(3)
        pos, height = ex[NORTH_EAST], float(ex[HEIGHT])
        home = self._home(pos, a)
        off = home - pos
        d = float(np.linalg.norm(off))
        if d > HOME_DESCENT_RADIUS_M * (2.0 if a.landing_home else 1.0):  # up to the layer, then across
            a.landing_home = False
            speed = a.search.speed_mps if height > a.search.search_height_m - 3.0 else 0.5
            return self._goto(pos, height, home, a.search.search_height_m, speed)
        a.landing_home = True
        if height <= LANDED_HEIGHT_M:
            a.landed_home = True
            return np.zeros(3)
        v = np.zeros(3)
        v[0:2] = off * HOME_HOLD_GAIN_PER_S
        if d * HOME_HOLD_GAIN_PER_S > 1.0:
            v[0:2] /= d * HOME_HOLD_GAIN_PER_S
        below = any(m.height_m < height - 0.5
                    and float(np.linalg.norm(pos - extrapolated_ne(m, view.time_s))) < LANDING_CLEARANCE_M
                    for _, m in recent(a.heard, view.time_s))
        v[2] = 0.0 if below else landing_rate(height, self.p.descent_rate_mps)
        return v

    def _follow(self, view: AutopilotView, a: Agent, ex: Array, slot: int, leader: int) -> Array:
        pos, height = ex[NORTH_EAST], float(ex[HEIGHT])
        m = a.heard.get(leader)
        if m is None:
            return np.zeros(3)  # wait for the leader's first message
        lp = extrapolated_ne(m, view.time_s)
        v = np.asarray(m.velocity_ne_mps)
        sp = float(np.linalg.norm(v))
        if sp > 1.0:  # behind = against the leader's velocity (eq. 5.1 with the course for the yaw)
            a.follow_dir_ne = v / sp
        elif a.follow_dir_ne is None:  # before the leader moves: on the follower's side of it
            d = lp - pos
            n = float(np.linalg.norm(d))
            a.follow_dir_ne = d / n if n > 1e-6 else np.array([1.0, 0.0])
        target = lp - a.follow_dir_ne * self.p.formation_spacing_m * slot
        return self._goto(pos, height, target, a.search.search_height_m, math.sqrt(2) * MAX_SPEED_MPS)

    def __call__(self, view: AutopilotView) -> Array:
        ex_all = view.estimated_state()
        charge = np.asarray(view.battery_percentage(), float)  # NaN with the battery off
        failsafe = list(view.failsafe)
        below = (view.range_finder_readings(("down",)).range_m[:, 0] if "down" in view.range_finder_beams
                 else np.full(self.num_vehicles, np.nan))
        actions = np.full((len(self.rows), 3), np.nan)
        # the radio first: what each vehicle heard since the last step (a broadcast reaches up to N - 1
        # vehicles with the same payload: each payload is decoded once per step)
        decoded: dict[bytes, ProgressMessage | str] = {}
        for a in self.agents:
            self._hear(view, a, decoded)
        for a in self.agents:
            ex = ex_all[a.vehicle]
            if not (np.all(np.isfinite(ex[NORTH_EAST])) and math.isfinite(ex[HEIGHT])):
                continue  # a lost vehicle: no set point, silent
            pos = ex[NORTH_EAST]
            if a.takeoff_ne is None:
                a.takeoff_ne = pos.copy()
            # energy and recall: announce, then fly home / land
            if a.state not in GONE_STATES:
                if a.vehicle in self.recalled or failsafe[a.vehicle] in ("return",):
                    a.state = VehicleState.RETURNING
                elif failsafe[a.vehicle] == "battery_land":
                    a.state = VehicleState.LANDING
                else:
                    a.state = self._energy_state(view, a, ex, float(charge[a.vehicle])) or a.state
                if a.state in GONE_STATES:
                    a.last_broadcast_s = -math.inf
            elif a.state == VehicleState.RETURNING and charge[a.vehicle] <= self.p.land_below:  # NaN: False
                a.state = VehicleState.LANDING
            if not a.airborne and a.state not in GONE_STATES:  # take-off: up to the layer first
                layer = a.search.search_height_m
                a.airborne = abs(float(ex[HEIGHT]) - layer) < 1.5
                if not a.airborne:
                    actions[a.row] = self._goto(pos, float(ex[HEIGHT]), pos, layer, 1.0)
            if not a.airborne and a.state not in GONE_STATES:
                pass
            elif a.state in (VehicleState.RETURNING, VehicleState.DONE):
                actions[a.row] = self._fly_home(view, a, ex)
            elif a.state == VehicleState.LANDING:
                descent_mps = landing_rate(float(ex[HEIGHT]), self.p.descent_rate_mps)
                actions[a.row] = np.array([0.0, 0.0, descent_mps])
            elif self.p.formation:
                leader = min((v for v in self.rows if v not in a.gone), default=a.vehicle)
                if leader == a.vehicle:
                    if not a.band:  # the leader before is gone: this one takes every lane left
                        a.band = [lane for lane in range(len(self.lanes)) if lane not in a.done]
                        a.queue = list(a.band)
                        a.state = VehicleState.SEARCHING
                    actions[a.row] = self._search_step(view, a, ex, self.p.formation_leader_speed_mps)
                else:
                    followers = [v for v in self.rows if v not in a.gone and v != leader]
                    a.state = VehicleState.FOLLOWING
                    actions[a.row] = self._follow(view, a, ex, followers.index(a.vehicle) + 1, leader)
            else:
                self._take_over(a, pos)
                actions[a.row] = self._search_step(view, a, ex)
            if a.state != VehicleState.LANDING and not a.landing_home and np.all(np.isfinite(actions[a.row])):
                # the take-off climbs straight up from the base's grid: no push (on a crowded grid the
                # pushes of up to 49 neighbours drove the grid's edge along the rim into each other)
                v = actions[a.row]
                if a.airborne:
                    v = separate(self.p, a.heard, view.time_s, ex, v)
                actions[a.row] = keep_inside(self.limits_ne, self.p.rim_m, pos, v)
                # an obstacle below (the down beam short of the height above ground): no lower
                if below[a.vehicle] < min(ex[HEIGHT] - 1.0, self.p.clearance_below_m):
                    actions[a.row, 2] = min(actions[a.row, 2], -0.5)
            near = crowded(a.heard, view.time_s, ex, self.p.separation_m)
            period = self.p.near_broadcast_period_s if near else self.p.broadcast_period_s
            if view.time_s - a.last_broadcast_s >= period - 1e-9:
                self._broadcast(view, a, ex)
        return actions

    # --- summaries ----------------------------------------------------------------------------------
    def lanes_done(self) -> set[int]:
        """The lanes any vehicle knows done."""
        return set().union(*(a.done for a in self.agents))


def _pair(values: Array) -> tuple[float, float]:
    """Two columns of the estimated state as floats; (0, 0) where the first is not finite (no fix)."""
    return (float(values[0]), float(values[1])) if math.isfinite(values[0]) else (0.0, 0.0)
