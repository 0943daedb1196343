"""The team-search policy (qrsim_ros/policies/team_search.py, docs/TEAMS.md):
the lane split's geometry, the progress message, the radio on the policies' views, and the team on the
team_search scenario in process (persons found, messages exchanged, no vehicle lost to an obstacle, a
recalled vehicle's lanes taken over by the others from what they heard, determinism, the formation)."""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np
import pytest

from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.policies import AutopilotView, PolicyError, SimulatorView, make_policy
from qrsim_ros.policies.team_search import (
    ProgressMessage,
    TeamSearch,
    decode_progress,
    encode_progress,
    reassign,
    search_lanes,
    split_lanes,
    unwrap,
)
from qrsim_ros.policies.team_search.moves import crowded, keep_inside, separate

LIMITS = (-150.0, 150.0, -150.0, 150.0, -60.0, 0.0)  # config/team_search.yaml


# --- geometry --------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 3, 4, 10, 50])
def test_the_lane_split_covers_the_area_exactly_once(n: int) -> None:
    spacing = 15.0
    lanes = search_lanes(LIMITS, spacing, 0.1)
    bands = split_lanes([float(np.linalg.norm(b - a)) for a, b in lanes], n)
    assert len(bands) == n
    flat = [lane for band in bands for lane in band]
    # every lane in exactly one band, and the bands are contiguous runs in order
    assert sorted(flat) == list(range(len(lanes))) and flat == sorted(flat)
    if n <= len(lanes):
        assert all(bands)  # nobody idle while there are lanes enough
        lengths = np.array([sum(float(np.linalg.norm(lanes[k][1] - lanes[k][0])) for k in b) for b in bands])
        assert lengths.max() - lengths.min() <= 2 * 240.0 * math.sqrt(2) / 1.0  # within two longest lanes
    # every point of the search region (240 m x 240 m) is within half a spacing across the track of
    # exactly one lane segment's line, and lies on that segment's span along the track
    rng = np.random.default_rng(0)
    pts = rng.uniform(-120.0, 120.0, size=(2000, 2))
    d = np.array([math.cos(math.pi / 4), math.sin(math.pi / 4)])
    c = np.array([-d[1], d[0]])
    offsets = np.array([float(a @ c) for a, _ in lanes])
    across = np.abs(pts @ c - offsets[:, None])  # (lanes, points)
    assert np.all(np.diff(offsets) <= spacing + 1e-9)
    owner = np.argmin(across, axis=0)
    assert np.all(across[owner, np.arange(len(pts))] <= spacing / 2 + 1e-9)
    # and no lane more than needed: the region's width across the track (its diagonal, 240 sqrt(2) m)
    # over the spacing, rounded up (the lanes' half-spacing strips overlap only by the rounding)
    assert len(lanes) == math.ceil(240.0 * math.sqrt(2) / spacing)
    for k in np.unique(owner):
        a, b = lanes[k]
        s = pts[owner == k] @ d
        assert np.all(s >= min(a @ d, b @ d) - spacing) and np.all(s <= max(a @ d, b @ d) + spacing)


def test_released_lanes_go_to_the_nearest_active_band() -> None:
    # bands of 4 vehicles over 12 lanes; vehicle 2 (lanes 6-8) gone: 6 and 7 to 1 (centre 4), 8 to 3
    assert reassign([6, 7, 8], {0: 1.0, 1: 4.0, 3: 10.0}) == {1: [6, 7], 3: [8]}
    assert reassign([5], {1: 4.0, 3: 6.0}) == {1: [5]}  # a tie: the lower row
    assert reassign([1, 2], {}) == {}


# --- messages --------------------------------------------------------------------------------------

def _progress() -> ProgressMessage:
    return ProgressMessage(3, 12.4, (-101.23, 45.67), (2.999, -3.0), 31.0, "S", frozenset({0, 5, 21}),
                    frozenset({1}), frozenset({7, 8}), ((10.0, -20.0), (33.3, 44.4)), (0, -1, 12, 9999))


