"""The vehicles' commands as vehicle_dynamics takes them: checked, converted to FRD, clamped and held.

Three command topics per vehicle (docs/NODE_GRAPH.md, docs/ROTOR.md):

- ``uavN/cmd/attitude`` (qrsim_ros/AttitudeCommand): frame ``uavN/base_link_frd`` or empty (FRD, QRSim
  native) or ``uavN/base_link`` (FLU: pitch and yaw rate negated). Values outside QRSim's limits are
  clamped. The flight_controller's commands carry its failsafe, ``disarm`` and set-point counters, which
  are held with the command; it sends those of all its vehicles in one ``/sim/fleet/attitude_command``
  (qrsim_ros/FleetAttitudeCommand, FRD), each row checked as a cmd/attitude.
- ``uavN/cmd/rates_thrust`` (qrsim_ros/RatesThrustCommand: FRD body rates [rad/s], collective thrust [N];
  FLU negates q and r) and ``uavN/cmd/motors`` (qrsim_ros/MotorCommand: 4 normalised motor commands in
  [0, 1]): the rotor airframe's lower-level inputs, clamped into ``rotor_control.low_level_bounds`` (the
  Simulator's). A vehicle flying the identified Pelican airframe has none: rejected.

A command is rejected (counted per vehicle, a throttled warning, the held command stays) for a wrong
frame_id, a non-finite value, a stamp older than the held command's (of any kind), ahead of the
simulated time, or older than ``command_timeout_s``. The latest valid command of the three kinds is the
one held and flown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from qrsim_ros.core.common.ticks import TICK_NS
from qrsim_ros.core.vehicles.pelican import CONTROL_LIMITS, HOVER_CONTROL
from qrsim_ros.core.vehicles.rotor_control import RATE_LIMITS_RADPS, low_level_bounds
from qrsim_ros.core.vehicles.rotor_params import RotorParams
from qrsim_ros.msg import AttitudeCommand, FleetAttitudeCommand, MotorCommand, RatesThrustCommand
from qrsim_ros.ros.fleet_topics import FLEET_ATTITUDE_COMMAND_TOPIC
from qrsim_ros.ros.names import base_link_frame, base_link_frd_frame
from qrsim_ros.ros.node import Warn

#: What a vehicle's held command is (``CommandIntake.kind``): its topic under ``uavN/``.
ATTITUDE, RATES_THRUST, MOTORS = 0, 1, 2
COMMAND_TOPICS = ("cmd/attitude", "cmd/rates_thrust", "cmd/motors")

@dataclass
class HeldCommands:
    """Every vehicle's held command (N rows): what comm_loss keeps from the last step."""

    control: np.ndarray  # (N, 5) SI controls, FRD, clamped (hover under a lower-level command)
    stamp_ns: np.ndarray  # (N,) the held command's stamp [ns]; -1: none yet
    present: np.ndarray  # (N,) bool: a command was ever held
    failsafe: list[str]  # what the flight_controller's held command says (AttitudeCommand.failsafe)
    disarm: np.ndarray  # (N,) bool: the flight_controller's command disarms (touched down)
    kind: np.ndarray  # (N,) int8: ATTITUDE, RATES_THRUST or MOTORS
    low_level: np.ndarray  # (N, 4): FRD [p, q, r] rad/s + thrust N, or 4 motor commands; NaN: none

    @classmethod
    def hovering(cls, n: int) -> HeldCommands:
        """No command yet: hover rows, no stamps."""
        return cls(np.tile(HOVER_CONTROL, (n, 1)), np.full(n, -1, np.int64), np.zeros(n, bool), [""] * n,
                   np.zeros(n, bool), np.zeros(n, np.int8), np.full((n, 4), np.nan))

    def copy(self) -> HeldCommands:
        return HeldCommands(self.control.copy(), self.stamp_ns.copy(), self.present.copy(),
                            list(self.failsafe), self.disarm.copy(), self.kind.copy(), self.low_level.copy())

    def restore(self, old: HeldCommands, rows: np.ndarray) -> None:
        """Put back ``old``'s commands of the vehicles ``rows`` (bool (N,))."""
        for name in ("control", "stamp_ns", "present", "disarm", "kind", "low_level"):
            getattr(self, name)[rows] = getattr(old, name)[rows]
        for i in np.flatnonzero(rows):
            self.failsafe[i] = old.failsafe[i]


