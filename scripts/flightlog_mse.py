#!/usr/bin/env python3
"""Replay QRSim's three recorded AscTec Pelican flight logs through the model and print the MSEs.

Implements spec section 8.3 items 1-3 (the port of ``tests/testDynamics.m``): DT = 0.02 s, Heun RK2,
no dynamic noise, no wind or turbulence. The logged commands are in firmware units and are converted
with ``pelican.FIRMWARE_TO_SI``; the model is stepped with ``PelicanFleet`` (one vehicle).

Every replay also runs on the rotor-level airframe (``airframe="rotor"``): the same commands go
through its onboard controller (``rotor_control``) to the ``pelican`` rotor parameter set, stepped by
``Airframes`` as the Simulator does; ``main`` prints both models' MSEs (docs/ROTOR.md). The rotor model
starts with its rotors at the speed of the initial thrust.

Usage: ``python3 scripts/flightlog_mse.py [DATA_DIR] [--rotor KEY=VALUE ...]`` (default
``../shared/data/qrsim`` relative to the repository root; ``--rotor`` overrides a rotor parameter, e.g.
``motor_tau_s=0.05``, or a controller gain, ``attitude_gain=1.2``, to explore the free parameters).
The test ``test/test_flightlogs.py`` imports the replay functions from here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from qrsim_ros.core.common.frames import Array, body_to_ned, dcm_from_state  # noqa: E402
from qrsim_ros.core.vehicles.airframes import Airframes  # noqa: E402
from qrsim_ros.core.vehicles.pelican import (  # noqa: E402
    FIRMWARE_TO_SI,
    STATE_DOWN,
    STATE_EULER,
    STATE_RATES_FRD,
    STATE_THRUST,
    STATE_VELOCITY_FRD,
    PelicanFleet,
    PelicanParams,
    default_state_limits,
)
from qrsim_ros.core.vehicles.rotor_control import RotorControlParams  # noqa: E402
from qrsim_ros.core.vehicles.rotor_params import RotorParams, pelican_rotor_params  # noqa: E402

DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data" / "qrsim"
THRUST_LOG = "flightlog_thrust_50Hz.csv"
ROTATION_LOG = "flightlog_rotation_50Hz.csv"
TRANSLATION_LOG = "flightlog_translation_50Hz.csv"

#: Values measured by the clean-room port (spec 8.3) and the original pass criteria.
THRUST_MSE_REFERENCE = 0.98175
THRUST_MSE_CRITERION = 1.0
ROTATION_MSE_REFERENCE = np.array([0.000656, 0.000835, 0.01755, 0.02478, 0.01872, 0.02867])
ROTATION_MSE_CRITERION = np.array([0.001, 0.001, 0.02, 0.03, 0.02, 0.03])
TRANSLATION_MSE_REFERENCE = np.array([3.736, 2.389, 1.547, 5.606, 3.193, 12.631])
TRANSLATION_MSE_CRITERION = 15.0

TRANSLATION_SHIFT_STEPS = 25  # 0.5 s latency between logged commands and logged response
TRANSLATION_NUM_STEPS = 8000
TRANSLATION_THROTTLE_OFFSET_RAW = 592.0  # the log's throttle was recorded with a -592 offset
G_MS2 = 9.81


def _load(data_dir: Path, name: str) -> Array:
    return np.loadtxt(Path(data_dir) / name, delimiter=",", ndmin=2)


#: The rotor airframe a replay flies: its parameters and its onboard controller's gains.
RotorSetup = tuple[RotorParams, RotorControlParams]


def _fleet(area_limits_ned: list[float], rotor: RotorSetup | None = None) -> PelicanFleet | Airframes:
    """A noiseless single-vehicle fleet; rate limits as in pelican_config (+/-3 rad/s). ``rotor``: the
    rotor airframe (parameters, gains) instead of the identified Pelican."""
    params = PelicanParams(state_limits=default_state_limits(area_limits_ned))
    if rotor is None:
        return PelicanFleet(1, params)
    return Airframes(["rotor"], params, rotor_params=rotor[0], rotor_gains=rotor[1])


def _set_state(fleet: PelicanFleet | Airframes, x0: Array) -> None:
    """Place the vehicle; a rotor vehicle's rotors start at the speed of the state's thrust (m g if the
    state has no thrust element), as the identified model starts with it."""
    fleet.set_state(x0)
    if isinstance(fleet, Airframes) and fleet.rotor is not None:
        thrust = fleet.state[0, STATE_THRUST] if np.size(x0) < 13 else float(np.ravel(x0)[STATE_THRUST])
        fleet.rotor.set_state(x0, omega=np.full(4, np.sqrt(thrust / (4.0 * fleet.rotor.params.k_f))))


def _mse(a: Array, b: Array) -> Array:
    return np.mean((np.asarray(a) - np.asarray(b)) ** 2, axis=0)


def thrust_replay(data_dir: Path, rotor: RotorSetup | None = None) -> tuple[float, Array, Array]:
    """Spec 8.3 item 1. Returns (MSE [N^2], simulated thrust (K,) [N], logged thrust (K,) [N]).

    Log columns (1-based): 2 throttle raw, 3 measured thrust [N], 4 battery [V].
    """
    log = _load(data_dir, THRUST_LOG)
    fleet = _fleet([-1000, 1000, -1000, 1000, -100, 0], rotor)
    x0 = np.zeros(13)
    x0[STATE_DOWN] = -80.0
    x0[STATE_THRUST] = 15.402  # first logged thrust
    _set_state(fleet, x0)
    thrust_n = np.empty(len(log))
    for i, row in enumerate(log):
        fleet.step([[0.0, 0.0, row[1] * FIRMWARE_TO_SI[2], 0.0, row[3]]])
        thrust_n[i] = fleet.state[0, STATE_THRUST]
    assert fleet.valid[0], fleet.invalid_reason[0]
    return float(_mse(thrust_n, log[:, 2])), thrust_n, log[:, 2]


def rotation_replay(data_dir: Path, rotor: RotorSetup | None = None) -> tuple[Array, Array, Array]:
    """Spec 8.3 item 2. Returns (MSE (6,) of [phi theta psi p q r], simulated (K, 6), logged (K, 6)).

    Log columns (1-based): 2 theta, 3 phi, 4 psi [rad]; 5 q, 6 p, 7 r [rad/s]; 8 pitch, 9 roll,
    11 yaw-rate commands (raw). The logged throttle (col 10) is not used: throttle is 0.615, 11 V.
    """
    log = _load(data_dir, ROTATION_LOG)
    fleet = _fleet([-1000, 1000, -1000, 1000, -50, 0], rotor)
    # 12 elements => thrust m*g (spec 8.3 item 2)
    _set_state(fleet, np.array([0, 0, -10, -0.021293, 0.021991, 1.92700, 0, 0, 0, 0.02419, -0.0089594,
                                0.0031358]))
    sim = np.empty((len(log), 6))
    for i, row in enumerate(log):
        u = [row[7] * FIRMWARE_TO_SI[0], row[8] * FIRMWARE_TO_SI[1], 0.615, row[10] * FIRMWARE_TO_SI[3], 11.0]
        fleet.step([u])
        sim[i, 0:3] = fleet.state[0, STATE_EULER]
        sim[i, 3:6] = fleet.state[0, STATE_RATES_FRD]
    assert fleet.valid[0], fleet.invalid_reason[0]
    logged = log[:, [2, 1, 3, 5, 4, 6]]  # cols [3 2 4 6 5 7] (1-based)
    return _mse(sim, logged), sim, logged


def translation_replay(data_dir: Path, rotor: RotorSetup | None = None) -> tuple[Array, Array, Array]:
    """Spec 8.3 item 3. Returns (MSE (6,), simulated (K, 6), logged (K, 6)).

    Output per step: [NED velocity (3) [m/s]; NED acceleration x, y, z [m/s^2]] where the
    acceleration is Dᵀ·a + (0, 0, g) from the RK2-averaged model ``a``. Compared against log rows
    ``i + 25`` (0.5 s latency): cols 7-9 velocity, 16-17 and -18 acceleration (col 18 is up-positive).
    Commands: cols 19-22 raw pitch, roll, throttle (+592 offset), yaw rate; battery 11 V.
    """
    log = _load(data_dir, TRANSLATION_LOG)
    shift, n = TRANSLATION_SHIFT_STEPS, TRANSLATION_NUM_STEPS
    fleet = _fleet([-300, 300, -300, 300, -200, 0], rotor)
    x0 = np.zeros(12)
    x0[STATE_DOWN] = -25.0
    x0[STATE_EULER] = log[0, 3:6]
    x0[STATE_RATES_FRD] = log[0, 9:12]
    _set_state(fleet, x0)
    raw = log[:n, 18:22].copy()
    raw[:, 2] += TRANSLATION_THROTTLE_OFFSET_RAW
    u_si = np.column_stack([raw * FIRMWARE_TO_SI[:4], np.full(n, 11.0)])
    sim = np.empty((n, 6))
    for i in range(n):
        fleet.step(u_si[i : i + 1])
        x = fleet.state
        dcm = dcm_from_state(x)
        sim[i, 0:3] = body_to_ned(dcm, x[:, STATE_VELOCITY_FRD])[0]
        sim[i, 3:6] = body_to_ned(dcm, fleet.accel_body)[0] + [0.0, 0.0, G_MS2]
    assert fleet.valid[0], fleet.invalid_reason[0]
    rows = log[shift : shift + n]
    logged = np.column_stack([rows[:, 6:9], rows[:, 15:17], -rows[:, 17]])
    return _mse(sim, logged), sim, logged


def rotor_setup(overrides: list[str] | None = None) -> RotorSetup:
    """The pelican rotor parameter set and the default gains, with ``KEY=VALUE`` overrides of either."""
    params, gains = pelican_rotor_params(), RotorControlParams()
    gain_keys = set(RotorControlParams.__dataclass_fields__)
    for item in overrides or []:
        key, _, value = item.partition("=")
        if key in gain_keys:
            gains = RotorControlParams(**{**gains.__dict__, key: float(value)})
        else:
            params = params.replace(**{key: float(value)})
    return params, gains


def main(argv: list[str] | None = None) -> int:
    """Print the MSEs of the three replays, the identified model next to the rotor airframe."""
    args = sys.argv[1:] if argv is None else list(argv)
    overrides = []
    while "--rotor" in args:
        i = args.index("--rotor")
        overrides.append(args[i + 1])
        del args[i : i + 2]
    data_dir = Path(args[0]) if args else DEFAULT_DATA_DIR
    if not data_dir.is_dir():
        print(f"data directory not found: {data_dir}", file=sys.stderr)
        return 2
    rotor = rotor_setup(overrides)
    np.set_printoptions(precision=6, suppress=True)
    rotor_label = f"rotor airframe ({' '.join(overrides) or 'defaults'})"
    for label, setup in (("identified Pelican", None), (rotor_label, rotor)):
        print(f"== {label}")
        thrust_mse, _, _ = thrust_replay(data_dir, setup)
        print(f"thrust MSE [N^2]: {thrust_mse:.6f}  (reference {THRUST_MSE_REFERENCE}, criterion < 1)")
        rot_mse, _, _ = rotation_replay(data_dir, setup)
        print(f"rotation MSE [phi theta psi p q r]: {rot_mse}")
        print(f"   reference {ROTATION_MSE_REFERENCE}, criterion < {ROTATION_MSE_CRITERION}")
        tr_mse, _, _ = translation_replay(data_dir, setup)
        print(f"translation MSE [vx vy vz ax ay az]: {tr_mse}")
        print(f"   reference {TRANSLATION_MSE_REFERENCE}, criterion < {TRANSLATION_MSE_CRITERION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
