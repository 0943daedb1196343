"""``--policy team-search``: a team's lane-by-lane search with progress shared over the radio (siegemund_2011
sections 4.5, 5.1 and 5.4.1; docs/TEAMS.md, "Team search").

Lanes (section 5.4.1: lane by lane, and "Multi Agent Search": the area divided among the agents). The search
region (the area without its 10 % rim, where the persons are) is covered by parallel lanes along the body
diagonal of a north-facing vehicle (track 45 deg: both body velocity components at the 3 m/s clamp), spaced
by the camera footprint across the track at the search height times ``1 - lane_overlap``
(``search_pattern.footprint_width_m``). Every vehicle computes the same lanes and the same split
(``split_lanes``): vehicle k of the team (k-th agent row) owns the k-th contiguous band of lanes, the bands
balanced by lane length. No message is needed to start.

Flying (section 4.2). Each vehicle flies its band lane by lane (nearest end first, boustrophedon) with its
own ``SearchPattern`` confirmation machinery (its own evidence map of its own camera frames; descend and
hover over a candidate), in velocity mode; the factory wraps the team in ``guarded`` (``ObstacleGuard``).

Radio (section 5.1: position and status sent over the WLAN). Every ``broadcast_period_s`` and at every lane
finished a vehicle broadcasts a compact JSON progress message (``encode_progress`` / ``decode_progress``):
its position and velocity, its state, the lanes it knows done (a hex bit mask: the knowledge is gossiped),
the vehicles it knows gone, the lanes it claimed from others, the persons confirmed (rounded positions)
and the candidate it is confirming, if any. A malformed payload is ignored and counted
(``TeamSearch.malformed_messages``).

Claims (ours: the paper's vehicles do not descend). Each vehicle finds candidates in its own evidence map,
so two neighbours could go down to the same person and collide at the inspection height (in process, 50
vehicles: most of the collisions left after the take-off rules). A vehicle that takes a candidate
broadcasts it at once (``"k"``: the point, and whether it already hovers there); whoever hears it never
takes a point within ``exclusion_radius_m`` of it, and a vehicle going down to a candidate within
``separation_m`` of it gives up its own (climbs back and searches on) unless it has the right of way:
hovering beats approaching, then the lower index (``TeamSearch.claims_yielded`` counts the give-ups).

Rendezvous and re-assignment (section 5.4.1, Figure 5.11: the meeting line; simplified). A vehicle that has
flown its lanes flies to its rendezvous point (the middle of the first lane of the next band, the band
boundary) and listens there for ``rendezvous_wait_s``. A vehicle is gone when it announced its return or
landing (gossiped), or, locally, when a vehicle heard before has been silent for ``lost_timeout_s``. The
lanes of a gone vehicle that no one reported done (its band and its claims) are re-assigned
deterministically from what each vehicle knows: each lane goes to the active vehicle whose band centre is
nearest in lane index (ties: lower index). A vehicle adds the lanes it is given to its queue and announces
them as claims. When nothing is left, it returns to the base.

Energy (section 4.5; Figure 5.10). From ``return_below`` (60 %) of charge
(``AutopilotView.battery_percentage``) the way home is evaluated every step: return once ``charge -
return_margin * drain * t_return <= reserve`` (10 %), t_return = distance to the nearest base / speed +
height / descent rate, the drain estimated from the charge's own history; land where it is at ``land_below``
(5 %). Either is announced (state ``H`` / ``L``), so the others take the lanes. The onboard failsafe
(docs/ENERGY.md) applies the same rule and takes precedence; the policy reads ``view.failsafe`` where the
view has it and announces it too.

Leader-follower (section 5.1, eq. 5.1, ``formation=True``; trail formation, S = 0). The lowest-index active
vehicle leads and searches every lane (at ``formation_leader_speed_mps``); follower k keeps
``formation_spacing_m * k`` behind the leader along its velocity, from the leader's last broadcast position
extrapolated by its broadcast velocity, so the formation stays within radio range (slot distances below
``comms.range_m``).

Determinism: no wall clock, no random numbers; the order of everything follows the vehicle indices and the
radio's delivery order.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qrsim_ros.core.common.validation import in_range, non_negative, positive
from qrsim_ros.core.comms import BROADCAST
from qrsim_ros.core.vehicles.controllers import MAX_SPEED_MPS
from qrsim_ros.policies.base import Array, AutopilotView, PolicyError
from qrsim_ros.policies.search_pattern import (
    APPROACH,
    CLIMB,
    HOLD,
    SEARCH,
    SearchPattern,
    SearchPatternParams,
    footprint_width_m,
    lanes_in_rectangle,
)

LOG = logging.getLogger(__name__)
#: A vehicle going to a candidate descends only within this horizontal distance of it [m]: across at its
#: layer's height (above the obstacles, up to 20 m), then down, where the down beam guards the descent.
APPROACH_DESCENT_RADIUS_M = 3.0
#: Home: within this horizontal distance [m] of its take-off spot a returning vehicle lands on it (straight
#: down, the mirror of the take-off: no separation push, which on the 4 m take-off grid pushed landed
#: vehicles off their spots and back into the air); one pushed beyond twice this flies back first.
HOME_DESCENT_RADIUS_M = 2.0
#: A landing vehicle does not descend while another is below it within this horizontal distance [m]
#: (the 2 m collision distance and a metre).
LANDING_CLEARANCE_M = 3.0
#: Height above ground [m] below which a vehicle landing at home has landed: it stays there, motionless.
LANDED_HEIGHT_M = 0.5
#: Descent rate [m/s] of the landing's last metres (0.5/s x the height above LANDED_HEIGHT_M, at least this).
LANDING_FINAL_RATE_MPS = 0.2
#: Gain [1/s] of the horizontal hold over the take-off spot while landing (at most 1 m/s).
HOME_HOLD_GAIN_PER_S = 0.5

#: Message format version (``"m"`` in the payload).
MESSAGE_VERSION = 1
#: Vehicle states in a message: searching, at a rendezvous, following, returning home, landing, done.
STATES = ("S", "R", "F", "H", "L", "D")
#: States of a vehicle that no longer searches (its lanes are released).
GONE_STATES = ("H", "L", "D")
#: Track of the lanes [rad from north]: the body diagonal of a north-facing vehicle.
LANE_TRACK_RAD = math.pi / 4


@dataclass(frozen=True)
class TeamSearchParams:
    """Tuning of ``TeamSearch`` (units in the names; see the module docstring).

    search: the per-vehicle lane flying and confirmation (``SearchPatternParams``; its search height and
    lane overlap set the lane spacing). broadcast_period_s: progress message period [s]. lost_timeout_s:
    silence after which a vehicle heard before counts as gone [s], counted from when its lanes left
    (as known) should be done at the lane speed times 1 + ``work_slack``. rendezvous_wait_s: time spent at the
    rendezvous point when nothing is left [s]. max_found_in_message: persons listed per message.
    return_below / reserve / land_below: charge fractions of the energy rule; return_margin: factor on the
    estimated return charge; return_speed_mps / descent_rate_mps: speeds assumed for t_return.
    formation: leader-follower mode; formation_spacing_m: distance per slot behind the leader [m];
    formation_leader_speed_mps: the leader's lane speed (followers need a margin to keep up) [m/s].
    layers / layer_step_m: vehicle row k flies at the search height + (k mod layers) * layer_step_m
    (vertical separation of neighbours: the team takes off 4 m apart; layers 4 m apart, twice the 2 m
    collision distance: at 2.5 m, half a metre of height error let neighbouring layers collide).
    separation_m / separation_gain_per_s: once airborne (the take-off climbs straight up, without it), a
    vehicle whose closest approach to another's broadcast position (extrapolated by its velocity) within
    ``SEPARATION_LOOKAHEAD_S``, both keeping their velocities, is within separation_m horizontally, the
    other within 2.5 m of the heights this one passes meanwhile, loses its set point's component towards
    it and adds gain * (separation_m - distance) away from it; within 3 x separation_m the positions are
    broadcast every near_broadcast_period_s [s].
    clearance_below_m: the down beam reading less than this and than the height above ground - 1 m (an
    obstacle's top below) stops any descent and climbs at 0.5 m/s.
    rim_m: no set point leaves the area: within rim_m of a north or east limit the component towards it is
    capped, falling linearly from the full speed at rim_m to 0 at rim_m / 2, and closer than that the
    vehicle moves back in at 0.5 m/s (a vehicle outside the area is lost; the separation's push on the
    edge of a 50-vehicle take-off grid 6 m from the limit pushed 13 of them out) [m].
    """

    search: SearchPatternParams = field(default_factory=SearchPatternParams)
    broadcast_period_s: float = 2.0
    lost_timeout_s: float = 60.0
    rendezvous_wait_s: float = 10.0
    max_found_in_message: int = 20
    return_below: float = 0.6
    reserve: float = 0.1
    land_below: float = 0.05
    return_margin: float = 1.5
    return_speed_mps: float = 2.0
    descent_rate_mps: float = 1.0
    formation: bool = False
    formation_spacing_m: float = 10.0
    formation_leader_speed_mps: float = 2.5
    layers: int = 3
    layer_step_m: float = 4.0
    separation_m: float = 8.0
    separation_gain_per_s: float = 0.8
    near_broadcast_period_s: float = 0.4
    clearance_below_m: float = 6.0
    work_slack: float = 0.5
    rim_m: float = 8.0

    def __post_init__(self) -> None:
        positive("team_search.broadcast_period_s", self.broadcast_period_s)
        positive("team_search.near_broadcast_period_s", self.near_broadcast_period_s)
        positive("team_search.lost_timeout_s", self.lost_timeout_s)
        non_negative("team_search.rendezvous_wait_s", self.rendezvous_wait_s)
        non_negative("team_search.max_found_in_message", self.max_found_in_message)
        in_range("team_search.return_below", self.return_below, 0.0, 1.0)
        in_range("team_search.reserve", self.reserve, 0.0, 1.0)
        in_range("team_search.land_below", self.land_below, 0.0, 1.0)
        positive("team_search.return_margin", self.return_margin)
        positive("team_search.return_speed_mps", self.return_speed_mps)
        positive("team_search.descent_rate_mps", self.descent_rate_mps)
        positive("team_search.formation_spacing_m", self.formation_spacing_m)
        positive("team_search.formation_leader_speed_mps", self.formation_leader_speed_mps)
        in_range("team_search.layers", self.layers, 1, 20)
        non_negative("team_search.layer_step_m", self.layer_step_m)
        non_negative("team_search.separation_m", self.separation_m)
        non_negative("team_search.separation_gain_per_s", self.separation_gain_per_s)
        non_negative("team_search.work_slack", self.work_slack)
        non_negative("team_search.rim_m", self.rim_m)


# --- the split ---------------------------------------------------------------------------------------

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


# --- messages ----------------------------------------------------------------------------------------

@dataclass
class ProgressMessage:
    """One progress message (see ``encode_progress``). sender: the vehicle index; time_s: when sent;
    position_ne_m / velocity_ne_mps / height_m (above ground); state: one of ``STATES``; lanes_done /
    gone / claimed: lane indices, vehicle indices, lane indices; found_ne_m: persons confirmed (K, 2);
    heard_age_s: per vehicle, whole seconds since the sender last heard of it (directly or by gossip; -1
    never, capped at 9999); target_ne_m: the candidate person the sender is on its way down to or
    hovering over (None: none), holding: whether it hovers there (module docstring, "claims")."""

    sender: int
    time_s: float
    position_ne_m: tuple[float, float]
    velocity_ne_mps: tuple[float, float]
    height_m: float
    state: str
    lanes_done: frozenset[int]
    gone: frozenset[int]
    claimed: frozenset[int]
    found_ne_m: tuple[tuple[float, float], ...]
    heard_age_s: tuple[int, ...] = ()
    target_ne_m: tuple[float, float] | None = None
    holding: bool = False


def _mask(items: frozenset[int] | set[int]) -> str:
    v = 0
    for i in items:
        v |= 1 << int(i)
    return format(v, "x")


def _unmask(text: str, limit: int) -> frozenset[int]:
    if not isinstance(text, str) or len(text) > (limit + 3) // 4 + 1:
        raise ValueError("bad bit mask")
    v = int(text, 16)
    if v < 0 or v.bit_length() > limit:
        raise ValueError("bit mask out of range")
    return frozenset(i for i in range(v.bit_length()) if v >> i & 1)


def encode_progress(p: ProgressMessage) -> bytes:
    """The compact JSON payload: ``{"m":1,"i":sender,"t":time_s,"p":[n,e],"v":[vn,ve],"h":height,"s":state,
    "d":hex mask of lanes done,"g":hex mask of vehicles gone,"c":hex mask of lanes claimed,
    "f":[[n,e],...],"a":[ages],"k":[] or [n,e,holding 0/1]}`` (positions rounded to 0.1 m, speeds to
    0.01 m/s, time to 1 ms)."""
    msg = {"m": MESSAGE_VERSION, "i": int(p.sender), "t": round(float(p.time_s), 3),
           "p": [round(float(c), 1) for c in p.position_ne_m],
           "v": [round(float(c), 2) for c in p.velocity_ne_mps], "h": round(float(p.height_m), 1),
           "s": p.state,
           "d": _mask(p.lanes_done), "g": _mask(p.gone), "c": _mask(p.claimed),
           "f": [[round(float(a), 1), round(float(b), 1)] for a, b in p.found_ne_m],
           "a": [int(a) for a in p.heard_age_s],
           "k": [] if p.target_ne_m is None else
                [round(float(p.target_ne_m[0]), 1), round(float(p.target_ne_m[1]), 1), int(p.holding)]}
    return json.dumps(msg, separators=(",", ":")).encode()


def decode_progress(payload: bytes, num_vehicles: int, num_lanes: int) -> ProgressMessage:
    """``encode_progress``'s inverse; ValueError for anything malformed (not JSON, wrong version, a field
    missing, of the wrong type, out of range or not finite)."""
    try:
        msg = json.loads(bytes(payload).decode())
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"not a JSON progress message: {exc}") from None
    if not isinstance(msg, dict) or msg.get("m") != MESSAGE_VERSION:
        raise ValueError("not a progress message of version 1")
    try:
        sender = msg["i"]
        if isinstance(sender, bool) or not isinstance(sender, int) or not 0 <= sender < num_vehicles:
            raise ValueError(f"sender {sender!r} out of range")
        t, h = float(msg["t"]), float(msg["h"])
        pos = tuple(float(c) for c in msg["p"])
        vel = tuple(float(c) for c in msg["v"])
        found = tuple((float(a), float(b)) for a, b in msg["f"])
        ages = tuple(msg["a"])
        if len(ages) != num_vehicles or not all(
                isinstance(a, int) and not isinstance(a, bool) and -1 <= a <= 9999 for a in ages):
            raise ValueError("bad heard ages")
        state = msg["s"]
        if len(pos) != 2 or len(vel) != 2 or state not in STATES:
            raise ValueError("bad position, velocity or state")
        claim = msg["k"]
        if not isinstance(claim, list) or len(claim) not in (0, 3) or (claim and claim[2] not in (0, 1)) or \
                any(isinstance(c, bool) for c in claim):
            raise ValueError("bad claim")
        target = (float(claim[0]), float(claim[1])) if claim else None
        values = (t, h, *pos, *vel, *(c for f in found for c in f), *(target or ()))
        if not all(math.isfinite(c) for c in values):
            raise ValueError("a value is not finite")
        return ProgressMessage(sender, t, pos, vel, h, state, _unmask(msg["d"], num_lanes),  # type: ignore[arg-type]
                        _unmask(msg["g"], num_vehicles), _unmask(msg["c"], num_lanes), found, ages,
                        target, bool(claim and claim[2]))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed progress message: {type(exc).__name__} {exc}") from None


def descend_only_over(v_ned: Array, target_ne: Array, pos_ne: Array) -> Array:
    """``v_ned`` [m/s] without its descent while ``pos_ne`` is more than ``APPROACH_DESCENT_RADIUS_M`` from
    ``target_ne`` [m]: across at the layer's height, then down (a slanting descent to a candidate met the
    sides of obstacles up to 20 m tall; over it, the down beam guards the descent)."""
    if v_ned[2] > 0.0 and float(np.linalg.norm(np.asarray(target_ne) - pos_ne)) > APPROACH_DESCENT_RADIUS_M:
        v_ned = v_ned.copy()
        v_ned[2] = 0.0
    return v_ned


# --- the policy --------------------------------------------------------------------------------------

class _OneVehicle:
    """The view as one vehicle's ``SearchPattern`` sees it: its own action row only."""

    def __init__(self, view: AutopilotView, vehicle: int) -> None:
        self._view = view
        self.action_spec = {"vehicles": [vehicle], "modes": ["velocity"], "width": 3,
                            "columns": view.action_spec["columns"]}
        self.action_rows = 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._view, name)


