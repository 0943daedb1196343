"""Obstacle guarding (core.mission.guard, AURIS section 4.2, eqs. 4.1-4.3): the weights on hand-computed
beams, pass-through, stop, steer away from the obstacle side, climb over an obstacle below, the
parameters' checks, and in process a vehicle flying at a wall of the scene crashing without the guard
and not with it (policies.guarded on the real Simulator with range finders)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.mission.guard import (
    GuardParams,
    ObstacleGuard,
    angle_weight,
    beam_terms,
    distance_weight,
    guard_weight,
)
from qrsim_ros.core.sensors.scene_range_finders import BEAM_AXES
from qrsim_ros.policies import AutopilotView, PolicyError, SimulatorView, guarded, make_factory
from qrsim_ros.policies.base import instantiate
from qrsim_ros.policies.episode import run_episode

INF = math.inf
BEAMS = ("front", "front_left", "front_right", "left", "right", "front_down")
DIRS = np.array([BEAM_AXES[b] for b in BEAMS])
NO_RETURN = [INF] * len(BEAMS)


def _ex(n: int = 1, psi: float = 0.0, height_m: float = 20.0) -> np.ndarray:
    """Estimated states at the origin, level, heading psi [rad], height_m above the ground."""
    ex = np.zeros((n, 20))
    ex[:, 2] = -height_m
    ex[:, 5] = psi
    ex[:, 16] = height_m
    return ex


def _ranges(**beams: float) -> list[list[float]]:
    return [[beams.get(b, INF) for b in BEAMS]]


def test_weights_match_eqs_4_1_to_4_3_on_hand_computed_beams() -> None:
    # eq. 4.3 with d_min 2, d_max 10: 6 m -> 0.5; beyond d_max 0; closer than d_min 1; no return 0;
    # closer than the sensor's minimum (-inf) 1; no reading yet (NaN) 0
    np.testing.assert_array_equal(distance_weight([6.0, 12.0, 1.0, INF, -INF, math.nan], 2.0, 10.0),
                                  [0.5, 0.0, 1.0, 0.0, 1.0, 0.0])
    assert distance_weight(4.0, 2.0, 10.0) == 0.75
    # eq. 4.2
    assert angle_weight(0.0) == 1.0
    assert angle_weight(0.5) == pytest.approx(math.exp(-0.25), rel=1e-15)
    # eq. 4.1, capped at 1
    t = beam_terms([0.0, math.pi / 4, math.pi / 2], [6.0, 4.0, 8.0], 2.0, 10.0)
    expected = [0.5, math.exp(-math.pi**2 / 16) * 0.75, math.exp(-math.pi**2 / 4) * 0.25]
    np.testing.assert_allclose(t, expected, rtol=1e-14)
    assert guard_weight(t) == pytest.approx(sum(expected), rel=1e-14)
    assert guard_weight([0.7, 0.6]) == 1.0
    # through the guard: heading north, flying north; the front-right beam (45 deg) at 4 m, the right
    # beam (90 deg) at 6 m, the front-down beam (45 deg below) at 8 m
    g = ObstacleGuard(1, DIRS)
    g.velocity(_ex(), _ranges(front_right=4.0, right=6.0, front_down=8.0), [[2.0, 0.0, 0.0]])
    yaw = math.exp(-math.pi**2 / 16) * 0.75 + math.exp(-math.pi**2 / 4) * 0.5
    pitch = math.exp(-math.pi**2 / 16) * 0.25
    assert g.weight_yaw[0] == pytest.approx(yaw, rel=1e-12)
    assert g.weight_pitch[0] == pytest.approx(pitch, rel=1e-12)
    assert g.weight[0] == pytest.approx(yaw + pitch, rel=1e-12)
    # the beams turn with the estimated heading: flying east with the nose east is the same geometry
    g.reset()
    g.velocity(_ex(psi=math.pi / 2), _ranges(front_right=4.0, right=6.0, front_down=8.0), [[0.0, 2.0, 0.0]])
    assert g.weight_yaw[0] == pytest.approx(yaw, rel=1e-12)
    # ... but flying west with the nose north, the front-right beam is 135 deg off the travel
    g.reset()
    g.velocity(_ex(), _ranges(front_right=4.0), [[0.0, -2.0, 0.0]])
    assert g.weight_yaw[0] == pytest.approx(math.exp(-(3 * math.pi / 4) ** 2) * 0.75, rel=1e-12)


def test_no_obstacle_passes_the_set_point_bit_exact() -> None:
    rng = np.random.default_rng(3)
    v = rng.normal(size=(4, 3)) * 2.0
    g = ObstacleGuard(4, DIRS)
    ex = _ex(4)
    ex[:, 3:6] = rng.normal(size=(4, 3)) * 0.2
    ranges = np.full((4, len(BEAMS)), INF)
    ranges[1, 0] = 25.0  # beyond d_max
    ranges[2, :] = math.nan  # no reading yet
    out = g.velocity(ex, ranges, v)
    assert out.tobytes() == v.tobytes()
    wp = np.column_stack([rng.normal(size=(4, 3)) * 30.0, rng.uniform(-3, 3, 4)])
    out = g.waypoint(ex, ranges, wp, 1.0)
    assert out.tobytes() == wp.tobytes()
    # and a hovering vehicle (no direction of travel) with a wall in its face is left alone too
    hover = np.zeros((1, 3))
    assert ObstacleGuard(1, DIRS).velocity(_ex(), _ranges(front=1.0), hover).tobytes() == hover.tobytes()


def test_an_obstacle_straight_ahead_within_d_min_stops_the_advance() -> None:
    g = ObstacleGuard(1, [BEAM_AXES["front"]])  # the front beam alone: nothing seen once turned away
    out = g.velocity(_ex(), [[1.5]], [[2.0, 0.0, 0.0]])
    assert g.weight[0] == 1.0
    # no speed towards the obstacle: dead ahead the course turns right by max_steer (90 deg) to east,
    # where the front beam is 90 deg off: speed 2 (1 - exp(-(pi/2)^2))
    assert out[0, 0] == pytest.approx(0.0, abs=1e-12)
    assert out[0, 1] == pytest.approx(2.0 * (1.0 - math.exp(-math.pi**2 / 4)), rel=1e-12)
    np.testing.assert_allclose(g.temporary_goal_ne_m, [[0.0, 8.0]], atol=1e-12)
    # with the course held straight at it (no room to steer: max_steer ~ 0), a complete stop
    g = ObstacleGuard(1, [BEAM_AXES["front"]], GuardParams(max_steer_rad=1e-9))
    out = g.velocity(_ex(), [[1.5]], [[2.0, 0.0, 0.5]])
    assert out[0, 0] == pytest.approx(0.0, abs=1e-12) and out[0, 1] == pytest.approx(0.0, abs=1e-7)
    assert out[0, 2] == 0.5  # no pitch beam: the vertical set point is kept
    # a waypoint ahead: held where the vehicle is
    g = ObstacleGuard(1, [BEAM_AXES["front"]], GuardParams(max_steer_rad=1e-9))
    wp = g.waypoint(_ex(), [[1.0]], [[30.0, 0.0, -20.0, 0.0]], 1.0)
    np.testing.assert_allclose(wp, [[0.0, 0.0, -20.0, 0.0]], atol=1e-7)


@pytest.mark.parametrize("beam, turn", [("front_right", -1.0), ("front_left", 1.0)])
def test_an_obstacle_front_right_turns_left_and_front_left_turns_right(beam: str, turn: float) -> None:
    g = ObstacleGuard(1, DIRS)
    out = g.velocity(_ex(), _ranges(**{beam: 4.0}), [[2.0, 0.0, 0.0]])
    w = math.exp(-math.pi**2 / 16) * 0.75
    course = turn * w * math.pi / 2  # psi_a = w_yaw * max_steer, away from the obstacle's side
    assert math.atan2(out[0, 1], out[0, 0]) == pytest.approx(course, abs=1e-12)
    assert out[0, 0] > 0.0 and np.sign(out[0, 1]) == turn  # east > 0: right
    np.testing.assert_allclose(g.temporary_goal_ne_m[0], 8.0 * np.array([math.cos(course), math.sin(course)]),
                               atol=1e-12)
    # the same geometry for a vehicle heading (and flying) south: the turn keeps its side
    g = ObstacleGuard(1, DIRS)
    out = g.velocity(_ex(psi=math.pi), _ranges(**{beam: 4.0}), [[-2.0, 0.0, 0.0]])
    assert math.atan2(out[0, 1], out[0, 0]) == pytest.approx(math.pi + course if turn < 0 else
                                                             -math.pi + course, abs=1e-12)
    # after the obstacle is gone the temporary goal is flown to, then the set point again
    g = ObstacleGuard(1, DIRS)
    g.velocity(_ex(), _ranges(**{beam: 4.0}), [[2.0, 0.0, 0.0]])
    goal = g.temporary_goal_ne_m[0].copy()
    ex = _ex()
    ex[0, 0:2] = goal * 0.5
    out = g.velocity(ex, [NO_RETURN], [[2.0, 0.0, 0.0]])
    np.testing.assert_allclose(out[0, :2], 2.0 * goal / np.linalg.norm(goal), atol=1e-12)
    ex[0, 0:2] = goal + 0.5  # within goal_radius_m 1
    out = g.velocity(ex, [NO_RETURN], [[2.0, 0.0, 0.0]])
    assert out.tolist() == [[2.0, 0.0, 0.0]] and np.isnan(g.temporary_goal_ne_m).all()


def test_no_move_towards_a_beam_within_d_min_and_the_detour_keeps_its_side() -> None:
    # flying north-east with the nose north: the front-right beam (north-east) reads 1.5 m < d_min
    # (a small steer, 0.3 rad: the course flown, 62 deg, still leads 17 deg off the beam towards it)
    g = ObstacleGuard(1, DIRS, GuardParams(max_steer_rad=0.3))
    out = g.velocity(_ex(), _ranges(front_right=1.5), [[2.0, 2.0, 0.0]])
    assert math.atan2(out[0, 1], out[0, 0]) > math.radians(45.0 + 90.0 - 1e-9)  # slid off the beam
    towards = (out[0, 0] + out[0, 1]) / math.sqrt(2.0)
    speed = 2.0 * math.sqrt(2.0) * (1.0 - math.exp(-0.3**2))  # (1 - w_stop), the beam 0.3 rad off
    assert towards == pytest.approx(0.0, abs=1e-12)
    assert np.hypot(out[0, 0], out[0, 1]) == pytest.approx(speed * math.sin(0.3), rel=1e-9)
    # a wall dead ahead: the detour turns right (east) ...
    g = ObstacleGuard(1, DIRS)
    g.velocity(_ex(), _ranges(front=3.0, front_left=4.0, front_right=4.0), [[2.0, 0.0, 0.0]])
    assert g.turn[0] == 1.0 and g.temporary_goal_ne_m[0, 1] > 0.0
    # ... and keeps turning right when noise puts the weight slightly on the right (a fresh guard
    # would turn left)
    slightly_right = _ranges(front=3.0, front_left=4.1, front_right=3.9)
    g.velocity(_ex(), slightly_right, [[2.0, 0.0, 0.0]])
    assert g.turn[0] == 1.0 and g.temporary_goal_ne_m[0, 1] > 0.0
    fresh = ObstacleGuard(1, DIRS)
    fresh.velocity(_ex(), slightly_right, [[2.0, 0.0, 0.0]])
    assert fresh.turn[0] == -1.0 and fresh.temporary_goal_ne_m[0, 1] < 0.0
    # an obstacle clearly on the side the detour turns to switches it
    g.velocity(_ex(), _ranges(front_right=3.0, right=2.5), [[2.0, 0.0, 0.0]])
    assert g.turn[0] == -1.0 and g.temporary_goal_ne_m[0, 1] < 0.0


def test_an_obstacle_below_ahead_on_the_pitch_beam_climbs() -> None:
    g = ObstacleGuard(1, DIRS, GuardParams(climb_rate_mps=1.5))
    out = g.velocity(_ex(), _ranges(front_down=5.0), [[2.0, 0.0, 0.3]])
    w = math.exp(-math.pi**2 / 16) * (10.0 - 5.0) / 8.0
    assert g.weight_pitch[0] == pytest.approx(w, rel=1e-12) and g.weight_yaw[0] == 0.0
    assert out[0, 2] == pytest.approx(-1.5 * w, rel=1e-12)  # up (NED down negative)
    assert out[0, 1] == 0.0  # no yaw beam: no steer
    assert out[0, 0] == pytest.approx(2.0 * (1.0 - w), rel=1e-12)  # the advance slows while it climbs
    # a faster climb already commanded is kept
    g.reset()
    assert g.velocity(_ex(), _ranges(front_down=5.0), [[2.0, 0.0, -2.0]])[0, 2] == -2.0
    # both scanners: steer and climb together
    g.reset()
    out = g.velocity(_ex(), _ranges(front_down=5.0, front_right=4.0), [[2.0, 0.0, 0.0]])
    assert out[0, 1] < 0.0 and out[0, 2] < 0.0
    # waypoint: the down coordinate rises by climb_rate w dt above the vehicle
    g.reset()
    wp = g.waypoint(_ex(height_m=20.0), _ranges(front_down=5.0), [[40.0, 0.0, -20.0, 0.0]], 2.0)
    assert wp[0, 2] == pytest.approx(-20.0 - 1.5 * w * 2.0, rel=1e-12)


def test_parameters_are_checked() -> None:
    with pytest.raises(ConfigError, match="d_min_m"):
        GuardParams(d_min_m=10.0, d_max_m=5.0)
    with pytest.raises(ConfigError, match="max_steer_rad"):
        GuardParams(max_steer_rad=0.0)
    with pytest.raises(ConfigError, match="goal_radius_m"):
        GuardParams(goal_radius_m=9.0, detour_distance_m=8.0)
    with pytest.raises(ConfigError, match="climb_rate_mps"):
        GuardParams(climb_rate_mps=-1.0)
    with pytest.raises(ConfigError, match="d_max_m"):
        GuardParams(d_max_m=math.nan)
    with pytest.raises(ValueError, match="expected eX"):
        ObstacleGuard(1, DIRS).velocity(_ex(2), np.full((2, len(BEAMS)), INF), np.zeros((2, 3)))


# --- in process: the real Simulator, a wall in the scene ---------------------------------------------

WALL_BEAMS = {"front": {"max_range_m": 30.0}, "front_left": {"max_range_m": 30.0},
              "front_right": {"max_range_m": 30.0}}


def _wall_scenario(sensors: dict | None = None, seed: int = 7):
    # one Pelican at 10 m heading north, velocity control, no turbulence; a wall 15 m north (its face
    # at 14.5 m), 20 m wide, 30 m tall
    sensors = {"range_finders": {"down": {}, **WALL_BEAMS}} if sensors is None else sensors
    return load_scenario("keep_spot", {
        "seed": seed,
        "task": {"duration_steps": 1500, "control_cost": False},  # 30 s at 2 m/s
        "area": {"limits_ned": [-60.0, 60.0, -60.0, 60.0, -40.0, 0.0]},
        "scene": {"obstacles": [{"type": "box", "center_ne_m": [15.0, 0.0], "size_m": [1.0, 20.0, 30.0]}]},
        "vehicle": {"control": "velocity", "turbulence": {"on": False}, "sensors": sensors},
    })


def _north(view: AutopilotView):
    return lambda v: np.array([[2.0, 0.0, 0.0]])


def _fly(factory, seed: int = 7) -> tuple[Simulator, list[np.ndarray]]:
    sim = Simulator(_wall_scenario(seed=seed))
    track: list[np.ndarray] = []
    # the test (not the policy) reads the true position
    run_episode(sim, "north", factory=factory,
                on_step=lambda s, r: track.append(s.true_state()[0, :3].copy()))
    return sim, track


def test_in_process_a_wall_crashes_the_unguarded_vehicle_and_not_the_guarded_one() -> None:
    sim, track = _fly(_north, seed=1)
    assert not sim.valid[0]  # flew into the wall
    assert max(p[0] for p in track) > 14.0  # at the wall's face (14.5 m, less the 0.4 m vehicle radius)
    sim, track = _fly(guarded(_north), seed=1)
    assert sim.valid[0], sim.done_reason
    t = np.array(track)
    # in front of the wall (within its 20 m span and the vehicle's radius) it never reached the face ...
    in_span = np.abs(t[:, 1]) < 10.0 + 0.4
    assert t[in_span, 0].max() < 14.5 - 0.4
    # ... it went around: beyond the wall's end, then north of the wall (its back face at 15.5 m)
    assert np.abs(t[:, 1]).max() > 10.4
    assert t[-1, 0] > 15.5 + 5.0


def test_guarded_policies_by_name_and_without_range_finders() -> None:
    sim = Simulator(_wall_scenario())
    view = SimulatorView(sim)
    policy = instantiate(make_factory("guarded-hover", "keep_spot"), view)
    assert policy.beams == ("front", "front_left", "front_right")  # the downward altimeter left out
    assert np.array_equal(policy(view), np.zeros((1, 3)))  # hover: no direction of travel
    readings = view.range_finder_readings()
    assert readings.names == ("down", "front", "front_left", "front_right")
    np.testing.assert_allclose(readings.range_m[0, 1], 14.5, atol=1e-3)  # the front beam at the wall
    np.testing.assert_allclose(readings.range_m[0, 0], 10.0, atol=1e-3)  # the ground 10 m below
    np.testing.assert_allclose(np.linalg.norm(readings.directions_frd, axis=1), 1.0, rtol=1e-15)
    sim = Simulator(_wall_scenario({"range_finders": {"down": {}}}))
    with pytest.raises(PolicyError, match="besides down"):
        instantiate(make_factory("guarded-hover"), SimulatorView(sim))
    with pytest.raises(PolicyError, match="unknown policy"):
        make_factory("guarded-nonsense")
    # a view without range-finder readings
    with pytest.raises(PolicyError, match="does not provide"):
        guarded(_north)(object())  # type: ignore[arg-type]


def test_the_ros_autopilots_topic_view_serves_the_range_finders() -> None:
    pytest.importorskip("sensor_msgs.msg", reason="needs the ROS 2 message packages (./qrsim test)")
    from qrsim_ros.ros.topic_view import TopicView

    view = TopicView(_wall_scenario())
    assert view.range_finder_beams == ("down", "front", "front_left", "front_right")
    assert np.isnan(view.range_finder_readings().range_m).all()  # nothing received yet
    view.set_range(0, "front_right", 4.0)
    view.set_range(0, "front", math.inf)
    r = view.range_finder_readings(("front", "front_right"))
    assert r.names == ("front", "front_right") and r.range_m.tolist() == [[math.inf, 4.0]]
    np.testing.assert_array_equal(r.directions_frd, [BEAM_AXES["front"], BEAM_AXES["front_right"]])
    assert r.max_range_m.tolist() == [30.0, 30.0]
    with pytest.raises(PolicyError, match="front_down"):
        view.range_finder_readings(("front_down",))
    policy = instantiate(make_factory("guarded-hover", "keep_spot"), view)  # type: ignore[arg-type]
    assert policy.beams == ("front", "front_left", "front_right")
