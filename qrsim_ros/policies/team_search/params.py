"""The team search's tuning (``TeamSearchParams``) and its fixed distances and rates (docs/TEAMS.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from qrsim_ros.core.common.validation import between, check_fields, checked, non_negative, positive
from qrsim_ros.policies.search_pattern import SearchPatternParams

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

    # (the team's timing and energy rules are tuned to lanes at the loops' limit: its set points are not
    # kept inside them, ``SearchPatternParams.within_limits``)
    search: SearchPatternParams = field(default_factory=lambda: SearchPatternParams(within_limits=False))
    broadcast_period_s: float = checked(2.0, positive)
    near_broadcast_period_s: float = checked(0.4, positive)
    lost_timeout_s: float = checked(60.0, positive)
    rendezvous_wait_s: float = checked(10.0, non_negative)
    max_found_in_message: int = checked(20, non_negative)
    return_below: float = checked(0.6, between(0.0, 1.0))
    reserve: float = checked(0.1, between(0.0, 1.0))
    land_below: float = checked(0.05, between(0.0, 1.0))
    return_margin: float = checked(1.5, positive)
    return_speed_mps: float = checked(2.0, positive)
    descent_rate_mps: float = checked(1.0, positive)
    formation: bool = False
    formation_spacing_m: float = checked(10.0, positive)
    formation_leader_speed_mps: float = checked(2.5, positive)
    layers: int = checked(3, between(1, 20))
    layer_step_m: float = checked(4.0, non_negative)
    separation_m: float = checked(8.0, non_negative)
    separation_gain_per_s: float = checked(0.8, non_negative)
    clearance_below_m: float = 6.0
    work_slack: float = checked(0.5, non_negative)
    rim_m: float = checked(8.0, non_negative)

    def __post_init__(self) -> None:
        check_fields(self, "team_search")