class Agent:
    """What one vehicle knows and does (its knowledge comes from its sensors and the messages it hears)."""

    def __init__(self, row: int, vehicle: int, band: list[int], search: SearchPattern) -> None:
        self.row, self.vehicle = row, vehicle
        self.band = list(band)
        self.queue = list(band)          # lanes still to fly, in order
        self.claimed: set[int] = set()   # lanes taken over from gone vehicles
        self.done: set[int] = set()      # lanes known done (own and heard)
        self.gone_announced: set[int] = set()  # vehicles known gone by announcement (gossiped)
        self.timed_out: set[int] = set()       # vehicles silent for lost_timeout_s (local)
        self.heard_s: dict[int, float] = {}
        self.heard: dict[int, ProgressMessage] = {}   # the last message of each vehicle
        self.found: list[tuple[float, float]] = []  # persons known confirmed (own and heard)
        self.confirmed: list[tuple[float, float]] = []  # by this vehicle
        self.search = search
        self.state = "S"
        self.lane: int | None = None      # the lane being flown
        self.rendezvous_left_s = math.nan
        self.last_broadcast_s = -math.inf
        self.charge_history: list[tuple[float, float]] = []
        self.received = 0
        self.reassigned_from: dict[int, list[int]] = {}  # gone vehicle -> lanes this agent took
        self.airborne = False             # climbed to its layer after the take-off
        self.takeoff_ne: Array | None = None  # where it took off (its landing spot)
        self.landing_home = False         # over its take-off spot, descending onto it
        self.landed_home = False          # landed there (motionless from then on)
        self.follow_dir_ne: Array | None = None  # the formation's "behind" (unit, NE)

    @property
    def gone(self) -> set[int]:
        return self.gone_announced | self.timed_out


