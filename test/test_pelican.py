"""First-principles tests of the identified Pelican model (spec 2, 8.1 testCollision/testLimits/
testSetReset, 8.3 item 9).

Expected values are derived here from the constants of spec table 2.4 (restated below, and checked
against the module), never by running the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from qrsim_ros.core.vehicles import pelican
from qrsim_ros.core.vehicles.pelican import (
    CONTROL_NAMES,
    STATE_NAMES,
    PelicanFleet,
    PelicanInputError,
    PelicanParams,
    default_state_limits,
    pelican_derivative,
)

# --- spec 2.2 / 2.4, restated --------------------------------------------------------------------
DT = 0.02
G = 9.81
MASS = 1.68
PQ0, PQ1, PQ2 = -3.25060e-04, 1.79797e02, -24.3536
R0, R1 = -4.81783e-03, -5.08944
CTH = (6.63881e-01, 7.44649e-04, 2.39855e-06)
CVB0, CVB1 = -18.0007, 4.23754
TAU0, TAU1 = 3.07321, 46.8004
MAX_ANGVEL = np.deg2rad(150.0)
PITCH_SI_TO_RAW = -1.0 / np.deg2rad(0.025)
THROTTLE_SI_TO_RAW = 4097.0
YAW_SI_TO_RAW = -1.0 / np.deg2rad(254.760 / 2047.0)

BIG_AREA = [-1000, 1000, -1000, 1000, -1000, 0]


def thrust_poly(throttle_si: float) -> float:
    """Steady thrust [N] of the identified polynomial for a throttle in [0, 1]."""
    raw = throttle_si * THROTTLE_SI_TO_RAW
    return CTH[0] + CTH[1] * raw + CTH[2] * raw * raw


def hover_throttle() -> float:
    """Throttle whose steady thrust is m*g (positive root of the polynomial)."""
    a, b, c = CTH[2], CTH[1], CTH[0] - MASS * G
    return (-b + np.sqrt(b * b - 4 * a * c)) / (2 * a) / THROTTLE_SI_TO_RAW


HOVER_TH = hover_throttle()


def fleet(n: int = 1, area: list[float] | None = None, **kw: object) -> PelicanFleet:
    limits = default_state_limits(BIG_AREA if area is None else area, kw.pop("rate_limit_rads", 3.0))
    return PelicanFleet(n, PelicanParams(state_limits=limits, **kw))  # type: ignore[arg-type]


def hover_controls(n: int = 1, battery_v: float = 12.0) -> np.ndarray:
    return np.tile([0.0, 0.0, HOVER_TH, 0.0, battery_v], (n, 1))


# --- constants -------------------------------------------------------------------------------------


def test_constants_match_spec() -> None:
    assert pelican.BASE_DT_S == DT and pelican.G_MS2 == G and pelican.MASS_KG == MASS
    assert (pelican.PQ0, pelican.PQ1, pelican.PQ2) == (PQ0, PQ1, PQ2)
    assert (pelican.R0, pelican.R1) == (R0, R1)
    assert (pelican.CTH0, pelican.CTH1, pelican.CTH2) == CTH
    assert (pelican.CVB0, pelican.CVB1, pelican.TAU0, pelican.TAU1) == (CVB0, CVB1, TAU0, TAU1)
    assert abs(pelican.MAX_ANGVEL_RADS - 2.617993877991494) < 1e-15
    np.testing.assert_allclose(
        pelican.SI_TO_FIRMWARE, [-2291.831181, -2291.831181, 4097, -460.372353, 1], rtol=1e-9
    )
    np.testing.assert_allclose(pelican.FIRMWARE_TO_SI * pelican.SI_TO_FIRMWARE, 1.0, rtol=1e-15)
    assert abs(HOVER_TH - 0.59004353928) < 1e-10
    assert abs(pelican.HOVER_THROTTLE - HOVER_TH) < 1e-10
    # derived figures quoted in spec 2.4
    assert abs(PQ0 * PITCH_SI_TO_RAW - 0.744983) < 1e-6
    assert abs(-R0 * YAW_SI_TO_RAW / R1 - 0.435803) < 1e-6


# --- steady states -----------------------------------------------------------------------------------


def test_hover_holds_altitude_and_thrust() -> None:
    f = fleet()
    f.set_state([10.0, -5.0, -50.0, 0.0, 0.0, 0.3])  # 6 elements: thrust m*g
    for _ in range(500):  # 10 s
        f.step(hover_controls())
        assert abs(f.state[0, 2] + 50.0) < 0.01
    x = f.state[0]
    assert f.valid[0]
    assert x[12] == pytest.approx(MASS * G, abs=1e-6)
    np.testing.assert_allclose(x[0:2], [10.0, -5.0], atol=1e-9)
    np.testing.assert_allclose(x[3:12], [0, 0, 0.3, 0, 0, 0, 0, 0, 0], atol=1e-9)
    # QRSim's accelerometer output at hover: body acceleration minus gravity = [0, 0, -g]
    np.testing.assert_allclose(f.accel_body[0], [0.0, 0.0, -G], atol=1e-6)


@pytest.mark.parametrize("axis", ["pitch", "roll"])
def test_steady_attitude_gain(axis: str) -> None:
    command = 0.1
    f = fleet()
    f.set_state([0.0, 0.0, -500.0, 0.0, 0.0, 0.0])
    u = hover_controls()
    u[0, 0 if axis == "pitch" else 1] = command
    for _ in range(150):  # 3 s; attitude poles at -12.18 rad/s
        f.step(u)
    assert f.valid[0]
    angle = f.state[0, 4 if axis == "pitch" else 3]
    assert angle == pytest.approx(PQ0 * PITCH_SI_TO_RAW * command, rel=1e-6)
    assert angle == pytest.approx(0.744983 * command, rel=1e-5)


def test_positive_pitch_accelerates_backwards() -> None:
    f = fleet()
    f.set_state([0.0, 0.0, -500.0, 0.0, 0.0, 0.0])
    u = hover_controls()
    u[0, 0] = 0.1
    for _ in range(100):
        f.step(u)
    assert f.state[0, 6] < -0.5  # body u, backwards


def test_steady_yaw_rate_gain() -> None:
    command = 1.0
    f = fleet()
    f.set_state([0.0, 0.0, -500.0, 0.0, 0.0, 0.0])
    u = hover_controls()
    u[0, 3] = command
    for _ in range(200):  # 4 s, time constant 0.1965 s
        f.step(u)
    assert f.state[0, 11] == pytest.approx(-R0 * YAW_SI_TO_RAW * command / R1, rel=1e-6)
    assert f.state[0, 11] == pytest.approx(0.435803 * command, rel=1e-5)


# --- rate clamp (derivative directly) ----------------------------------------------------------------


def _derivative(x: np.ndarray, u_si: np.ndarray) -> np.ndarray:
    x = np.atleast_2d(x)
    n = x.shape[0]
    u_fw = np.atleast_2d(u_si) * [PITCH_SI_TO_RAW, PITCH_SI_TO_RAW, THROTTLE_SI_TO_RAW, YAW_SI_TO_RAW, 1.0]
    xdot, _ = pelican_derivative(x, u_fw, np.zeros((n, 3)), np.zeros((n, 6)), MASS, DT)
    return xdot


@pytest.mark.parametrize("rate_index, control_index", [(9, 1), (10, 0)])
def test_angular_rate_clamp(rate_index: int, control_index: int) -> None:
    """p, q cannot grow beyond 150 deg/s: the derivative is zeroed when it would increase |rate|."""
    command = 0.9  # full command: attitude term pq1*(0.745*0.9) = 120 rad/s^2 > |pq2|*2.62 = 64
    x = np.zeros(13)
    x[2], x[12] = -50.0, MASS * G
    u = np.array([0.0, 0.0, HOVER_TH, 0.0, 12.0])
    for sign in (1.0, -1.0):
        u[control_index] = sign * command
        unclamped = PQ1 * (PQ0 * sign * command * PITCH_SI_TO_RAW) + PQ2 * sign * (MAX_ANGVEL - 0.01)
        assert sign * unclamped > 0  # the construction really pushes the rate outwards
        x[rate_index] = sign * (MAX_ANGVEL + 0.01)
        assert _derivative(x, u)[0, rate_index] == 0.0
        x[rate_index] = sign * (MAX_ANGVEL - 0.01)
        assert _derivative(x, u)[0, rate_index] == pytest.approx(unclamped, rel=1e-12)
        # beyond the clamp a derivative pulling the rate back in is kept
        x[rate_index] = sign * (MAX_ANGVEL + 0.01)
        u[control_index] = 0.0
        expected = PQ2 * sign * (MAX_ANGVEL + 0.01)
        assert _derivative(x, u)[0, rate_index] == pytest.approx(expected, rel=1e-12)


def test_rate_clamp_stops_integrated_rate_growth() -> None:
    """A full roll command: once p is above 150 deg/s it stops growing (it plateaus, then decays)."""
    f = fleet(rate_limit_rads=10.0)
    for phi0 in (0.0, -0.6):
        f.set_state([0.0, 0.0, -500.0, phi0, 0.0, 0.0])
        p = [0.0]
        for _ in range(30):
            f.step([[0.0, 0.9, HOVER_TH, 0.0, 12.0]])
            p.append(f.state[0, 9])
        p = np.array(p)
        assert p.max() > MAX_ANGVEL  # the last step below the clamp overshoots it
        above = p[:-1] > MAX_ANGVEL
        assert np.all(np.diff(p)[above] <= 0.0)
        assert np.sum(np.diff(p)[above] == 0.0) >= 2  # a plateau while the command still pushes


# --- thrust dynamics -----------------------------------------------------------------------------------


def test_thrust_slew_and_battery_cap() -> None:
    """Throttle step to 1 from hover: +tau1*dt = 0.936 N per step, then capped at Cvb0 + Cvb1*V."""
    battery_v = 12.0
    cap = CVB0 + CVB1 * battery_v
    assert cap == pytest.approx(32.8498, abs=1e-4)
    assert thrust_poly(1.0) == pytest.approx(43.98, abs=0.01)  # above the cap: saturated by voltage
    f = fleet()
    f.set_state([0.0, 0.0, -500.0, 0.0, 0.0, 0.0])
    u = np.array([[0.0, 0.0, 1.0, 0.0, battery_v]])
    thrust = [f.state[0, 12]]
    for _ in range(80):
        f.step(u)
        thrust.append(f.state[0, 12])
    thrust = np.array(thrust)
    slewing = thrust[:-1] + 2 * TAU1 * DT <= cap  # both RK2 stages below the cap
    assert slewing.sum() >= 15
    np.testing.assert_allclose(np.diff(thrust)[slewing], TAU1 * DT, rtol=1e-12)
    assert abs(TAU1 * DT - 0.936) < 1e-4
    assert np.all(thrust <= cap + 1e-12)
    # at the cap stage 1 jumps onto it and stage 2 stays: the gap halves every step
    near = (thrust[:-1] + TAU1 * DT > cap) & (thrust[:-1] < cap - 1e-6)
    assert near.sum() >= 5
    np.testing.assert_allclose((cap - thrust[1:])[near], 0.5 * (cap - thrust[:-1])[near], rtol=1e-6)
    assert thrust[-1] == pytest.approx(cap, abs=1e-9)


@pytest.mark.parametrize("battery_v", [9.0, 10.0, 11.0])
def test_battery_cap(battery_v: float) -> None:
    f = fleet()
    f.set_state([0.0, 0.0, -500.0, 0.0, 0.0, 0.0])
    for _ in range(60):
        f.step([[0.0, 0.0, 1.0, 0.0, battery_v]])
    assert f.state[0, 12] == pytest.approx(CVB0 + CVB1 * battery_v, abs=1e-9)


def test_geometric_thrust_lag_for_small_steps() -> None:
    """|F_target - F| < tau1*dt: F_{k+1} = F_k + (F_target - F_k)/2 (spec 2.5)."""
    throttle = 0.6
    target = thrust_poly(throttle)
    assert 0 < target - MASS * G < TAU1 * DT
    f = fleet()
    f.set_state([0.0, 0.0, -500.0, 0.0, 0.0, 0.0])
    expected = MASS * G
    for _ in range(10):
        f.step([[0.0, 0.0, throttle, 0.0, 12.0]])
        expected = expected + 0.5 * (target - expected)
        assert f.state[0, 12] == pytest.approx(expected, abs=1e-12)


def test_low_throttle_first_order_branch() -> None:
    """Below 300 raw units thrust follows Fdot = tau0 (F_poly - F) (no slew limit, no cap)."""
    throttle = 0.05  # 204.85 raw < 300
    target = thrust_poly(throttle)
    x = np.zeros(13)
    x[2], x[12] = -500.0, MASS * G
    xdot = _derivative(x, np.array([0.0, 0.0, throttle, 0.0, 12.0]))
    assert xdot[0, 12] == pytest.approx(TAU0 * (target - MASS * G), rel=1e-12)
    # just above the threshold the slew-limited branch applies (|dF| > tau1*dt -> -tau1)
    xdot = _derivative(x, np.array([0.0, 0.0, 301.0 / THROTTLE_SI_TO_RAW, 0.0, 12.0]))
    assert xdot[0, 12] == pytest.approx(-TAU1, rel=1e-12)
    # Heun on a linear ODE: error factor 1 - h + h^2/2 per step with h = tau0*dt
    h = TAU0 * DT
    f = fleet()
    f.set_state(x)
    err = MASS * G - target
    for _ in range(20):
        f.step([[0.0, 0.0, throttle, 0.0, 12.0]])
        err *= 1 - h + 0.5 * h * h
        assert f.state[0, 12] - target == pytest.approx(err, rel=1e-9)


# --- collisions (testCollision) ----------------------------------------------------------------------


def test_collision_random_close_pairs() -> None:
    area = [-110, 110, -110, 110, -110, 110]
    u = np.tile([0.0, 0.0, 0.59004353928, 0.0, 11.0], (2, 1))
    f = fleet(2, area)
    f.set_state([[0, 0, -50, 0, 0, 0], [0, 0, -20, 0, 0, 0]])
    f.step(u)
    assert f.valid.all()
    rng = np.random.default_rng(12345)
    for _ in range(100):
        a = rng.uniform(-100, 100, 3)
        direction = rng.standard_normal(3)
        b = a + rng.uniform(0, 2) * direction / np.linalg.norm(direction)
        f.set_state(np.vstack([np.r_[a, 0, 0, 0], np.r_[b, 0, 0, 0]]))
        f.step(u)
        assert not f.valid.any()
        assert all("collision" in r for r in f.invalid_reason)


def test_pair_outside_collision_distance_stays_valid() -> None:
    f = fleet(2)
    f.set_state([[0, 0, -50, 0, 0, 0], [1.5, 2.0, -50, 0, 0, 0]])  # 2.5 m apart
    for _ in range(10):
        f.step(hover_controls(2))
    assert f.valid.all()


# --- limits and set_state (testLimits, testSetReset) -------------------------------------------------

LIMITS_AREA = [-10, 20, -7, 7, -20, 20]


@pytest.mark.parametrize("element", range(12))
@pytest.mark.parametrize("bound", [0, 1])
def test_set_state_out_of_limits_raises(element: int, bound: int) -> None:
    limits = default_state_limits(LIMITS_AREA, 2.0)
    f = PelicanFleet(1, PelicanParams(state_limits=limits))
    x = np.zeros(12)
    x[element] = limits[element, bound]
    f.set_state(x)  # on the limit is inside
    x[element] = 1.01 * limits[element, bound]
    with pytest.raises(PelicanInputError, match=STATE_NAMES[element]):
        f.set_state(x)


def test_leaving_the_area_invalidates_and_freezes() -> None:
    f = PelicanFleet(1, PelicanParams(state_limits=default_state_limits(LIMITS_AREA, 2.0)))
    f.set_state([0.0, 0.0, -19.0, 0.0, 0.0, 0.0])
    climb = [[0.0, 0.0, 1.0, 0.0, 12.0]]
    for _ in range(200):
        f.step(climb)
        if not f.valid[0]:
            break
    assert not f.valid[0]
    assert "pz" in f.invalid_reason[0]
    frozen = f.state
    assert frozen[0, 2] < -20.0
    for _ in range(5):
        f.step(climb)
    np.testing.assert_array_equal(f.state, frozen)
    f.set_state([0.0, 0.0, -10.0, 0.0, 0.0, 0.0])
    assert f.valid[0] and f.invalid_reason[0] == ""


@pytest.mark.parametrize("length", [6, 12, 13])
def test_set_state_accepted_lengths(length: int) -> None:
    f = fleet()
    x = np.array([1.0, 2.0, -3.0, 0.1, -0.2, np.pi, 0.5, -0.4, 0.3, 0.2, -0.1, 0.05, 17.5])[:length]
    f.set_state(x)
    stored = f.state[0]
    np.testing.assert_array_equal(stored[:length], x)
    np.testing.assert_array_equal(stored[length:12], 0.0)
    if length < 13:
        assert stored[12] == pytest.approx(16.4808, abs=1e-12)
    assert f.valid[0]


@pytest.mark.parametrize("length", [3, 5, 8, 14])
def test_set_state_rejected_lengths(length: int) -> None:
    with pytest.raises(PelicanInputError, match="6, 12 or 13"):
        fleet().set_state(np.zeros(length))


# --- controls ------------------------------------------------------------------------------------------

IN_RANGE = [0.5, -0.5, 0.3, 1.0, 10.0]


@pytest.mark.parametrize(
    "index, value",
    [(0, 1.0), (0, -1.0), (1, 1.0), (1, -1.0), (2, -0.6), (2, 1.6), (3, 5.0), (3, -5.0), (4, 8.0), (4, 13.0)]
    + [(i, np.nan) for i in range(5)]
    + [(i, np.inf) for i in range(5)],
)
def test_controls_out_of_range_rejected(index: int, value: float) -> None:
    f = fleet()
    f.set_state([0.0, 0.0, -50.0, 0.0, 0.0, 0.0])
    u = np.array([IN_RANGE])
    u[0, index] = value
    with pytest.raises(PelicanInputError, match=CONTROL_NAMES[index]):
        f.step(u)


def test_controls_in_range_accepted_and_shape_checked() -> None:
    f = fleet()
    f.set_state([0.0, 0.0, -500.0, 0.0, 0.0, 0.0])
    rng = np.random.default_rng(1)
    lo, hi = pelican.CONTROL_LIMITS.T
    for _ in range(10):
        f.step([rng.uniform(lo, hi)])
    f.step([[-0.9, 0.9, 0.0, -4.5, 9.0]])  # the limits themselves are allowed
    with pytest.raises(PelicanInputError, match="shape"):
        f.step([[0.0, 0.0, 0.5, 0.0]])
    with pytest.raises(PelicanInputError, match="vehicles"):
        f.step(hover_controls(2))


# --- noise determinism and vectorisation -------------------------------------------------------------


def _noisy_trajectory(seeds: list[int], steps: int = 100) -> np.ndarray:
    n = len(seeds)
    f = PelicanFleet(
        n,
        PelicanParams(state_limits=default_state_limits(BIG_AREA), dyn_noise=np.full(6, 0.1)),
        noise_rngs=[np.random.default_rng(s) for s in seeds],
    )
    f.set_state([[10.0 * i, 0.0, -100.0, 0.0, 0.0, 0.0] for i in range(n)])
    out = []
    for _ in range(steps):
        f.step(hover_controls(n))
        out.append(f.state)
    return np.array(out)


def test_seeded_dynamic_noise_is_deterministic() -> None:
    a = _noisy_trajectory([7, 8])
    b = _noisy_trajectory([7, 8])
    np.testing.assert_array_equal(a, b)
    c = _noisy_trajectory([7, 9])
    np.testing.assert_array_equal(a[:, 0], c[:, 0])  # streams are per vehicle
    assert np.abs(a[:, 1] - c[:, 1]).max() > 1e-6
    quiet = fleet()
    quiet.set_state([10.0, 0.0, -100.0, 0.0, 0.0, 0.0])
    for _ in range(100):
        quiet.step(hover_controls())
    assert np.abs(a[-1, 1, 6:12] - quiet.state[0, 6:12]).max() > 1e-4  # the noise does act


def test_fleet_equals_single_vehicle_fleets() -> None:
    n, steps = 4, 150
    rng = np.random.default_rng(3)
    x0 = np.column_stack(
        [
            np.arange(n) * 100.0,
            np.zeros(n),
            np.full(n, -300.0),
            rng.uniform(-0.2, 0.2, (n, 3)),
            rng.uniform(-1, 1, (n, 3)),
            rng.uniform(-0.5, 0.5, (n, 3)),
            np.full(n, MASS * G),
        ]
    )
    u = np.column_stack(
        [rng.uniform(-0.3, 0.3, (n, 2)), rng.uniform(0.4, 0.8, n), rng.uniform(-2, 2, n), np.full(n, 11.5)]
    )
    wind = rng.uniform(-2, 2, (n, 3))
    params = PelicanParams(state_limits=default_state_limits(BIG_AREA), dyn_noise=np.full(6, 0.2))
    together = PelicanFleet(n, params, noise_rngs=[np.random.default_rng(100 + i) for i in range(n)])
    together.set_state(x0)
    singles = [PelicanFleet(1, params, noise_rngs=[np.random.default_rng(100 + i)]) for i in range(n)]
    for i, s in enumerate(singles):
        s.set_state(x0[i])
    for _ in range(steps):
        together.step(u, wind)
        for i, s in enumerate(singles):
            s.step(u[i : i + 1], wind[i : i + 1])
        single_states = np.vstack([s.state for s in singles])
        np.testing.assert_allclose(together.state, single_states, rtol=0, atol=1e-12)
        single_accels = np.vstack([s.accel_body for s in singles])
        np.testing.assert_allclose(together.accel_body, single_accels, rtol=0, atol=1e-12)
    assert together.valid.all()


def test_invalid_vehicles_ignore_their_controls_and_errors_name_the_live_vehicle() -> None:
    # As in QRSim, a frozen vehicle's update does nothing, so its controls are not checked.
    f = PelicanFleet(3, PelicanParams(state_limits=default_state_limits([-50, 50, -50, 50, -80, 0])))
    f.set_state([[0, 0, -10, 0, 0, 0], [0, 60 - 70, -10, 0, 0, 0], [20, 0, -10, 0, 0, 0]])
    f.set_state([[0, 49.99, -10, 0, 0, 0, 0, 5.0, 0, 0, 0, 0]], vehicles=[1])
    hover = [0.0, 0.0, 0.59004353928, 0.0, 12.0]
    f.step([hover, hover, hover])
    assert f.valid.tolist() == [True, False, True]
    frozen = f.state[1].copy()
    f.step([hover, [np.nan] * 5, hover])  # NaN for the frozen vehicle is fine
    assert np.array_equal(f.state[1], frozen)
    with pytest.raises(PelicanInputError, match=r"vehicle 2: control throttle=1\.5"):
        f.step([hover, hover, [0.0, 0.0, 1.5, 0.0, 12.0]])
