"""What a policy is, what it may see, and how policies are named and loaded.

Design: a policy is a callable ``policy(view) -> actions`` called once per task step, where ``view`` is
an ``AutopilotView`` (in process ``SimulatorView`` of the running ``Simulator``; in the graph the autopilot
node's ``TopicView``) and ``actions`` is an array with one row per agent-controlled vehicle
(``view.action_spec``; the columns of each vehicle's control mode, see
``qrsim_ros.core.config.scenario.CONTROL_MODES``). A policy is built per episode by a *factory*
``factory(view) -> policy``, called after ``Simulator.reset``; a factory keeps per-episode state
(lanes, maps, PIDs) in the policy it returns.

The view exposes only what the vehicles' autopilots could know: the estimated states eX (never the true
states), the camera observations with their ground-truth fields blanked, the plume readings, the task's
public parameters, the area limits (the map) and the action specification. Randomised policies draw from
``view.policy_rng(name)``: a stream derived from the episode seed like every other stream
(``rng.RandomStreams``), so a seeded episode, policy included, is reproducible in any process.

Policies are named on the command line as a built-in name (``hover``, ``random``, ``search-pattern``,
``pursuit``, ``random-search``) or as ``MODULE:FUNC`` / ``path/to/file.py:FUNC``. ``FUNC`` is called
once with the view: if it returns a callable, that is the policy (FUNC is a factory, like the built-ins);
otherwise FUNC itself is the policy (a plain function of the view; that first call's result is dropped,
so it should not have side effects that matter).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import os
import sys
import zlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.config.scenario import CONTROL_MODES
from qrsim_ros.core.tasks.retrieve import RetrieveTask
from qrsim_ros.core.vehicles.controllers import MAX_SPEED_MPS
from qrsim_ros.core.vehicles.energy import bases_array
from qrsim_ros.core.vehicles.fleet_control import LOW_LEVEL_MODES
from qrsim_ros.core.vehicles.pelican import CONTROL_LIMITS
from qrsim_ros.core.vehicles.rotor_control import low_level_bounds
from qrsim_ros.core.vehicles.rotor_params import RotorParams

if TYPE_CHECKING:
    from qrsim_ros.core.comms import Packet
    from qrsim_ros.core.config.scenario import Scenario, TaskParams
    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.core.sensors.camera import CameraObservation, CameraParams
    from qrsim_ros.core.sensors.scene_range_finders import BeamReadings

Array = NDArray[np.float64]


class PolicyError(ValueError):
    """A policy name or ``MODULE:FUNC`` cannot be resolved, or the policy misbehaves; one clear line."""


class AutopilotView(Protocol):
    """What a policy may see and do: what the vehicles' autopilots could know (module docstring). Two
    implementations: ``SimulatorView`` (in process, over a ``Simulator``) and the autopilot nodes'
    ``TopicView`` (the same, filled from the public topics of a running graph). A capability the scenario
    lacks answers with NaN / empty values or a ``PolicyError`` naming what is missing, never by absence.
    """

    # static facts (configuration, the map)
    @property
    def scenario_name(self) -> str: ...
    @property
    def task(self) -> TaskParams: ...
    @property
    def camera_params(self) -> CameraParams: ...
    @property
    def rotor_params(self) -> RotorParams: ...
    @property
    def area_limits_ned(self) -> tuple[float, ...]: ...
    @property
    def num_vehicles(self) -> int: ...
    @property
    def control_modes(self) -> tuple[str, ...]: ...
    @property
    def action_spec(self) -> dict[str, Any]: ...
    @property
    def action_rows(self) -> int: ...
    @property
    def seed_entropy(self) -> int: ...
    def policy_rng(self, name: str) -> np.random.Generator: ...
    @property
    def bases_ned_m(self) -> Array: ...
    @property
    def has_radio(self) -> bool: ...
    @property
    def range_finder_beams(self) -> tuple[str, ...]: ...
    # time
    @property
    def time_s(self) -> float: ...
    @property
    def step_count(self) -> int: ...
    # observations
    def estimated_state(self) -> Array: ...
    def camera_observations(self) -> list[Any]: ...
    def plume_readings(self) -> Array: ...
    def range_finder_readings(self, beams: tuple[str, ...] | None = None) -> BeamReadings: ...
    def battery_voltage_v(self) -> Array: ...
    def battery_percentage(self) -> Array: ...
    @property
    def failsafe(self) -> list[str]: ...
    @property
    def plume_locations(self) -> Array: ...
    @property
    def retrieve(self) -> Any: ...
    # the radio
    def send(self, vehicle: int, destination: int, payload: bytes, mode: str | None = None) -> int: ...
    def receive(self, vehicle: int) -> list[Packet]: ...


def check_view(view: object, user: str) -> AutopilotView:
    """``view``, if it has every member of ``AutopilotView`` (looked up without running them); else a
    PolicyError naming what ``user`` (a policy) misses: for views made outside the package."""
    members = [name for name in vars(AutopilotView) if not name.startswith("_")]
    missing = [name for name in members if inspect.getattr_static(view, name, _MISSING) is _MISSING]
    if missing:
        raise PolicyError(f"{user} needs an AutopilotView; this view ({type(view).__name__}) does not "
                          f"provide {', '.join(missing)}")
    return view  # type: ignore[return-value]


_MISSING = object()


class ScenarioFacts:
    """The static facts of an ``AutopilotView`` that its ``scenario`` holds (the configuration and the map),
    and ``policy_rng`` from its ``seed_entropy``: shared by ``SimulatorView`` and the autopilot nodes'
    ``TopicView``, which give those two."""

    scenario: Scenario
    seed_entropy: int

    @property
    def scenario_name(self) -> str:
        return self.scenario.name

    @property
    def task(self) -> TaskParams:
        """The task's public parameters (type, dt_s, duration_steps, flight heights, targets)."""
        return self.scenario.task

    @property
    def camera_params(self) -> CameraParams:
        """The vehicles' camera model (f, c, mounting, frame period)."""
        return self.scenario.vehicle.camera

    @property
    def rotor_params(self) -> RotorParams:
        """The rotor airframe's parameters (``vehicle.rotor``)."""
        return self.scenario.vehicle.rotor_params()

    @property
    def area_limits_ned(self) -> tuple[float, ...]:
        """Flight area [xmin xmax ymin ymax zmin zmax] (NED, m); the ground is at zmax."""
        return tuple(self.scenario.area_limits_ned)

    @property
    def bases_ned_m(self) -> Array:
        """The charging bases' positions (K, 3) (NED, m; the map's ``bases``; (0, 3) without bases)."""
        return bases_array(self.scenario.bases)

    def policy_rng(self, name: str) -> np.random.Generator:
        """A Generator for the policy component ``name``, derived from the episode seed."""
        return RandomStreams(self.seed_entropy).get(f"policy.{name}")