def test_progress_messages_round_trip_compactly() -> None:
    p = _progress()
    payload = encode_progress(p)
    assert len(payload) < 170  # a short broadcast
    q = decode_progress(payload, num_vehicles=4, num_lanes=22)
    assert q.sender == 3 and q.time_s == 12.4 and q.state == "S" and q.height_m == 31.0
    assert q.position_ne_m == (-101.2, 45.7) and q.velocity_ne_mps == (3.0, -3.0)
    assert q.lanes_done == p.lanes_done and q.gone == p.gone and q.claimed == p.claimed
    assert q.found_ne_m == p.found_ne_m and q.heard_age_s == (0, -1, 12, 9999)
    assert q.target_ne_m is None and not q.holding
    claiming = dataclasses.replace(p, target_ne_m=(55.55, -7.04), holding=True)
    r = decode_progress(encode_progress(claiming), num_vehicles=4, num_lanes=22)
    assert r.target_ne_m == (55.5, -7.0) and r.holding  # (55.55 is 55.549... in binary)


@pytest.mark.parametrize("payload", [
    b"", b"\xff\xfe", b"[1, 2]", b'{"m": 2}', b"not json",
    encode_progress(_progress()).replace(b'"i":3', b'"i":9'),        # sender out of range
    encode_progress(_progress()).replace(b'"d":"200021"', b'"d":"zz"'),  # not a hex mask
    encode_progress(_progress()).replace(b'"d":"200021"', b'"d":"1' + b"0" * 40 + b'"'),  # lane 160
    encode_progress(_progress()).replace(b'"s":"S"', b'"s":"Q"'),
    encode_progress(_progress()).replace(b'"h":31.0', b'"h":NaN'),
    encode_progress(_progress()).replace(b',"f":[[10.0,-20.0],[33.3,44.4]]', b""),
    encode_progress(_progress()).replace(b'"a":[0,-1,12,9999]', b'"a":[0,-1,12]'),  # 3 of 4 vehicles
    encode_progress(_progress()).replace(b'"a":[0,-1,12,9999]', b'"a":[0,-1,12,true]'),
    encode_progress(_progress()).replace(b',"k":[]', b""),                 # no claim field
    encode_progress(_progress()).replace(b'"k":[]', b'"k":[1.0,2.0]'),     # no holding flag
    encode_progress(_progress()).replace(b'"k":[]', b'"k":[1.0,2.0,2]'),
    encode_progress(_progress()).replace(b'"k":[]', b'"k":[1.0,2.0,true]'),
    encode_progress(_progress()).replace(b'"k":[]', b'"k":[NaN,2.0,0]'),
    encode_progress(_progress()).replace(b'"k":[]', b'"k":"here"'),
])
def test_a_malformed_payload_is_rejected(payload: bytes) -> None:
    with pytest.raises(ValueError):
        decode_progress(payload, num_vehicles=4, num_lanes=22)


def _team(n: int, steps: int = 3000, seed: int = 1, spec: str = "team-search", **over: object
          ) -> tuple[Simulator, AutopilotView, object, TeamSearch]:
    sim = Simulator.from_scenario("team_search", {"num_vehicles": n, "seed": seed,
                                                  "task": {"duration_steps": steps}, **over})
    sim.reset()
    view = SimulatorView(sim)
    policy = make_policy(spec, view)
    return sim, view, policy, unwrap(policy)


def test_a_malformed_message_on_the_radio_is_ignored_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    sim, view, policy, team = _team(2)
    for _ in range(3):
        sim.step(policy(view))
    heard = team.messages_received
    sim.send(1, -1, b"\x00garbage")  # vehicle 1's radio sends what the policy would not
    sim.send(1, 0, encode_progress(_progress()))  # a message claiming to come from vehicle 3
    with caplog.at_level(logging.WARNING, logger="qrsim_ros.policies.team_search"):
        for _ in range(12):  # past the next broadcast (every 2 s)
            sim.step(policy(view))
    assert team.malformed_messages == 2
    assert sum("malformed" in r.message or "claiming" in r.message for r in caplog.records) == 2
    assert team.messages_received > heard  # the well-formed ones still count