class TeamSearch:
    """The team search (see the module docstring). Public for inspection: ``agents`` (one ``Agent`` per
    agent row), ``lanes`` (start, end pairs), ``bands``, ``spacing_m``, ``messages_sent``,
    ``messages_received``, ``malformed_messages``."""

    def __init__(self, view: AutopilotView, params: TeamSearchParams | None = None) -> None:
        spec = view.action_spec
        if any(m != "velocity" for m in spec["modes"]):
            raise PolicyError(f"team-search needs the velocity control mode, got {spec['modes']}")
        if view.task.type != "search_rescue":
            raise PolicyError(f"team-search is a search-and-rescue policy; task is {view.task.type!r}")
        if not getattr(view, "has_radio", False):
            raise PolicyError(f"team-search needs the radio: scenario {view.scenario_name!r} has none "
                              "(comms.on: true)")
        self.p = params or TeamSearchParams()
        self.rows = [int(i) for i in spec["vehicles"]]
        self.dt_s = float(view.task.dt_s)
        self.ground_z = float(view.area_limits_ned[5])
        self.limits_ne = tuple(float(c) for c in view.area_limits_ned[0:4])  # north lo/hi, east lo/hi [m]
        sp = self.p.search
        self.search_height_m = (sp.search_height_m if sp.search_height_m is not None
                                else self.ground_z - view.task.start_z_ned_m)
        width = footprint_width_m(view.camera_params, self.search_height_m, 0.0, LANE_TRACK_RAD)
        self.spacing_m = width * (1.0 - sp.lane_overlap)
        self.lanes = search_lanes(view.area_limits_ned, self.spacing_m, sp.margin_fraction)
        lengths = [float(np.linalg.norm(b - a)) for a, b in self.lanes]
        self.lane_length_m = lengths
        self.lane_speed_mps = sp.speed_mps if sp.speed_mps is not None else math.sqrt(2) * MAX_SPEED_MPS
        k = len(self.rows)
        self.bands = split_lanes(lengths, 1 if self.p.formation else k)
        if self.p.formation:
            self.bands += [[] for _ in range(k - 1)]
        self.band_centre = [float(np.mean(b)) if b else math.inf for b in self.bands]
        bases = getattr(view, "bases_ned_m", np.zeros((0, 3)))
        self.bases_ne = np.asarray(bases, float).reshape(-1, 3)[:, 0:2]
        self.agents = [Agent(r, v, self.bands[r], SearchPattern(_OneVehicle(view, v), sp))  # type: ignore
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
        pos = (float(ex[0]), float(ex[1])) if math.isfinite(ex[0]) else (0.0, 0.0)
        vel = (float(ex[17]), float(ex[18])) if math.isfinite(ex[17]) else (0.0, 0.0)
        found = tuple(a.found[-self.p.max_found_in_message:]) if self.p.max_found_in_message else ()
        h = float(ex[16]) if math.isfinite(ex[16]) else 0.0
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
        """Add to ``a``'s queue the lanes the re-assignment rule gives it (module docstring)."""
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
        if a.state == "R":
            a.state = "S"

    def _lane_distance(self, lane: int, pos_ne: Array) -> float:
        s, e = self.lanes[lane]
        return float(min(np.linalg.norm(s - pos_ne), np.linalg.norm(e - pos_ne)))

    # --- energy (section 4.5) ------------------------------------------------------------------------
    def _energy_state(self, view: AutopilotView, a: Agent, ex: Array, charge: float) -> str | None:
        """``H`` (return), ``L`` (land) or None by the energy rule (module docstring)."""
        if not math.isfinite(charge):
            return None
        a.charge_history.append((view.time_s, charge))
        if len(a.charge_history) > 50:
            a.charge_history.pop(0)
        if charge <= self.p.land_below:
            return "L"
        if charge > self.p.return_below or len(a.charge_history) < 10:
            return None
        (t0, c0), (t1, c1) = a.charge_history[0], a.charge_history[-1]
        drain = max(0.0, (c0 - c1) / (t1 - t0)) if t1 > t0 else 0.0
        t_return = self._home_distance(ex[0:2]) / self.p.return_speed_mps + \
            max(0.0, float(ex[16])) / self.p.descent_rate_mps
        if charge - self.p.return_margin * drain * t_return <= self.p.reserve:
            return "H"
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
        return self.agents[0].search._goto(pos, height, target, target_height, speed)

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
        pos = ex[0:2]
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
        out = np.asarray(s(_OneVehicle(view, a.vehicle)), float)[0]  # type: ignore[arg-type]
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
        pos, height = ex[0:2], float(ex[16])
        if a.state == "S":
            a.state = "R"
            a.rendezvous_left_s = self.p.rendezvous_wait_s
        point = self._rendezvous_point(a)
        if np.linalg.norm(point - pos) > 3.0 and a.state == "R" and a.rendezvous_left_s > 0:
            return self._goto(pos, height, point, a.search.search_height_m, a.search.speed_mps)
        a.rendezvous_left_s -= self.dt_s
        if a.rendezvous_left_s > 0:
            return self._goto(pos, height, point, a.search.search_height_m, 1.0)
        a.state = "D"  # nothing left: home
        return self._fly_home(view, a, ex)

    def _fly_home(self, view: AutopilotView, a: Agent, ex: Array) -> Array:
        """Home to the take-off spot: up to the layer's height, across, then straight down onto the spot
        (``landing_home``: no separation push; no descent onto a vehicle below within
        ``LANDING_CLEARANCE_M``); landed, motionless."""
        if a.landed_home:
            return np.zeros(3)
        pos, height = ex[0:2], float(ex[16])
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
                    and float(np.linalg.norm(pos - _extrapolated_ne(m, view.time_s))) < LANDING_CLEARANCE_M
                    for _, m in _recent(a, view.time_s))
        v[2] = 0.0 if below else self._landing_rate(height)
        return v

    def _landing_rate(self, height_m: float) -> float:
        """Descent rate [m/s] of a landing at ``height_m`` above ground: ``descent_rate_mps``, slower over
        the last metres (a zero set point at 1 m/s sank the vehicle 0.3 m further, into the ground: out of
        the area, lost), 0 from ``LANDED_HEIGHT_M``."""
        if height_m <= LANDED_HEIGHT_M:
            return 0.0
        return min(self.p.descent_rate_mps, max(LANDING_FINAL_RATE_MPS, 0.5 * (height_m - LANDED_HEIGHT_M)))

    def _follow(self, view: AutopilotView, a: Agent, ex: Array, slot: int, leader: int) -> Array:
        pos, height = ex[0:2], float(ex[16])
        m = a.heard.get(leader)
        if m is None:
            return np.zeros(3)  # wait for the leader's first message
        lp = _extrapolated_ne(m, view.time_s)
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
        charge = (np.asarray(view.battery_percentage(), float) if hasattr(view, "battery_percentage")
                  else np.full(self.num_vehicles, np.nan))
        failsafe = list(getattr(view, "failsafe", [""] * self.num_vehicles))
        below = (view.range_finder_readings(("down",)).range_m[:, 0] if "down" in
                 getattr(view, "range_finder_beams", ()) else np.full(self.num_vehicles, np.nan))
        actions = np.full((len(self.rows), 3), np.nan)
        # the radio first: what each vehicle heard since the last step (a broadcast reaches up to N - 1
        # vehicles with the same payload: each payload is decoded once per step)
        decoded: dict[bytes, ProgressMessage | str] = {}
        for a in self.agents:
            self._hear(view, a, decoded)
        for a in self.agents:
            ex = ex_all[a.vehicle]
            if not np.all(np.isfinite(ex[[0, 1, 16]])):
                continue  # a lost vehicle: no set point, silent
            pos = ex[0:2]
            if a.takeoff_ne is None:
                a.takeoff_ne = pos.copy()
            # energy and recall: announce, then fly home / land
            if a.state not in GONE_STATES:
                if a.vehicle in self.recalled or failsafe[a.vehicle] in ("return",):
                    a.state = "H"
                elif failsafe[a.vehicle] == "battery_land":
                    a.state = "L"
                else:
                    a.state = self._energy_state(view, a, ex, float(charge[a.vehicle])) or a.state
                if a.state in GONE_STATES:
                    a.last_broadcast_s = -math.inf
            elif a.state == "H" and charge[a.vehicle] <= self.p.land_below:  # NaN: False
                a.state = "L"
            if not a.airborne and a.state not in GONE_STATES:  # take-off: up to the layer first
                layer = a.search.search_height_m
                a.airborne = abs(float(ex[16]) - layer) < 1.5
                if not a.airborne:
                    actions[a.row] = self._goto(pos, float(ex[16]), pos, layer, 1.0)
            if not a.airborne and a.state not in GONE_STATES:
                pass
            elif a.state in ("H", "D"):
                actions[a.row] = self._fly_home(view, a, ex)
            elif a.state == "L":
                actions[a.row] = np.array([0.0, 0.0, self._landing_rate(float(ex[16]))])
            elif self.p.formation:
                leader = min((v for v in self.rows if v not in a.gone), default=a.vehicle)
                if leader == a.vehicle:
                    if not a.band:  # the leader before is gone: this one takes every lane left
                        a.band = [lane for lane in range(len(self.lanes)) if lane not in a.done]
                        a.queue = list(a.band)
                        a.state = "S"
                    actions[a.row] = self._search_step(view, a, ex, self.p.formation_leader_speed_mps)
                else:
                    followers = [v for v in self.rows if v not in a.gone and v != leader]
                    a.state = "F"
                    actions[a.row] = self._follow(view, a, ex, followers.index(a.vehicle) + 1, leader)
            else:
                self._take_over(a, pos)
                actions[a.row] = self._search_step(view, a, ex)
            if a.state != "L" and not a.landing_home and np.all(np.isfinite(actions[a.row])):
                # the take-off climbs straight up from the base's grid: no push (on a crowded grid the
                # pushes of up to 49 neighbours drove the grid's edge along the rim into each other)
                v = self._separate(view, a, ex, actions[a.row]) if a.airborne else actions[a.row]
                actions[a.row] = self._keep_inside(pos, v)
                # an obstacle below (the down beam short of the height above ground): no lower
                if below[a.vehicle] < min(ex[16] - 1.0, self.p.clearance_below_m):
                    actions[a.row, 2] = min(actions[a.row, 2], -0.5)
            crowded = self._crowded(view, a, ex)
            period = self.p.near_broadcast_period_s if crowded else self.p.broadcast_period_s
            if view.time_s - a.last_broadcast_s >= period - 1e-9:
                self._broadcast(view, a, ex)
        return actions

    def _crowded(self, view: AutopilotView, a: Agent, ex: Array) -> bool:
        """Whether another vehicle's broadcast position is within 3 x ``separation_m`` (and 2.5 m in
        height): the positions are then broadcast every ``near_broadcast_period_s``."""
        for _, m in _recent(a, view.time_s):
            q = _extrapolated_ne(m, view.time_s)
            if float(np.linalg.norm(ex[0:2] - q)) < 3.0 * self.p.separation_m and \
                    abs(float(ex[16]) - m.height_m) <= 2.5:
                return True
        return False

    def _separate(self, view: AutopilotView, a: Agent, ex: Array, v: Array) -> Array:
        """``v`` plus the push away from the others' broadcast positions (``separation_m``; the closest
        approach within ``SEPARATION_LOOKAHEAD_S``); no vertical move towards another within half of it."""
        p = self.p
        if p.separation_m <= 0.0 or not a.heard:
            return v
        pos, height = ex[0:2], float(ex[16])
        # the heights this vehicle passes in the next SEPARATION_LOOKAHEAD_S (climbing or descending
        # through the others' layers), +-2.5 m
        ahead = height - float(v[2]) * SEPARATION_LOOKAHEAD_S if math.isfinite(v[2]) else height
        low, high = min(height, ahead) - 2.5, max(height, ahead) + 2.5
        own_v = ex[17:19] if np.all(np.isfinite(ex[17:19])) else np.zeros(2)
        push = np.zeros(2)
        aways: list[Array] = []  # from each vehicle within separation_m, now or at the closest approach
        for other, m in _recent(a, view.time_s):
            if not low <= m.height_m <= high:
                continue
            # the horizontal offset at the closest approach within SEPARATION_LOOKAHEAD_S, both keeping
            # their velocities (this one's estimated, the other's broadcast one)
            r = now = pos - _extrapolated_ne(m, view.time_s)
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

    def _keep_inside(self, pos: Array, v: Array) -> Array:
        """``v`` with its north/east components towards a limit within ``rim_m`` capped (``rim_m``)."""
        rim = self.p.rim_m
        if rim <= 0.0:
            return v
        out = v
        for j in (0, 1):
            lo, hi = self.limits_ne[2 * j], self.limits_ne[2 * j + 1]
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

    # --- summaries ----------------------------------------------------------------------------------
    def lanes_done(self) -> set[int]:
        """The lanes any vehicle knows done."""
        return set().union(*(a.done for a in self.agents))


