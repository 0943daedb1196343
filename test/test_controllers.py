"""Tests of the vectorised QRSim PID controllers (spec 6, 8.1 testPIDs).

Closed loops use the noiseless model (no dynamic noise, no wind) in a large area. The PID structure
is checked step by step against scalar transcriptions of the MATLAB ``computeU`` methods below.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import numpy as np
import pytest

from qrsim_ros.core.common.frames import body_to_ned, dcm_from_state, dcm_ned_to_body, wrap_angle
from qrsim_ros.core.vehicles.controllers import (
    AnglesHeightPID,
    VelocityHeightPID,
    VelocityPID,
    WaypointPID,
    estimated_state_view,
    state_view,
)
from qrsim_ros.core.vehicles.pelican import (
    HOVER_CONTROL,
    MASS_KG,
    PelicanFleet,
    PelicanParams,
    check_controls,
    default_state_limits,
)

DT = 0.02
G = 9.81
ATTITUDE_GAIN = 0.744983  # steady attitude per attitude command (spec 2.4)
BIG_AREA = [-1000, 1000, -1000, 1000, -1000, 0]


def make_fleet(x0: np.ndarray) -> PelicanFleet:
    x0 = np.atleast_2d(x0)
    f = PelicanFleet(len(x0), PelicanParams(state_limits=default_state_limits(BIG_AREA)))
    f.set_state(x0)
    return f


def estimated_from_true(x: np.ndarray, accel_body: np.ndarray) -> np.ndarray:
    """Noiseless eX (N, 20) of true states (spec 2.1 layout)."""
    x = np.atleast_2d(x)
    n = x.shape[0]
    velocity_ned = body_to_ned(dcm_from_state(x), x[:, 6:9])
    ex = np.zeros((n, 20))
    ex[:, 0:6] = x[:, 0:6]
    ex[:, 9:12] = x[:, 9:12]
    ex[:, 13:16] = accel_body
    ex[:, 16] = -x[:, 2]
    ex[:, 17:19] = velocity_ned[:, 0:2]
    ex[:, 19] = -velocity_ned[:, 2]
    return ex


Policy = Callable[[PelicanFleet], np.ndarray]


def fly(x0: np.ndarray, policy: Policy, steps: int) -> tuple[PelicanFleet, list[np.ndarray]]:
    """Close the loop for ``steps`` control steps (one model step each); returns fleet and controls."""
    f = make_fleet(x0)
    controls = []
    for _ in range(steps):
        u = policy(f)
        check_controls(u)
        f.step(u)
        controls.append(u)
    assert f.valid.all(), f.invalid_reason
    return f, controls


def velocity_ned(x: np.ndarray) -> np.ndarray:
    return body_to_ned(dcm_from_state(x), x[:, 6:9])


def far_apart_starts(n: int, z: float = -500.0, psi: float = 0.0) -> np.ndarray:
    """Hovering starts 300 m apart (vehicles move < 150 m in the tests: no collisions)."""
    k = np.arange(n) * 300.0 - 150.0 * (n - 1)
    return np.column_stack([k, -k, np.full(n, z), np.zeros(n), np.zeros(n), np.full(n, psi)])


# --- scalar transcriptions of the MATLAB controllers (spec 6), heading error wrapped -----------------


def _clamp(v: float, lo: float, hi: float) -> float:
    return min(max(v, lo), hi)


class RefVelocityPID:
    def __init__(self) -> None:
        self.ei, self.e_past, self.sp = [0.0] * 3, [0.0] * 3, [0.0] * 3

    def compute(self, x: np.ndarray, v_des: list[float], psi_des: float) -> list[float]:
        sp_change = self.sp != list(v_des)
        self.sp = list(v_des)
        cbn = dcm_ned_to_body(x[3], x[4], x[5])
        vt = cbn @ np.asarray(v_des, float)
        uvw = x[6:9]
        kp, ki, kd = (0.25, 0.25, -0.2), (0.003, 0.003, -0.002), (0.05, 0.05, -0.0)
        out = []
        for i in range(3):
            des = _clamp(vt[i], -3, 3)
            e = -(des - uvw[i]) if i == 0 else des - uvw[i]
            de = 0.0 if sp_change else (e - self.e_past[i]) / DT
            out.append(kp[i] * e + ki[i] * self.ei[i] + kd[i] * de)
            self.ei[i] += e
            self.e_past[i] = e
        ya = _clamp(6 * float(wrap_angle(psi_des - x[5])), -4.4, 4.4)
        return [_clamp(out[0], -0.34, 0.34), _clamp(out[1], -0.34, 0.34), _clamp(0.59 + out[2], 0, 1), ya, 12]


class RefAltitude:
    def __init__(self) -> None:
        self.iz, self.ez = 0.0, 0.0

    def throttle(self, z: float, z_des: float, change: bool) -> float:
        ez = -(z_des - z)
        self.iz += ez * DT
        dez = 0.0 if change else (ez - self.ez) / DT
        self.ez = ez
        th_des = 0.59 + 0.03 * ez + 0.0008 * self.iz + 0.04 * dez
        th = _clamp(th_des, 0, 1)
        self.iz -= (th_des - th) * 2
        return th


class RefVelocityHeightPID:
    def __init__(self) -> None:
        self.ei, self.e_past, self.sp = [0.0] * 2, [0.0] * 2, [0.0] * 3
        self.alt = RefAltitude()

    def compute(self, x: np.ndarray, v_des: list[float], z_des: float, psi_des: float) -> list[float]:
        sp = [*v_des, z_des]
        sp_change = self.sp != sp
        self.sp = sp
        vt = dcm_ned_to_body(x[3], x[4], x[5]) @ np.array([v_des[0], v_des[1], 0.0])
        out = []
        for i in range(2):
            des = _clamp(vt[i], -3, 3)
            e = -(des - x[6 + i]) if i == 0 else des - x[6 + i]
            de = 0.0 if sp_change else (e - self.e_past[i]) / DT
            out.append(0.25 * e + 0.003 * self.ei[i] + 0.05 * de)
            self.ei[i] += e
            self.e_past[i] = e
        ya = _clamp(6 * float(wrap_angle(psi_des - x[5])), -4.4, 4.4)
        th = self.alt.throttle(x[2], z_des, sp_change)
        return [_clamp(out[0], -0.34, 0.34), _clamp(out[1], -0.34, 0.34), th, ya, 12]


class RefWaypointPID:
    def __init__(self) -> None:
        self.wp = [0.0] * 3
        self.alt = RefAltitude()

    def compute(
        self, x: np.ndarray, wp: list[float], psi_des: float, ex: np.ndarray | None = None
    ) -> list[float]:
        change = self.wp != list(wp)
        self.wp = list(wp)
        px, py = (x[0], x[1]) if ex is None else (ex[0], ex[1])
        psi = x[5] if ex is None else ex[5]
        d = math.hypot(wp[0] - px, wp[1] - py)
        a = math.atan2(wp[1] - py, wp[0] - px) - psi
        bx, by = d * math.cos(a), d * math.sin(a)
        if ex is None:
            z, u, v = x[2], x[6], x[7]
        else:
            z, vel = -ex[16], math.hypot(ex[17], ex[18])
            u, v = vel * math.cos(a), vel * math.sin(a)
        theta = _clamp(0.09 * (-(_clamp(0.9 * bx, -5, 5) - u)), -0.34, 0.34)
        phi = _clamp(0.09 * (_clamp(0.9 * by, -5, 5) - v), -0.34, 0.34)
        ya = _clamp(6 * float(wrap_angle(psi_des - psi)), -4.4, 4.4)
        return [theta, phi, self.alt.throttle(z, wp[2], change), ya, 12]


def _random_states(rng: np.random.Generator, k: int) -> np.ndarray:
    x = np.zeros((k, 13))
    x[:, 0:2] = rng.uniform(-30, 30, (k, 2))
    x[:, 2] = rng.uniform(-60, -1, k)
    x[:, 3:5] = rng.uniform(-0.3, 0.3, (k, 2))
    x[:, 5] = rng.uniform(-3, 3, k)
    x[:, 6:9] = rng.uniform(-4, 4, (k, 3))
    x[:, 12] = MASS_KG * G
    return x


def test_velocity_pid_matches_original_structure() -> None:
    rng = np.random.default_rng(0)
    states = _random_states(rng, 60)
    set_points = [[0.4, -0.3, 0.5], [3.5, 1.0, -4.0]]
    pid, ref = VelocityPID(1), RefVelocityPID()
    for k, x in enumerate(states):
        v_des = set_points[(k // 7) % 2]  # set point changes every 7 steps (derivative reset)
        u = pid.compute_from_state(x[None], [v_des], 0.7)
        np.testing.assert_allclose(u[0], ref.compute(x, v_des, 0.7), rtol=0, atol=1e-12)


def test_velocity_pid_first_steps_by_hand() -> None:
    """From rest: pitch = Kvp e, then + Kvi * sum(e) (integral is a plain sum, not times dt)."""
    x = np.zeros((1, 13))
    x[0, 2], x[0, 12] = -50.0, MASS_KG * G
    pid = VelocityPID(1)
    u1 = pid.compute_from_state(x, [[0.4, 0.0, 0.5]], 0.0)
    u2 = pid.compute_from_state(x, [[0.4, 0.0, 0.5]], 0.0)
    np.testing.assert_allclose(u1[0], [-0.1, 0.0, 0.59 - 0.2 * 0.5, 0.0, 12.0], atol=1e-15)
    np.testing.assert_allclose(u2[0], [-0.1 - 0.003 * 0.4, 0.0, 0.49 - 0.002 * 0.5, 0.0, 12.0], atol=1e-15)


def test_velocity_height_pid_matches_original_structure() -> None:
    rng = np.random.default_rng(1)
    states = _random_states(rng, 80)
    set_points = [([0.5, -1.0], -20.0), ([4.0, 0.0], -60.0), ([0.5, -1.0], -21.0)]
    pid, ref = VelocityHeightPID(1), RefVelocityHeightPID()
    saturated = 0
    for k, x in enumerate(states):
        v_des, z_des = set_points[(k // 9) % 3]
        u = pid.compute_from_state(x[None], [v_des], z_des, -2.0)
        expected = ref.compute(x, v_des, z_des, -2.0)
        saturated += expected[2] in (0, 1)
        np.testing.assert_allclose(u[0], expected, rtol=0, atol=1e-12)
    assert saturated > 5  # the anti-windup path was exercised


def test_altitude_pid_by_hand() -> None:
    """ez = z - z_des, iz += ez dt before use, derivative reset on the first (changed) set point."""
    pid = AnglesHeightPID(1)
    x = np.zeros((1, 13))
    x[0, 2], x[0, 12] = -10.0, MASS_KG * G
    th1 = pid.compute_from_state(x, 0, 0, -12.0, 0)[0, 2]
    th2 = pid.compute_from_state(x, 0, 0, -12.0, 0)[0, 2]
    x[0, 2] = -10.1
    th3 = pid.compute_from_state(x, 0, 0, -12.0, 0)[0, 2]
    assert th1 == pytest.approx(0.59 + 0.03 * 2 + 0.0008 * 0.04, abs=1e-14)
    assert th2 == pytest.approx(0.59 + 0.03 * 2 + 0.0008 * 0.08, abs=1e-14)
    assert th3 == pytest.approx(0.59 + 0.03 * 1.9 + 0.0008 * 0.118 + 0.04 * (-0.1 / DT), abs=1e-12)


@pytest.mark.parametrize("estimated", [False, True])
def test_waypoint_pid_matches_original_structure(estimated: bool) -> None:
    rng = np.random.default_rng(2)
    states = _random_states(rng, 80)
    waypoints = [[10.0, -5.0, -20.0], [-40.0, 25.0, -70.0], [10.0, -5.0, -21.0]]
    pid, ref = WaypointPID(1), RefWaypointPID()
    for k, x in enumerate(states):
        wp = waypoints[(k // 9) % 3]
        if estimated:
            ex = estimated_from_true(x[None], np.zeros((1, 3)))
            u = pid.compute_from_estimated_state(ex, [wp], 1.0)
            expected = ref.compute(x, wp, 1.0, ex[0])
        else:
            u = pid.compute_from_state(x[None], [wp], 1.0)
            expected = ref.compute(x, wp, 1.0)
        np.testing.assert_allclose(u[0], expected, rtol=0, atol=1e-12)


# --- closed loops ------------------------------------------------------------------------------------


@pytest.mark.parametrize("estimated", [False, True])
def test_waypoint_pid_reaches_waypoint(estimated: bool) -> None:
    waypoint, psi_des = np.array([12.0, 16.0, -30.0]), 0.5  # 20 m horizontally, 10 m up
    pid = WaypointPID(1)

    def policy(f: PelicanFleet) -> np.ndarray:
        if estimated:
            return pid.compute_from_estimated_state(
                estimated_from_true(f.state, f.accel_body), [waypoint], psi_des
            )
        return pid.compute_from_state(f.state, [waypoint], psi_des)

    f, _ = fly(np.array([0.0, 0.0, -20.0, 0.0, 0.0, 0.0]), policy, 3000)  # 60 s
    x = f.state[0]
    assert np.linalg.norm(x[0:3] - waypoint) < 0.5
    assert abs(wrap_angle(x[5] - psi_des)) < 0.05


def test_velocity_pid_tracks_velocity() -> None:
    v_des = np.array([[2.0, 0.0, 0.0], [0.0, -2.0, 0.0], [1.2, 1.6, 0.0], [0.0, 0.0, -2.0], [0.0, 0.0, 2.0]])
    psi_des = np.array([0.3, -1.0, 2.0, 0.0, 0.0])
    pid = VelocityPID(5)
    f, controls = fly(far_apart_starts(5), lambda f: pid.compute_from_state(f.state, v_des, psi_des), 750)
    x = f.state
    assert np.abs(velocity_ned(x) - v_des).max() < 0.1
    assert np.abs(wrap_angle(x[:, 5] - psi_des)).max() < 0.05
    assert np.all(np.abs(np.array(controls)[:, :, 0:2]) <= 0.34)


def test_velocity_height_pid_tracks_velocity_and_altitude() -> None:
    v_des = np.array([[2.0, 0.0], [0.0, -2.0], [-1.2, 1.6], [0.0, 0.0]])
    z_des = np.array([-520.0, -480.0, -520.0, -480.0])  # 20 m above / below the start
    psi_des = np.array([0.0, 1.0, -2.0, 3.0])
    pid = VelocityHeightPID(4)
    # 80 s: the altitude loop's integral (kiz 0.0008) makes the last half metre slow (0.48 m at 60 s)
    f, _ = fly(far_apart_starts(4), lambda f: pid.compute_from_state(f.state, v_des, z_des, psi_des), 4000)
    x = f.state
    assert np.abs(velocity_ned(x)[:, 0:2] - v_des).max() < 0.1
    assert np.abs(x[:, 2] - z_des).max() < 0.5
    assert np.abs(wrap_angle(x[:, 5] - psi_des)).max() < 0.05


def test_angles_height_pid_reaches_altitude_and_tracks_attitude() -> None:
    # vehicles 0, 1: level, 20 m to climb / descend; 2, 3: pitch / roll command at the target height
    z_des = np.array([-30.0, -480.0, -500.0, -500.0])
    pitch = np.array([0.0, 0.0, 0.1, 0.0])
    roll = np.array([0.0, 0.0, 0.0, -0.08])
    starts = far_apart_starts(4)
    starts[0, 2], starts[1, 2] = -10.0, -500.0
    pid = AnglesHeightPID(4)
    f, _ = fly(starts, lambda f: pid.compute_from_state(f.state, pitch, roll, z_des, 0.0), 4000)  # 80 s
    x = f.state
    assert np.abs(x[:, 2] - z_des).max() < 0.5
    np.testing.assert_allclose(x[:, 4], ATTITUDE_GAIN * pitch, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(x[:, 3], ATTITUDE_GAIN * roll, rtol=1e-5, atol=1e-9)
    assert x[2, 6] < -1.0 and x[3, 7] < -1.0  # nose up flies backwards, right side up flies left


def test_angles_height_pid_clamps_to_model_limits() -> None:
    x = np.zeros((2, 13))
    x[:, 2], x[:, 12] = -50.0, MASS_KG * G
    u = AnglesHeightPID(2).compute_from_state(x, [2.0, -0.5], [-1.5, 0.2], -50.0, [10.0, 0.0])
    np.testing.assert_allclose(u[:, 0:2], [[0.9, -0.9], [-0.5, 0.2]])  # rows are vehicles
    assert u[0, 3] == pytest.approx(-4.4)  # wrapped error 10 - 4 pi = -2.57 rad -> clamp(6 * -2.57)
    check_controls(u)


# --- heading wrap ---------------------------------------------------------------------------------------

CONTROLLERS = {
    "velocity": VelocityPID,
    "velocity_height": VelocityHeightPID,
    "waypoint": WaypointPID,
    "angles_height": AnglesHeightPID,
}


def hold_set_points(name: str, position_ned: np.ndarray, psi_des: float) -> tuple:
    """Set points that keep a single vehicle where it is, with heading ``psi_des``."""
    return {
        "velocity": ([[0.0, 0.0, 0.0]], psi_des),
        "velocity_height": ([[0.0, 0.0]], position_ned[2], psi_des),
        "waypoint": ([position_ned], psi_des),
        "angles_height": (0.0, 0.0, position_ned[2], psi_des),
    }[name]


@pytest.mark.parametrize("name", list(CONTROLLERS))
def test_yaw_turns_the_short_way(name: str) -> None:
    psi_des, psi0 = np.deg2rad(179.0), np.deg2rad(-179.0)
    x0 = np.array([0.0, 0.0, -50.0, 0.0, 0.0, psi0])
    args = hold_set_points(name, x0[0:3], psi_des)
    u = CONTROLLERS[name](1).compute_from_state(make_fleet(x0).state, *args)
    assert u[0, 3] == pytest.approx(6.0 * np.deg2rad(-2.0), rel=1e-12)  # wrap(358 deg) = -2 deg
    pid = CONTROLLERS[name](1)
    f, _ = fly(x0, lambda f: pid.compute_from_state(f.state, *args), 250)
    psi = f.state[0, 5]
    assert abs(wrap_angle(psi - psi_des)) < 0.01
    assert psi == pytest.approx(psi0 - np.deg2rad(2.0), abs=0.01)  # -181 deg: the heading 179 deg


# --- vectorisation, reset, estimated state -----------------------------------------------------------

VEL_SP = np.array([[1.5, -0.5, 0.3], [-2.0, 1.0, -0.5], [0.0, 2.5, 0.0]])
PSI_SP = np.array([0.4, -2.5, 3.0])
Z_SP = np.array([-505.0, -490.0, -512.0])
WP_SP = np.array([[-140.0, 160.0, -505.0], [15.0, -12.0, -490.0], [160.0, -140.0, -512.0]])
ANG_SP = np.array([[0.1, 0.0], [-0.05, 0.08], [0.0, -0.12]])


def set_points(name: str, rows: slice | list[int] = slice(None)) -> tuple:
    """Different set points for (up to) three vehicles, selected by ``rows``."""
    return {
        "velocity": (VEL_SP[rows], PSI_SP[rows]),
        "velocity_height": (VEL_SP[rows, 0:2], Z_SP[rows], PSI_SP[rows]),
        "waypoint": (WP_SP[rows], PSI_SP[rows]),
        "angles_height": (ANG_SP[rows, 0], ANG_SP[rows, 1], Z_SP[rows], PSI_SP[rows]),
    }[name]


@pytest.mark.parametrize("name", list(CONTROLLERS))
def test_vectorised_equals_separate_runs(name: str) -> None:
    steps, starts = 200, far_apart_starts(3)
    pid = CONTROLLERS[name](3)
    f_all, u_all = fly(starts, lambda f: pid.compute_from_state(f.state, *set_points(name)), steps)
    for i in range(3):
        single = CONTROLLERS[name](1)
        args = set_points(name, [i])
        f_one, u_one = fly(starts[i], lambda f, c=single, a=args: c.compute_from_state(f.state, *a), steps)
        np.testing.assert_allclose(np.array(u_all)[:, i], np.array(u_one)[:, 0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(f_all.state[i], f_one.state[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", list(CONTROLLERS))
def test_reset_clears_integrators(name: str) -> None:
    cls, args = CONTROLLERS[name], set_points(name)
    f = make_fleet(far_apart_starts(3))
    pid = cls(3)
    for _ in range(100):
        f.step(pid.compute_from_state(f.state, *args))
    x = f.state
    fresh_out = cls(3).compute_from_state(x, *args)
    assert np.abs(copy.deepcopy(pid).compute_from_state(x, *args) - fresh_out).max() > 1e-6  # history matters
    partial, untouched = copy.deepcopy(pid), copy.deepcopy(pid)
    partial.reset(vehicles=[1])
    out = partial.compute_from_state(x, *args)
    np.testing.assert_array_equal(out[1], fresh_out[1])
    np.testing.assert_array_equal(out[[0, 2]], untouched.compute_from_state(x, *args)[[0, 2]])
    pid.reset()
    np.testing.assert_array_equal(pid.compute_from_state(x, *args), fresh_out)


@pytest.mark.parametrize("name", ["velocity", "velocity_height", "angles_height"])
def test_estimated_view_equals_true_view_without_noise(name: str) -> None:
    """eX built from a noiseless true state gives the same controls as X (not for WaypointPID, whose
    eX branch approximates [u, v] by the ground speed along the bearing, as the original)."""
    args = set_points(name)
    f = make_fleet(far_apart_starts(3))
    driver = VelocityPID(3)
    on_x, on_ex = CONTROLLERS[name](3), CONTROLLERS[name](3)
    for _ in range(150):
        x, ex = f.state, estimated_from_true(f.state, f.accel_body)
        for a, b in zip(state_view(x), estimated_state_view(ex), strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
        u_x = on_x.compute_from_state(x, *args)
        u_ex = on_ex.compute_from_estimated_state(ex, *args)
        np.testing.assert_allclose(u_x, u_ex, rtol=0, atol=1e-10)
        f.step(driver.compute_from_state(x, VEL_SP, PSI_SP))  # a manoeuvring trajectory


@pytest.mark.parametrize("name", list(CONTROLLERS))
def test_invalid_vehicle_gets_neutral_control_and_keeps_state(name: str) -> None:
    """eX = NaN (invalid platform): neutral, valid control; the PID state is not polluted."""
    args = set_points(name)
    f = make_fleet(far_apart_starts(3))
    ex = estimated_from_true(f.state, f.accel_body)
    ex_nan = ex.copy()
    ex_nan[1] = np.nan
    a, b = CONTROLLERS[name](3), CONTROLLERS[name](3)
    u = a.compute_from_estimated_state(ex_nan, *args)
    check_controls(u)
    np.testing.assert_array_equal(u[1], HOVER_CONTROL)
    b.compute_from_estimated_state(ex, *args)
    b.reset(vehicles=[1])  # a's vehicle 1 must look as if it had never been computed
    np.testing.assert_array_equal(
        a.compute_from_estimated_state(ex, *args), b.compute_from_estimated_state(ex, *args)
    )
    assert np.all(u[:, 4] == 12.0)


def test_bad_set_points_rejected() -> None:
    x = far_apart_starts(2)
    f = make_fleet(x)
    with pytest.raises(ValueError, match="velocity_des_ned"):
        VelocityPID(2).compute_from_state(f.state, [[np.nan, 0.0, 0.0], [0.0, 0.0, 0.0]], 0.0)
    with pytest.raises(ValueError, match="waypoint_ned"):
        WaypointPID(2).compute_from_state(f.state, np.zeros((3, 3)), 0.0)
    with pytest.raises(ValueError, match="13"):
        VelocityPID(2).compute_from_state(np.zeros((2, 12)), np.zeros((2, 3)), 0.0)