def test_the_view_offers_the_radio_and_says_when_there_is_none() -> None:
    sim = Simulator.from_scenario("team_search", {"num_vehicles": 2, "seed": 3})
    sim.reset()
    view = SimulatorView(sim)
    assert view.has_radio
    assert view.send(0, -1, b"hello") == 0 and view.send(0, 1, b"again", "datagram") == 1
    sim.step(np.zeros((2, 3)))
    sim.step(np.zeros((2, 3)))
    got = view.receive(1)
    assert [p.payload for p in got] == [b"hello", b"again"] and all(p.source == 0 for p in got)
    assert view.receive(1) == [] and view.receive(0) == []
    with pytest.raises(PolicyError, match="vehicle"):
        view.send(5, -1, b"x")
    np.testing.assert_allclose(view.bases_ned_m, [[-130.0, -130.0, 0.0]])
    assert np.all((view.battery_percentage() > 0.8) & (view.battery_percentage() <= 0.85))
    quiet = SimulatorView(Simulator.from_scenario("team_search", {"num_vehicles": 1, "comms": {"on": False}}))
    with pytest.raises(PolicyError, match="no radio"):
        quiet.send(0, -1, b"x")
    with pytest.raises(PolicyError, match="no radio"):
        quiet.receive(0)
    with pytest.raises(PolicyError, match="needs the radio"):
        make_policy("team-search", quiet)


# --- the team in process -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def recalled_run() -> dict[str, object]:
    """4 vehicles, seed 1, 200 s; vehicle 2 recalled at 60 s."""
    sim, view, policy, team = _team(4)
    min_sep = math.inf
    for k in range(1000):
        if k == 300:
            team.recall(2)
            done_at_recall = set(team.agents[2].done)
        sim.step(policy(view))
        x = sim.true_state()[sim.valid]
        d = np.hypot(x[:, None, 0] - x[None, :, 0], x[:, None, 1] - x[None, :, 1]) + 1e9 * np.eye(len(x))
        min_sep = min(min_sep, float(d.min()))
    return {"sim": sim, "team": team, "done_at_recall": done_at_recall, "min_sep": min_sep}


def test_the_team_finds_persons_and_talks(recalled_run: dict) -> None:
    sim, team = recalled_run["sim"], recalled_run["team"]
    assert int(sim.area.found.sum()) >= 2
    assert int(sim.comms.sends.sum()) == team.messages_sent > 100
    assert int(sim.comms.delivered.sum()) > 0 and team.messages_received > 100
    # what one vehicle confirmed, others heard (found lists gossiped)
    assert sum(len(a.confirmed) for a in team.agents) >= 1
    assert any(set(a.found) - set(a.confirmed) for a in team.agents)


def test_no_vehicle_is_lost_to_an_obstacle_or_another(recalled_run: dict) -> None:
    sim = recalled_run["sim"]
    assert all(r == "" for r in sim.fleet.invalid_reason), sim.fleet.invalid_reason
    assert bool(np.all(sim.valid))


def test_the_recalled_vehicle_lands_on_its_take_off_spot_and_charges(recalled_run: dict) -> None:
    sim, team = recalled_run["sim"], recalled_run["team"]
    a = team.agents[2]
    x = sim.true_state()[2]
    assert a.landed_home and np.hypot(*(x[0:2] - a.takeoff_ne)) < 1.0 and -x[2] < 0.6, (x, a.takeoff_ne)
    assert bool(sim.battery.charging[2])


def test_a_recalled_vehicles_lanes_are_taken_over_from_what_the_others_heard(recalled_run: dict) -> None:
    team: TeamSearch = recalled_run["team"]
    band2 = set(team.bands[2])
    left = band2 - recalled_run["done_at_recall"]
    assert left, "vehicle 2 had nothing left to hand over"
    takers = [a for a in team.agents if a.vehicle != 2]
    # the others in hearing learnt of the return from vehicle 2's own message (state H) or by gossip
    # (vehicle 0, in the far band, is out of range of everyone here)
    knowing = {a.vehicle for a in takers if 2 in a.gone_announced}
    assert knowing >= {1, 3}
    assert all(a.vehicle in knowing for a in takers if a.reassigned_from.get(2))
    taken = set().union(*(set(a.reassigned_from.get(2, [])) for a in takers))
    assert left - set().union(*(a.done for a in takers)) <= taken  # every lane left is someone's
    assert taken <= band2 | set().union(*(a.claimed for a in takers))
    # the neighbours' bands (1 and 3) took them, each lane once
    owners = [a.vehicle for a in takers for lane in a.reassigned_from.get(2, [])]
    assert set(owners) <= {1, 3} and len(owners) == len(taken)
    assert team.agents[2].state in ("H", "D", "L")