#: Seconds the separation looks ahead (``_separate``): the closest approach of two vehicles keeping their
#: velocities, and the heights a climbing or descending vehicle passes.
SEPARATION_LOOKAHEAD_S = 2.0

#: Seconds a heard position is extrapolated along its velocity at most (a stale message is not taken far).
MAX_EXTRAPOLATION_S = 3.0

#: Seconds after which a heard position no longer counts for the separation, the crowding and the
#: landing's clearance (three of the usual 2 s broadcast periods: one lost message is tolerated; a vehicle
#: within 24 m broadcasts every 0.4 s). Older positions are of vehicles out of range, gone home or lost:
#: kept, they stood as obstacles where their senders had last been heard, minutes before, and at 50
#: vehicles a dozen vehicles on their way home stopped among such ghosts for good.
STALE_POSITION_S = 6.0


def _recent(a: Agent, now_s: float) -> list[tuple[int, ProgressMessage]]:
    """The vehicles ``a`` heard within ``STALE_POSITION_S`` and their last messages."""
    return [(v, m) for v, m in a.heard.items() if now_s - m.time_s <= STALE_POSITION_S]


def _extrapolated_ne(m: ProgressMessage, now_s: float) -> Array:
    """Where the sender of progress message ``m`` is at ``now_s`` (NE, m): its broadcast position moved
    along its broadcast velocity for the message's age (at most ``MAX_EXTRAPOLATION_S``)."""
    age = min(MAX_EXTRAPOLATION_S, max(0.0, now_s - m.time_s))
    return np.asarray(m.position_ne_m) + age * np.asarray(m.velocity_ne_mps)


