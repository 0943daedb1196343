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
its position and velocity, its state (``VehicleState``), the lanes it knows done (a hex bit mask: the
knowledge is gossiped), the vehicles it knows gone, the lanes it claimed from others, the persons
confirmed (rounded positions) and the candidate it is confirming, if any. A malformed payload is
ignored and counted (``TeamSearch.malformed_messages``).

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
(5 %). Either is announced (``VehicleState.RETURNING`` / ``LANDING``), so the others take the lanes. The
onboard failsafe (docs/ENERGY.md) applies the same rule and takes precedence; the policy reads
``view.failsafe`` and announces it too.

Leader-follower (section 5.1, eq. 5.1, ``formation=True``; trail formation, S = 0). The lowest-index active
vehicle leads and searches every lane (at ``formation_leader_speed_mps``); follower k keeps
``formation_spacing_m * k`` behind the leader along its velocity, from the leader's last broadcast position
extrapolated by its broadcast velocity, so the formation stays within radio range (slot distances below
``comms.range_m``).

Determinism: no wall clock, no random numbers; the order of everything follows the vehicle indices and the
radio's delivery order.

The package: ``params`` (the tuning and fixed distances), ``lanes`` (lanes, bands, re-assignment),
``messages`` (states, the progress message and its wire format), ``agent`` (one vehicle's knowledge),
``moves`` (set-point shaping: separation, rim, landing), ``policy`` (``TeamSearch``) and here the
factories of ``--policy team-search`` / ``team-formation``.
"""

from __future__ import annotations

from typing import Any

from qrsim_ros.policies.base import AutopilotView
from qrsim_ros.policies.team_search.lanes import LANE_TRACK_RAD, reassign, search_lanes, split_lanes
from qrsim_ros.policies.team_search.messages import (
    GONE_STATES,
    MESSAGE_VERSION,
    ProgressMessage,
    VehicleState,
    decode_progress,
    encode_progress,
)
from qrsim_ros.policies.team_search.moves import descend_only_over
from qrsim_ros.policies.team_search.params import (
    APPROACH_DESCENT_RADIUS_M,
    HOME_DESCENT_RADIUS_M,
    LANDING_CLEARANCE_M,
    STALE_POSITION_S,
    TeamSearchParams,
)
from qrsim_ros.policies.team_search.policy import TeamSearch

__all__ = [
    "APPROACH_DESCENT_RADIUS_M", "GONE_STATES", "HOME_DESCENT_RADIUS_M", "LANDING_CLEARANCE_M",
    "LANE_TRACK_RAD", "MESSAGE_VERSION", "STALE_POSITION_S", "ProgressMessage", "TeamSearch",
    "TeamSearchParams", "VehicleState", "decode_progress", "descend_only_over", "encode_progress", "reassign",
    "search_lanes", "split_lanes", "team_formation", "team_search", "team_search_policy", "unwrap",
]


def team_search_policy(params: TeamSearchParams | None = None) -> Any:
    """A factory of the guarded team search with ``params`` (``guarded`` over ``TeamSearch`` when the
    scenario fits range finders besides ``down``; the bare ``TeamSearch`` otherwise)."""
    from qrsim_ros.policies.guarded import DEFAULT_EXCLUDED_BEAMS, Guarded

    def factory(view: AutopilotView) -> Any:
        team = TeamSearch(view, params)
        beams = [b for b in view.range_finder_beams if b not in DEFAULT_EXCLUDED_BEAMS]
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