def test_the_same_seed_flies_the_same_trajectory() -> None:
    def run() -> tuple[np.ndarray, int]:
        sim, view, policy, team = _team(3, seed=2)
        for _ in range(150):
            sim.step(policy(view))
        return sim.true_state().copy(), team.messages_received

    (x1, m1), (x2, m2) = run(), run()
    np.testing.assert_array_equal(x1, x2)
    assert m1 == m2 > 0


def test_formation_followers_stay_within_radio_range_of_the_leader() -> None:
    sim, view, policy, team = _team(4, spec="team-formation")
    worst = 0.0
    for k in range(450):  # 90 s: the climb, the first lane and its turn
        sim.step(policy(view))
        if k >= 50:
            x = sim.true_state()
            worst = max(worst, float(np.hypot(*(x[1:, 0:2] - x[0, 0:2]).T).max()))
    assert bool(np.all(sim.valid))
    assert worst < sim.scenario.comms.range_m * 0.8  # inside the lossless 80 m
    assert all(a.state == "F" for a in team.agents[1:])
    assert team.agents[0].lane is not None or team.agents[0].done  # the leader is on its lanes


def test_the_ros_autopilots_topic_view_offers_the_radio() -> None:
    pytest.importorskip("sensor_msgs.msg", reason="needs the ROS 2 message packages (./qrsim test)")
    from qrsim_ros.core.comms import Packet
    from qrsim_ros.core.config.scenario import load_scenario
    from qrsim_ros.ros.topic_view import TopicView

    view = TopicView(load_scenario("team_search", {"num_vehicles": 3}))
    assert view.has_radio and np.isnan(view.battery_percentage()).all()
    np.testing.assert_allclose(view.bases_ned_m, [[-130.0, -130.0, 0.0]])
    assert view.send(1, -1, b"a") == 0 and view.send(1, 2, b"b", "reliable") == 1
    assert view.outbox == [(1, -1, b"a", None), (1, 2, b"b", "reliable")]  # the node publishes these
    with pytest.raises(ValueError, match="destination"):
        view.send(1, 7, b"c")
    with pytest.raises(PolicyError, match="mode"):
        view.send(1, 2, b"c", "carrier-pigeon")
    view.inboxes.put([Packet(1, -1, 0, 0, "datagram", b"a", math.nan, 0.4)])
    assert [p.payload for p in view.receive(0)] == [b"a"] and view.receive(0) == []
    view.new_episode(0.0)
    assert view.outbox == [] and view.send(1, -1, b"again") == 0
    quiet = TopicView(load_scenario("team_search", {"num_vehicles": 2, "comms": {"on": False}}))
    with pytest.raises(PolicyError, match="no radio"):
        quiet.receive(0)


def test_a_silenced_vehicle_is_presumed_lost_and_its_lanes_taken_over() -> None:
    from qrsim_ros.policies.team_search import TeamSearchParams, team_search_policy

    # vehicle 2's radio (and commands) lost from 20 s on (a comm_loss fault); it never announces anything
    sim = Simulator.from_scenario("team_search", {
        "num_vehicles": 4, "seed": 1, "task": {"duration_steps": 3000},
        "faults": [{"kind": "comm_loss", "vehicles": [2], "trigger": {"at_time_s": 20.0}}]})
    sim.reset()
    view = SimulatorView(sim)
    policy = team_search_policy(TeamSearchParams(lost_timeout_s=10.0))(view)
    team = unwrap(policy)
    team.lane_speed_mps = 1e6  # the expected-work term ~ 0 s: the test waits for the timeout only
    for _ in range(300):  # 60 s
        sim.step(policy(view))
    takers = [a for a in team.agents if a.vehicle != 2]
    assert all(2 not in a.gone_announced for a in takers)  # nothing was announced
    last_heard = max(a.heard_s[2] for a in takers)
    assert 18.0 <= last_heard <= 20.2  # its last broadcast went out before the loss
    presumed = {a.vehicle for a in takers if 2 in a.timed_out}
    assert presumed >= {1, 3}
    taken = [lane for a in takers for lane in a.reassigned_from.get(2, [])]
    assert taken and set(taken) <= set(team.bands[2]) and len(taken) == len(set(taken))


# --- the area's rim ---------------------------------------------------------------------------------------