def team_search_policy(params: TeamSearchParams | None = None) -> Any:
    """A factory of the guarded team search with ``params`` (``guarded`` over ``TeamSearch`` when the
    scenario fits range finders besides ``down``; the bare ``TeamSearch`` otherwise)."""
    from qrsim_ros.policies.guarded import DEFAULT_EXCLUDED_BEAMS, Guarded

    def factory(view: AutopilotView) -> Any:
        team = TeamSearch(view, params)
        beams = [b for b in getattr(view, "range_finder_beams", ()) if b not in DEFAULT_EXCLUDED_BEAMS]
        return Guarded(view, team) if beams else team

    return factory


def team_search(view: AutopilotView) -> Any:
    """Factory of ``--policy team-search`` (guarded, default parameters)."""
    return team_search_policy()(view)


def team_formation(view: AutopilotView) -> Any:
    """Factory of ``--policy team-formation``: ``team-search`` in leader-follower mode."""
    return team_search_policy(TeamSearchParams(formation=True))(view)


def unwrap(policy: Any) -> TeamSearch:
    """The ``TeamSearch`` inside a policy the factories built (``Guarded.inner`` or itself)."""
    inner = getattr(policy, "inner", policy)
    if not isinstance(inner, TeamSearch):
        raise TypeError(f"not a team search: {type(policy).__name__}")
    return inner