class SimulatorView(ScenarioFacts):
    """The ``AutopilotView`` of a ``Simulator``: read-only, restricted to what the vehicles' autopilots
    may observe.

    Estimated states (N, 20) (spec 2.1; NaN rows for invalid vehicles), camera observations (ground
    truth blanked: ``person_index`` -1, ``person_distance_px``/``person_area_px2`` NaN), plume readings
    (N,), the scene range finders' readings (``range_finder_readings``), the plume task's reference
    locations, task parameters, area limits, time and action spec.
    """

    def __init__(self, sim: Simulator) -> None:
        self._sim = sim
        self._camera_cache: dict[int, tuple[CameraObservation, CameraObservation]] = {}

    # --- static facts (configuration, the map; the others are ScenarioFacts') ------------------------
    @property
    def scenario(self) -> Scenario:
        """The scenario the episode flies (``Simulator.scenario``): where ``ScenarioFacts`` reads from."""
        return self._sim.scenario

    @property
    def num_vehicles(self) -> int:
        return self._sim.num_vehicles

    @property
    def control_modes(self) -> tuple[str, ...]:
        """Control mode of every vehicle (agent-controlled or not)."""
        return tuple(self._sim.control_modes)

    @property
    def action_spec(self) -> dict[str, Any]:
        """``Simulator.action_spec``: rows (vehicle indices), modes, width, columns."""
        return self._sim.action_spec

    @property
    def action_rows(self) -> int:
        """How many rows an action has (``action_spec``'s vehicles)."""
        return self._sim.action_rows

    @property
    def seed_entropy(self) -> int:
        """The episode's seed as used (the clock's entropy when the scenario seed is 0)."""
        return int(self._sim.seed_entropy)

    # --- time -----------------------------------------------------------------------------------
    @property
    def time_s(self) -> float:
        """Simulated time since reset [s]."""
        return float(self._sim.time)

    @property
    def step_count(self) -> int:
        """Task steps taken since reset."""
        return int(self._sim.step_count)

    # --- observations -----------------------------------------------------------------------------
    def estimated_state(self) -> Array:
        """Estimated states eX (N, 20): GPS position | attitude | 0 | gyro | 0 | accel | height above
        ground | GPS velocity n, e | vertical speed (spec 2.1). NaN rows for invalid vehicles."""
        return self._sim.estimated_state()

    def camera_observations(self) -> list[CameraObservation | None]:
        """Latest camera frame per vehicle (None before the first), ground-truth fields blanked."""
        out: list[CameraObservation | None] = []
        cache: dict[int, tuple[CameraObservation, CameraObservation]] = {}
        for obs in self._sim.camera_observations():
            if obs is None:
                out.append(None)
                continue
            hit = self._camera_cache.get(id(obs))
            if hit is None or hit[0] is not obs:
                hit = (obs, _blank_ground_truth(obs))
            cache[id(obs)] = hit
            out.append(hit[1])
        self._camera_cache = cache
        return out

    def plume_readings(self) -> Array:
        """Latest plume-sensor reading per vehicle (N,); NaN without a plume sensor."""
        return self._sim.plume_readings()

    @property
    def range_finder_beams(self) -> tuple[str, ...]:
        """The scene range finders' fitted beams (``vehicle.sensors.range_finders``; () without them)."""
        model = self._sim.sensors.get("range_finders")
        return tuple(model.beams) if model is not None else ()

    def range_finder_readings(self, beams: tuple[str, ...] | None = None) -> BeamReadings:
        """The scene range finders' latest readings (sensor data, noisy when the beams are ``on``):
        ``BeamReadings`` with the beams' names, unit directions in the body frame FRD (B, 3), readings
        (N, B) [m] (+inf no return or beyond range, -inf closer than the minimum, NaN before the first
        reading) and maximum ranges [m]. ``beams``: which (None: every fitted beam). PolicyError when
        the scenario has no ``vehicle.sensors.range_finders`` or a beam is not fitted."""
        model = self._sim.sensors.get("range_finders")
        if model is None:
            raise PolicyError(f"scenario {self.scenario_name!r} has no range finders "
                              "(vehicle.sensors.range_finders)")
        try:
            return model.readings(beams)  # type: ignore[attr-defined, no-any-return]
        except KeyError as exc:
            raise PolicyError(str(exc.args[0])) from None

    def battery_voltage_v(self) -> Array:
        """Each vehicle's battery voltage (N,) [V] (its power bus; NaN with the battery off)."""
        return np.array(self._sim.battery.voltage_v, float)

    def battery_percentage(self) -> Array:
        """Each vehicle's charge left (N,) in 0..1 (``BatteryState.percentage``; NaN with the battery off)."""
        return np.array(self._sim.battery.percentage, float)

    # --- the radio (docs/COMMS.md) -----------------------------------------------------------------
    @property
    def has_radio(self) -> bool:
        """Whether the scenario has a radio (``comms.on``)."""
        return self._sim.comms is not None

    def send(self, vehicle: int, destination: int, payload: bytes, mode: str | None = None) -> int:
        """Vehicle ``vehicle`` sends ``payload`` to ``destination`` (a vehicle index or
        ``core.comms.BROADCAST`` = -1) now (``Simulator.send``); ``mode``: ``datagram``, ``reliable`` or
        None (the scenario's ``comms.mode``). Returns the sender's sequence number. PolicyError when the
        scenario has no radio or an argument is wrong."""
        if self._sim.comms is None:
            raise PolicyError(f"scenario {self.scenario_name!r} has no radio (comms.on: false)")
        try:
            return int(self._sim.send(vehicle, destination, bytes(payload), mode))
        except (ValueError, TypeError) as exc:
            raise PolicyError(f"send from vehicle {vehicle!r}: {exc}") from None

    def receive(self, vehicle: int) -> list[Packet]:
        """The packets ``vehicle`` received since its last ``receive`` (``Simulator.receive``: its inbox is
        emptied), in delivery order. PolicyError when the scenario has no radio."""
        if self._sim.comms is None:
            raise PolicyError(f"scenario {self.scenario_name!r} has no radio (comms.on: false)")
        try:
            return self._sim.receive(vehicle)
        except ValueError as exc:
            raise PolicyError(f"receive of vehicle {vehicle!r}: {exc}") from None

    @property
    def failsafe(self) -> list[str]:
        """What each vehicle's onboard failsafe flies ('' none, 'emergency_land' after a rotor loss, ...)."""
        return list(self._sim.failsafe)

    @property
    def retrieve(self) -> RetrieveTask:
        """The retrieve task's vehicle-side devices (``task.type: retrieve``): the downward camera's target
        centroids, the grasper and the Initialise self-test. ``PolicyError`` in other tasks."""
        task = self._sim.task
        if not isinstance(task, RetrieveTask):
            raise PolicyError(f"scenario {self.scenario_name!r} is not a retrieve task")
        return task

    @property
    def plume_locations(self) -> Array:
        """Plume task: the M reference locations (M, 3) (NED, m) where estimates are asked for."""
        return np.array(self._sim.plume_locations, float)