def test_no_set_point_leaves_the_area_near_its_rim() -> None:
    """Within rim_m (8 m) of a limit the component towards it is capped linearly (full speed at 8 m, 0 at
    4 m) and reversed to 0.5 m/s inwards closer than 4 m; along the limit and away from it nothing
    changes."""
    from qrsim_ros.core.vehicles.controllers import MAX_SPEED_MPS

    sim = Simulator.from_scenario("team_search", {"num_vehicles": 1, "seed": 1})
    policy = TeamSearch(SimulatorView(sim))
    south = LIMITS[0]
    v = np.array([-3.0, 2.0, 0.0])  # south (towards the limit) and east
    cases = [(south + 10.0, -3.0), (south + 6.0, -0.5 * MAX_SPEED_MPS), (south + 4.0, 0.0),
             (south + 2.0, 0.5)]
    def inside(pos_ne: np.ndarray, v: np.ndarray) -> np.ndarray:
        return keep_inside(policy.limits_ne, policy.p.rim_m, pos_ne, v)

    for north, want in cases:
        out = inside(np.array([north, 0.0]), v)
        assert out[0] == pytest.approx(want) and out[1] == 2.0 and out[2] == 0.0, north
    away = np.array([3.0, 0.0, 0.0])
    assert inside(np.array([south + 2.0, 0.0]), away) is away  # already heading in
    east = LIMITS[3]
    out = inside(np.array([0.0, east - 5.0]), np.array([0.0, 3.0, 0.0]))
    assert out[1] == pytest.approx(0.25 * MAX_SPEED_MPS)


def test_a_vehicle_gives_up_a_candidate_another_claimed_unless_it_has_the_right_of_way() -> None:
    """Claims: whoever hears one never takes a point near it; a vehicle going down to a candidate within
    separation_m (8 m) of another's claim climbs back unless it hovers there already and the other does
    not, or both do the same and its index is lower."""
    from qrsim_ros.policies.search_pattern import APPROACH, CLIMB, HOLD

    sim = Simulator.from_scenario("team_search", {"num_vehicles": 3, "seed": 1})
    view = SimulatorView(sim)
    policy = TeamSearch(view)
    mine = np.array([20.0, 30.0])

    def claim(sender: int, at: tuple[float, float], holding: bool) -> ProgressMessage:
        return ProgressMessage(sender, 0.0, at, (0.0, 0.0), 12.0, "S", frozenset(), frozenset(), frozenset(),
                               (), (0, 0, 0), at, holding)

    def after(vehicle: int, mode: str, heard: ProgressMessage) -> tuple[str, bool]:
        a = policy.agents[vehicle]
        a.search.mode[0], a.search.target[0] = mode, mine.copy()
        policy._respect_claim(a, heard)
        index = a.search.map.index(np.asarray(heard.target_ne_m))
        assert a.search.map.blocked[index]  # never taken by this vehicle
        return a.search.mode[0], a.search.target[0] is not None

    near, far = (23.0, 35.0), (20.0, 39.0)  # 5.8 m and 9 m from the candidate
    assert after(2, APPROACH, claim(1, near, holding=False)) == (CLIMB, False)  # index 2 after 1: gives up
    assert after(0, APPROACH, claim(1, near, holding=False)) == (APPROACH, True)  # index 0: keeps it
    assert after(2, HOLD, claim(1, near, holding=False)) == (HOLD, True)  # hovers already: keeps it
    assert after(0, APPROACH, claim(1, near, holding=True)) == (CLIMB, False)  # the other hovers: gives up
    assert after(2, APPROACH, claim(1, far, holding=True)) == (APPROACH, True)  # beyond 8 m: no conflict
    assert policy.claims_yielded == 2


def test_a_vehicle_going_to_a_candidate_descends_only_over_it() -> None:
    from qrsim_ros.policies.team_search import APPROACH_DESCENT_RADIUS_M, descend_only_over

    pos, down, up = np.array([10.0, 20.0]), np.array([2.0, 1.0, 1.5]), np.array([2.0, 1.0, -1.5])
    far = pos + np.array([APPROACH_DESCENT_RADIUS_M + 0.5, 0.0])
    near = pos + np.array([0.0, APPROACH_DESCENT_RADIUS_M - 0.5])
    assert descend_only_over(down, far, pos).tolist() == [2.0, 1.0, 0.0]  # across first, at its height
    assert down[2] == 1.5  # (the set point itself untouched)
    assert descend_only_over(down, near, pos) is down  # over it: down
    assert descend_only_over(up, far, pos) is up  # a climb is never held back