class CommandIntake:
    """Checks and holds the commands of N vehicles (see the module docstring).

    ``is_rotor`` (N,) bool: the vehicles on the rotor airframe (the only ones taking lower-level
    commands, within ``rotor``'s bounds); ``timeout_s``: command_timeout_s (0: no staleness check);
    ``warn``: the node's throttled warning.
    """

    def __init__(self, names: Sequence[str], is_rotor: np.ndarray, rotor: RotorParams | None,
                 timeout_s: float, warn: Warn) -> None:
        n = len(names)
        self.names = list(names)
        self.is_rotor = is_rotor
        self.timeout_s = timeout_s
        self._warn = warn
        self.held = HeldCommands.hovering(n)
        self._low_bounds = {kind: low_level_bounds(mode, rotor) for kind, mode in
                            ((RATES_THRUST, "rates_thrust"), (MOTORS, "motors"))} if rotor is not None else {}
        self._frd_frames = [base_link_frd_frame(i) for i in range(n)]
        self._flu_frames = [base_link_frame(i) for i in range(n)]
        # counters since start (VehicleStatus, /diagnostics)
        self.commands_rejected = np.zeros(n, np.int64)
        self.commands_clamped = np.zeros(n, np.int64)
        # the flight_controller's set-point counters, as its latest command reports them
        self.setpoints_rejected = np.zeros(n, np.int64)
        self.setpoints_clamped = np.zeros(n, np.int64)

    def restart_episode(self) -> None:
        """A new episode: a held command stays, as if given at its start (stamps restart from 0)."""
        h = self.held
        h.stamp_ns[h.present] = 0
        h.disarm[:] = False

    def attitude(self, i: int, msg: AttitudeCommand, t_ns: int, now_ns: int) -> None:
        """Check vehicle ``i``'s cmd/attitude stamped ``t_ns`` at the tick ``now_ns`` and hold it (or count
        and warn)."""
        flu = self._frame(i, msg.header.frame_id, ATTITUDE)
        if flu is None:
            return
        u = np.array([msg.pitch, msg.roll, msg.throttle, msg.yaw_rate, msg.battery_voltage], float)
        self.attitude_values(i, flu, u, msg.failsafe, msg.disarm, msg.setpoints_rejected,
                             msg.setpoints_clamped, t_ns, now_ns)

    def fleet_attitude(self, msg: FleetAttitudeCommand, t_ns: int, now_ns: int,
                       controlled: np.ndarray) -> list[int]:
        """Hold the rows of a /sim/fleet/attitude_command (FRD, as the flight controller sends it) of the
        vehicles ``controlled`` (N,) bool, each checked as a cmd/attitude; returns the vehicles held or
        rejected (none if the rows do not fit: counted on every vehicle named, warned). A row of another
        vehicle (flown by its own cmd/attitude) is rejected."""
        n = len(self.names)
        vehicles = [int(i) for i in msg.vehicles]
        m = len(vehicles)
        columns = (msg.pitch, msg.roll, msg.throttle, msg.yaw_rate, msg.battery_voltage, msg.failsafe,
                   msg.disarm, msg.setpoints_rejected, msg.setpoints_clamped)
        if any(len(c) != m for c in columns) or any(not 0 <= i < n for i in vehicles):
            for i in {i for i in vehicles if 0 <= i < n}:
                self.commands_rejected[i] += 1
            self._warn("fleet_cmd", f"{FLEET_ATTITUDE_COMMAND_TOPIC} rejected: {m} vehicles (each below {n}) "
                                    f"need {m} values in every field, got {[len(c) for c in columns]}")
            return []
        u = np.column_stack([np.asarray(c, float) for c in columns[:5]]) if m else np.zeros((0, 5))
        for j, i in enumerate(vehicles):
            if not controlled[i]:
                self._reject(i, f"it is not flown by the flight controller ({FLEET_ATTITUDE_COMMAND_TOPIC} "
                                "row ignored)")
                continue
            self.attitude_values(i, False, u[j], msg.failsafe[j], bool(msg.disarm[j]),
                                 int(msg.setpoints_rejected[j]), int(msg.setpoints_clamped[j]), t_ns, now_ns)
        return vehicles

    def attitude_values(self, i: int, flu: bool, u: np.ndarray, failsafe: str, disarm: bool,
                        setpoints_rejected: int, setpoints_clamped: int, t_ns: int, now_ns: int) -> None:
        """Check and hold vehicle ``i``'s attitude command ``u`` = [pitch, roll, throttle, yaw_rate,
        battery] (FLU signs if ``flu``) stamped ``t_ns`` at the tick ``now_ns`` (or count and warn)."""
        if not np.all(np.isfinite(u)):
            self._reject(i, f"non-finite values (pitch, roll, throttle, yaw_rate, battery) {u.tolist()}")
            return
        problem = self._stamp_problem(i, t_ns, now_ns)
        if problem:
            self._reject(i, problem)
            return
        if flu:  # FLU pitch and yaw rate have the opposite sign of QRSim's (AttitudeCommand.msg)
            u = u.copy()
            u[0], u[3] = -u[0], -u[3]
        clamped = np.clip(u, CONTROL_LIMITS[:, 0], CONTROL_LIMITS[:, 1])
        if np.any(clamped != u):
            self.commands_clamped[i] += 1
            self._warn(f"clamp{i}", f"{self.names[i]}/cmd/attitude clamped into QRSim's limits (|roll|, "
                                    f"|pitch| <= 0.9 rad, |yaw_rate| <= 4.5 rad/s, throttle 0..1, battery "
                                    f"9..12 V): {u.tolist()} -> {clamped.tolist()} (FRD; "
                                    f"{self.commands_clamped[i]} clamped so far)")
        self._hold(i, ATTITUDE, t_ns, clamped, failsafe, disarm)
        self.setpoints_rejected[i] = setpoints_rejected
        self.setpoints_clamped[i] = setpoints_clamped

    def low_level(self, i: int, kind: int, msg: RatesThrustCommand | MotorCommand, t_ns: int,
                  now_ns: int) -> None:
        """Check vehicle ``i``'s cmd/rates_thrust or cmd/motors (``kind``) and hold it (as ``attitude``)."""
        if not self.is_rotor[i]:
            self._reject(i, f"{self.names[i]} flies the identified Pelican airframe, which has no "
                            "rotor-level input (only vehicle.airframe 'rotor' takes it)", kind)
            return
        flu = self._frame(i, msg.header.frame_id, kind)
        if flu is None:
            return
        lo, hi = self._low_bounds[kind]
        if kind == RATES_THRUST:
            v = np.array([msg.roll_rate_radps, msg.pitch_rate_radps, msg.yaw_rate_radps, msg.thrust_n], float)
            names = "(roll_rate, pitch_rate, yaw_rate, thrust)"
            limits = (f"|roll_rate|, |pitch_rate| <= {RATE_LIMITS_RADPS[0]:.3f} rad/s, |yaw_rate| <= "
                      f"{RATE_LIMITS_RADPS[2]:g} rad/s, thrust 0..{hi[3]:.2f} N")
        else:
            v = np.asarray(msg.normalised, float)
            names, limits = "normalised", "each in [0, 1]"
            if v.shape != (4,):
                self._reject(i, f"{v.size} normalised values, not 4 (one per rotor)", kind)
                return
        if not np.all(np.isfinite(v)):
            self._reject(i, f"non-finite values {names} {v.tolist()}", kind)
            return
        problem = self._stamp_problem(i, t_ns, now_ns)
        if problem:
            self._reject(i, problem, kind)
            return
        if flu and kind == RATES_THRUST:  # FLU q and r have the opposite sign of FRD's
            v[1], v[2] = -v[1], -v[2]
        clamped = np.clip(v, lo, hi)
        if np.any(clamped != v):
            self.commands_clamped[i] += 1
            self._warn(f"clamp{i}.{kind}", f"{self.names[i]}/{COMMAND_TOPICS[kind]} clamped ({limits}): "
                                           f"{v.tolist()} -> {clamped.tolist()} (FRD; "
                                           f"{self.commands_clamped[i]} clamped so far)")
        self.held.low_level[i] = clamped
        # the control row under it is hover (overridden while the command is fresh); the
        # flight_controller's fields are cmd/attitude's
        self._hold(i, kind, t_ns, HOVER_CONTROL, "", False)

    def low_level_inputs(self, fly: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``Airframes.step``'s rates_thrust and motors (N, 4): the held lower-level commands of the
        vehicles ``fly`` (bool (N,)), NaN rows elsewhere; None when no vehicle flies one."""
        h = self.held
        out: list[np.ndarray | None] = []
        for kind in (RATES_THRUST, MOTORS):
            rows = fly & (h.kind == kind)
            out.append(np.where(rows[:, None], h.low_level, np.nan) if rows.any() else None)
        return out[0], out[1]

    def _hold(self, i: int, kind: int, t_ns: int, control: np.ndarray, failsafe: str, disarm: bool) -> None:
        h = self.held
        h.control[i] = control
        h.kind[i] = kind
        h.stamp_ns[i] = t_ns
        h.present[i] = True
        h.failsafe[i] = failsafe
        h.disarm[i] = disarm

    def _reject(self, i: int, why: str, kind: int = ATTITUDE) -> None:
        self.commands_rejected[i] += 1
        self._warn(f"cmd{i}.{kind}", f"{self.names[i]}/{COMMAND_TOPICS[kind]} rejected: {why} "
                                     f"({self.commands_rejected[i]} rejected so far; the held command stays)")

    def _frame(self, i: int, frame_id: str, kind: int) -> bool | None:
        """Whether a command's frame_id is FLU (``uavN/base_link``), FRD (``uavN/base_link_frd`` or
        empty: False), or None (rejected and counted)."""
        frame = frame_id.lstrip("/")
        if frame in ("", self._frd_frames[i]):
            return False
        if frame == self._flu_frames[i]:
            return True
        self._reject(i, f"frame_id {frame!r} must be {self._frd_frames[i]!r} (or empty: FRD) "
                        f"or {self._flu_frames[i]!r} (FLU)", kind)
        return None

    def _stamp_problem(self, i: int, t_ns: int, now_ns: int) -> str:
        """Why a command stamped ``t_ns`` cannot be held at the tick ``now_ns`` ('' if it can): older
        than the held command (of any kind), ahead of the simulated time, or stale."""
        held_ns = self.held.stamp_ns[i]
        if t_ns < held_ns:
            return f"stamp {t_ns * 1e-9:.3f} s is older than the held command's ({held_ns * 1e-9:.3f} s)"
        if t_ns > now_ns + TICK_NS:
            return (f"stamp {t_ns * 1e-9:.3f} s is ahead of the simulated time {now_ns * 1e-9:.3f} s "
                    "(stamp commands with the /clock time: use_sim_time)")
        if self.timeout_s > 0 and (now_ns - t_ns) * 1e-9 > self.timeout_s:
            return (f"stale: stamp {t_ns * 1e-9:.3f} s is more than command_timeout_s={self.timeout_s:g} s "
                    f"before the simulated time {now_ns * 1e-9:.3f} s")
        return ""