def _blank_ground_truth(obs: CameraObservation) -> CameraObservation:
    nan = np.full(obs.person_distance_px.shape, np.nan)
    return replace(obs, person_index=np.full(obs.person_index.shape, -1, dtype=np.int64),
                   person_distance_px=nan, person_area_px2=nan.copy())


class Policy(Protocol):
    """``policy(view) -> actions`` (rows: agent-controlled vehicles; columns: their mode's inputs)."""

    def __call__(self, view: AutopilotView) -> ArrayLike: ...


PolicyFactory = Callable[[AutopilotView], Policy]


# --- action space ------------------------------------------------------------------------------------

def mode_bounds(mode: str, area_limits_ned: tuple[float, ...], rotor: RotorParams | None = None
                ) -> tuple[Array, Array]:
    """Physical limits (low, high) of one control mode's action columns.

    attitude: the Pelican's input limits (pitch/roll ±0.9 rad, throttle 0..1, yaw rate ±4.5 rad/s,
    battery 9..12 V); velocity / velocity_height: north and east ±3 sqrt(2) m/s, down ±3 m/s. The velocity
    loops clamp each *body* component at 3 m/s (controllers.MAX_SPEED_MPS), so the velocities they follow
    form a square of side 6 m/s turned by the heading; its NED bounding box is ±3 sqrt(2) (reached along
    a body diagonal); commands outside the square are clamped per body component by the loop.
    waypoint: the flight area (NED, m) and a heading in [-pi, pi] rad.
    rates_thrust, motors (the rotor airframe's ``rotor`` parameters needed):
    ``rotor_control.low_level_bounds``.
    """
    if mode in LOW_LEVEL_MODES:
        if rotor is None:
            raise ValueError(f"the bounds of control mode {mode!r} need the rotor airframe's parameters")
        return low_level_bounds(mode, rotor)
    if mode == "attitude":
        return CONTROL_LIMITS[:, 0].copy(), CONTROL_LIMITS[:, 1].copy()
    if mode in ("velocity", "velocity_height"):
        high = np.array([math.sqrt(2.0) * MAX_SPEED_MPS] * 2 + [MAX_SPEED_MPS])[: len(CONTROL_MODES[mode])]
        return -high, high
    if mode == "waypoint":
        lim = np.asarray(area_limits_ned, float)
        return (np.array([lim[0], lim[2], lim[4], -math.pi]), np.array([lim[1], lim[3], lim[5], math.pi]))
    raise ValueError(f"unknown control mode {mode!r}")