def _lone_agent(height_m: float, velocity_ne: tuple[float, float] = (0.0, 0.0)
                ) -> tuple[AutopilotView, TeamSearch, object, np.ndarray]:
    """Vehicle 0 of a 2-vehicle team at (0, 0), ``height_m`` up, moving at ``velocity_ne``: its view,
    the policy, its agent and its estimated state."""
    sim = Simulator.from_scenario("team_search", {"num_vehicles": 2, "seed": 1})
    view = SimulatorView(sim)
    policy = TeamSearch(view)
    ex = np.full(20, np.nan)
    ex[0:2], ex[16], ex[17:19], ex[19] = (0.0, 0.0), height_m, velocity_ne, 0.0
    return view, policy, policy.agents[0], ex


def test_no_vehicle_descends_or_climbs_onto_another_nearly_below_or_above_it() -> None:
    view, policy, a, ex = _lone_agent(38.0)

    def at(height_m: float, ne: tuple[float, float] = (0.5, 0.5)) -> dict[int, ProgressMessage]:
        return {1: ProgressMessage(1, view.time_s, ne, (0.0, 0.0), height_m, "S", frozenset(), frozenset(),
                            frozenset(), ())}

    descend, climb = np.array([0.0, 0.0, 2.0]), np.array([0.0, 0.0, -2.0])
    a.heard = at(35.0)  # 0.7 m aside, 3 m below: on the way down
    assert separate(policy.p, a.heard, view.time_s, ex, descend)[2] == 0.0
    assert separate(policy.p, a.heard, view.time_s, ex, climb)[2] == -2.0  # away from it
    a.heard = at(41.0)  # above
    assert separate(policy.p, a.heard, view.time_s, ex, climb)[2] == 0.0
    assert separate(policy.p, a.heard, view.time_s, ex, descend)[2] == 2.0
    a.heard = at(35.0, (6.0, 0.0))  # 6 m aside: pushed, but free to descend
    out = separate(policy.p, a.heard, view.time_s, ex, descend)
    assert out[2] == 2.0 and out[0] < 0.0


def test_a_vehicle_home_lands_straight_down_on_its_spot_slowing_near_the_ground_and_stays() -> None:
    from qrsim_ros.policies.team_search import HOME_DESCENT_RADIUS_M, LANDING_CLEARANCE_M

    sim = Simulator.from_scenario("team_search", {"num_vehicles": 2, "seed": 1})
    view = SimulatorView(sim)
    policy = TeamSearch(view)
    a = policy.agents[0]
    a.state, a.takeoff_ne = "H", np.array([-130.0, -130.0])
    ex = np.full(20, np.nan)
    ex[17:20] = 0.0

    def home(ne: tuple[float, float], height_m: float) -> np.ndarray:
        ex[0:2], ex[16] = ne, height_m
        return policy._fly_home(view, a, ex)

    far = home((-130.0 + 3 * HOME_DESCENT_RADIUS_M, -130.0), a.search.search_height_m)
    assert far[0] < 0.0 and abs(far[2]) < 1e-9 and not a.landing_home  # across first, at its height
    v = home((-129.0, -130.0), 10.0)
    assert a.landing_home and v[2] == policy.p.descent_rate_mps and v[0] < 0.0  # down, back over the spot
    # (a push to 1.5 x the radius keeps it landing: the hysteresis)
    assert home((-130.0 + 1.5 * HOME_DESCENT_RADIUS_M, -130.0), 5.0)[2] > 0.0 and a.landing_home
    slow = home((-130.0, -130.0), 0.8)
    assert 0.0 < slow[2] < 0.5 * policy.p.descent_rate_mps  # the last metres slowly
    a.heard = {1: ProgressMessage(1, view.time_s, (-130.0, -130.0 + LANDING_CLEARANCE_M - 0.5), (0.0, 0.0),
                                  0.4, "D", frozenset(), frozenset(), frozenset(), ())}
    assert home((-130.0, -130.0), 6.0)[2] == 0.0  # another below within the clearance: no descent
    a.heard = {1: ProgressMessage(1, view.time_s, (-130.0, -130.0 + LANDING_CLEARANCE_M + 1.0), (0.0, 0.0),
                                  0.4, "D", frozenset(), frozenset(), frozenset(), ())}
    assert home((-130.0, -130.0), 6.0)[2] > 0.0  # the neighbouring spot (4 m): down
    assert home((-130.0, -130.0), 0.4).tolist() == [0.0, 0.0, 0.0] and a.landed_home
    assert home((-127.0, -130.0), 0.4).tolist() == [0.0, 0.0, 0.0]  # landed: it stays