#: The share of the velocity loops' per-body-component limit (``MAX_SPEED_MPS``) that the baseline
#: policies' set points use at most horizontally (room for the heading error) and vertically, and the
#: roll or pitch [rad] they allow for: a tilted vehicle's body axes mix the vertical speed into the
#: horizontal components and the horizontal speed into the vertical one (turns and accelerations of the
#: search pattern reach ~0.25 rad).
SETPOINT_LIMIT_FRACTION = 0.9
SETPOINT_VERTICAL_FRACTION = 0.98
SETPOINT_TILT_RAD = 0.3


def inside_velocity_limits(v_ned: Array, heading_rad: float, fraction: float = SETPOINT_LIMIT_FRACTION,
                           vertical_fraction: float = SETPOINT_VERTICAL_FRACTION,
                           tilt_rad: float = SETPOINT_TILT_RAD) -> Array:
    """``v_ned`` (3,) [m/s] scaled down, its direction kept, until no horizontal body component exceeds
    ``fraction`` x MAX_SPEED_MPS and the vertical one ``vertical_fraction`` x MAX_SPEED_MPS, for a vehicle
    with heading ``heading_rad`` and any roll and pitch up to ``tilt_rad`` (each bounded by its level
    component plus the other axis' share, |v| sin(tilt)): a set point the velocity loops follow without
    clamping it (``mode_bounds``). Unchanged if it is inside already, or if the heading is not finite."""
    v = np.asarray(v_ned, float)
    c, s = math.cos(heading_rad), math.sin(heading_rad)
    forward, right, down = c * v[0] + s * v[1], -s * v[0] + c * v[1], abs(v[2])
    mix = math.sin(tilt_rad)
    horizontal = (max(abs(forward), abs(right)) + down * mix) / (fraction * MAX_SPEED_MPS)
    vertical = (down + math.hypot(forward, right) * mix) / (vertical_fraction * MAX_SPEED_MPS)
    scale = max(horizontal, vertical)
    if not math.isfinite(scale) or scale <= 1.0:
        return v
    return v / scale


def action_bounds(action_spec: Mapping[str, Any], area_limits_ned: tuple[float, ...],
                  rotor: RotorParams | None = None) -> tuple[Array, Array]:
    """(low, high), each (rows, width): every agent-controlled vehicle's mode limits (``mode_bounds``);
    padding columns of narrower modes (ignored by the simulator) are pinned to 0."""
    rows, width = len(action_spec["vehicles"]), int(action_spec["width"])
    low, high = np.zeros((rows, width)), np.zeros((rows, width))
    for r, mode in enumerate(action_spec["modes"]):
        lo, hi = mode_bounds(mode, area_limits_ned, rotor)
        low[r, : lo.size], high[r, : hi.size] = lo, hi
    return low, high


# --- naming and loading ------------------------------------------------------------------------------

def resolve_factory(
    spec: str, builtins: Mapping[str, PolicyFactory], other_names: tuple[str, ...] = ()
) -> PolicyFactory:
    """The factory named by ``spec``: a built-in name or ``MODULE:FUNC`` / ``file.py:FUNC``
    (``other_names`` are listed in the error message too)."""
    spec = spec.strip()
    if spec in builtins:
        return builtins[spec]
    if ":" not in spec:
        names = ", ".join([*builtins, *other_names])
        raise PolicyError(f"unknown policy {spec!r}; use one of {names} or MODULE:FUNC")
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise PolicyError(f"policy {spec!r}: expected MODULE:FUNC (e.g. mypkg.policies:make_policy)")
    module = _import(module_name, spec)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PolicyError(f"policy {spec!r}: {module_name} has no attribute {attr!r}") from None
    if not callable(obj):
        raise PolicyError(f"policy {spec!r}: {attr} is not callable")
    return obj


def _import(module_name: str, spec: str) -> Any:
    if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
        path = Path(module_name).expanduser().resolve()
        if not path.is_file():
            raise PolicyError(f"policy {spec!r}: file {path} not found")
        name = f"qrsim_user_policy_{zlib.crc32(str(path).encode())}"
        if name in sys.modules:
            return sys.modules[name]
        file_spec = importlib.util.spec_from_file_location(name, path)
        if file_spec is None or file_spec.loader is None:
            raise PolicyError(f"policy {spec!r}: cannot load {path}")
        module = importlib.util.module_from_spec(file_spec)
        sys.modules[name] = module
        try:
            file_spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            why = f"{type(exc).__name__}: {exc}"
            raise PolicyError(f"policy {spec!r}: importing {path} failed: {why}") from None
        return module
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:  # modules next to the user, as `python -m` would find them
        sys.path.append(cwd)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise PolicyError(f"policy {spec!r}: no module named {module_name!r}") from None
        raise PolicyError(f"policy {spec!r}: importing {module_name} failed: {exc}") from None
    except Exception as exc:
        raise PolicyError(f"policy {spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}") \
            from None
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def instantiate(factory: Callable[..., Any], view: AutopilotView) -> Policy:
    """Build the episode's policy: ``factory(view)`` if that returns a callable, else ``factory`` itself
    (a plain policy function)."""
    result = factory(view)
    return result if callable(result) else factory


def check_actions(actions: ArrayLike, view: AutopilotView, name: str = "policy") -> Array:
    """Actions as a float array (rows, >= columns of each mode); a clear PolicyError otherwise."""
    try:
        a = np.atleast_2d(np.asarray(actions, dtype=float))
    except (TypeError, ValueError):
        raise PolicyError(f"{name} returned non-numeric actions: {actions!r}") from None
    rows = view.action_rows
    if a.ndim != 2 or a.shape[0] != rows:
        raise PolicyError(f"{name} returned actions of shape {a.shape}; expected ({rows}, "
                          f"{view.action_spec['width']})")
    return a