def test_positions_heard_long_ago_neither_push_nor_block() -> None:
    """A message older than STALE_POSITION_S (its sender out of range, home or lost) is no obstacle: at 50
    vehicles such ghosts, where their senders had been minutes before, stopped vehicles for good."""
    from qrsim_ros.policies.team_search import STALE_POSITION_S

    view, policy, a, ex = _lone_agent(30.0)
    v = np.array([-3.0, 0.0, 0.0])  # south, towards it

    def heard(age_s: float) -> dict[int, ProgressMessage]:
        return {1: ProgressMessage(1, view.time_s - age_s, (-3.0, 0.0), (0.0, 0.0), 30.0, "D", frozenset(),
                            frozenset(), frozenset(), ())}

    a.heard = heard(STALE_POSITION_S - 1.0)
    near = crowded(a.heard, view.time_s, ex, policy.p.separation_m)
    assert separate(policy.p, a.heard, view.time_s, ex, v)[0] >= 0.0 and near  # blocked
    a.heard = heard(STALE_POSITION_S + 1.0)
    near = crowded(a.heard, view.time_s, ex, policy.p.separation_m)
    assert separate(policy.p, a.heard, view.time_s, ex, v) is v and not near


def test_the_separation_looks_ahead_to_the_closest_approach() -> None:
    """Two vehicles at one height closing at 6 m/s, 12.4 m apart (beyond separation_m, 8 m) and passing 3 m
    from each other in 2 s: the push away (west, across the track) starts now; moving apart, nothing."""
    view, policy, a, ex = _lone_agent(30.0, (3.0, 0.0))  # north at 3 m/s
    v = np.array([3.0, 0.0, 0.0])

    def heard(velocity_ne: tuple[float, float]) -> ProgressMessage:
        return ProgressMessage(1, view.time_s, (12.0, 3.0), velocity_ne, 30.0, "S", frozenset(), frozenset(),
                        frozenset(), ())

    a.heard = {1: heard((-3.0, 0.0))}  # south at 3 m/s: the closest approach 3 m, in 2 s
    out = separate(policy.p, a.heard, view.time_s, ex, v)
    assert out[1] < -1.0 and out[0] > 0.0  # pushed west, still going north
    a.heard = {1: heard((3.0, 0.0))}  # ahead, same speed: 12.4 m all along
    assert separate(policy.p, a.heard, view.time_s, ex, v) is v
    a.heard = {1: ProgressMessage(1, view.time_s, (12.0, 3.0), (-3.0, 0.0), 36.0, "S", frozenset(),
                                  frozenset(), frozenset(), ())}
    assert separate(policy.p, a.heard, view.time_s, ex, v) is v  # 6 m above: another layer
    climbing = np.array([3.0, 0.0, -2.0])  # climbing at 2 m/s: passes 34 m within 2 s, +-2.5 m: 36 m is met
    assert separate(policy.p, a.heard, view.time_s, ex, climbing)[1] < -1.0


@pytest.mark.parametrize(("n", "seed"), [(20, 3), (50, 1), (50, 2)])
def test_a_crowded_take_off_keeps_every_vehicle_inside_the_area_and_apart(n: int, seed: int) -> None:
    """n vehicles on the base's 4 m grid 6-24 m from the south-west corner, 20 s: before the rim rule the
    separation pushed the grid's edge out of the area or into each other (20 vehicles: 2 lost); before the
    take-off climbed without the separation's push and the separation looked ahead, 50 vehicles lost 5 to
    collisions in each of these runs."""
    from qrsim_ros.policies.base import check_actions, instantiate
    from qrsim_ros.policies.team_search import team_search_policy

    sim = Simulator.from_scenario("team_search", {"num_vehicles": n, "seed": seed})
    view = SimulatorView(sim)
    policy = instantiate(team_search_policy(), view)
    for _ in range(100):
        sim.step(check_actions(policy(view), view))
    assert np.all(sim.valid), [r for r in sim.fleet.invalid_reason if r]
