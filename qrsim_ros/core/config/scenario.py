"""Scenarios as data: one YAML file per task variant (config/*.yaml), validated on load.

A scenario file maps onto these dataclasses; sections that hold a model's parameters use that model's
own parameter dataclass (``vehicle.ahars`` is ``AharsParams``, ``gps`` is ``GpsSpaceSegmentParams``,
...), so there is one set of names and one validation for each parameter, shared by the in-process
simulator, the ROS nodes and the launch files. Missing keys take QRSim's defaults (the noisy
``pelican_config``); unknown keys, wrong types and out-of-range values are errors naming the file
and the key path. ``load_scenario(name_or_path, overrides)`` is the entry point; ``overrides`` is a
nested mapping with the same keys as the YAML (e.g. ``{"seed": 3, "wind": {"w6_mps": 1.0}}``).

Seeds, one convention for every front end (``qrsim run``/``batch``/``launch`` ``--seed``, the launch
files' ``seed`` argument, the nodes' ``seed`` parameter):

- ``SEED_FROM_FILE`` (-1): the scenario file's ``seed`` (the default everywhere);
- ``SEED_FROM_CLOCK`` (0): from the clock, QRSim's convention; ``resolve_seed`` draws it once, in
  [1, MAX_SEED], so it can be printed, passed to every node and given again to repeat the run;
- 1 .. ``MAX_SEED`` (2**31 - 1, the nodes' integer parameter range): that seed.

``check_seed`` validates a requested seed, ``resolve_seed`` turns it into the concrete seed to build
with. A scenario file's own ``seed`` is 0 (from the clock) or >= 1. ``qrsim batch`` never clock-seeds
(its BASE is -1 or >= 1, see ``qrsim_ros.cli.batch``). ``Simulator.reset(seed=None)`` is not a seed value:
it means "no reseeding, continue the streams".
"""

from __future__ import annotations

import math
import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from qrsim_ros.core.common.geodesy import QRSIM_ORIGIN, GeodeticOrigin
from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.core.common.validation import (
    ConfigError,
    area_limits,
    finite,
    in_range,
    non_negative,
    positive,
    ticks_per_update,
)
from qrsim_ros.core.comms.params import CommsParams
from qrsim_ros.core.config.loader import ScenarioError, YamlLimitError, build, load_yaml, merge
from qrsim_ros.core.config.retrieve import RetrieveParams
from qrsim_ros.core.faults import FaultSpec, parse_faults
from qrsim_ros.core.onboard.settings import MavlinkParams
from qrsim_ros.core.sensors.ahars import AharsParams
from qrsim_ros.core.sensors.camera import CameraParams
from qrsim_ros.core.sensors.gps import GpsReceiverParams, GpsSpaceSegmentParams
from qrsim_ros.core.sensors.plume_sensor import PlumeSensorParams
from qrsim_ros.core.sensors.registry import SENSORS
from qrsim_ros.core.vehicles.airframes import AIRFRAME_NAMES
from qrsim_ros.core.vehicles.emergency_land import ROTOR_LOSS_FAILSAFES
from qrsim_ros.core.vehicles.energy import BatterySettings, ChargingBase
from qrsim_ros.core.vehicles.fleet_control import CONTROL_MODES, FAILSAFES, LOW_LEVEL_MODES
from qrsim_ros.core.vehicles.rotor_control import RotorControlParams
from qrsim_ros.core.vehicles.rotor_params import PRESETS, RotorParams, rotor_preset
from qrsim_ros.core.world.area import PersonsAreaParams, PersonsSettings
from qrsim_ros.core.world.scene import SceneParams
from qrsim_ros.core.world.turbulence import TurbulenceParams
from qrsim_ros.core.world.wind import MeanWindParams

#: ``seed`` -1: the scenario file's seed.
SEED_FROM_FILE = -1
#: ``seed`` 0: from the clock (QRSim's convention), drawn once by ``resolve_seed``.
SEED_FROM_CLOCK = 0
#: The largest seed: the range of the nodes' integer ``seed`` parameter (a clock seed is drawn below it);
#: from the limits table (``core.common.limits``).
MAX_SEED = LIMITS["seed"].hi
#: What the seed values mean, for help texts and error messages.
SEED_HELP = f"-1: the scenario file's seed; 0: from the clock; 1..{MAX_SEED}: that seed"

TASK_TYPES = ("keep_spot", "keep_spot_x10", "goto_waypoint", "keep_velocity", "cats_mouse",
              "search_rescue", "plume", "retrieve")
AREA_TYPES = ("box", "box_with_persons")
PLUME_TYPES = ("gaussian", "gaussian_dispersion", "gaussian_puff")
#: The vehicle models (``vehicle.airframe``): QRSim's identified Pelican (the default) and the rotor-level
#: airframe with its onboard attitude controller (docs/ROTOR.md).
AIRFRAMES = AIRFRAME_NAMES


#: ``task.placement`` choices (search and rescue).
PLACEMENTS = ("random", "base")


def base_grid_ne(base_ne: tuple[float, ...] | np.ndarray, num_vehicles: int, spacing_m: float) -> np.ndarray:
    """(N, 2) north/east [m] of N vehicles on a square grid ``spacing_m`` apart centred on ``base_ne``,
    row by row (ceil(sqrt(N)) columns): ``task.placement: base``."""
    side = math.ceil(math.sqrt(num_vehicles))
    i = np.arange(num_vehicles)
    offsets = np.stack([i // side, i % side], axis=1) - 0.5 * (side - 1)
    return np.asarray(base_ne, float)[:2] + spacing_m * offsets


@dataclass(frozen=True)
class TaskParams:
    """What the agent must do and how it is rewarded (spec section 5).

    type: one of TASK_TYPES. dt_s: task step [s] (a multiple of 0.02); the agent's action is held for
    it while the per-vehicle controllers run at 50 Hz. duration_steps: episode length in task steps.
    start_z_ned_m: initial NED z of the vehicles where the task places them (-45 = 45 m up).
    waypoint_ned / waypoint_heading_rad: goto_waypoint's target. target_velocity_ned: keep_velocity's.
    control_cost: include QRSim's running control cost in the generic tasks' reward.
    num_cats, cat_mouse_distance_range_m, min_inter_cat_distance_m, mouse_speed_factor, flight_z_ned_m:
    cats and mouse (spec 5.5; the effective cat-mouse distance range is QRSim's [14, 20]).
    num_reference_locations, samples_per_location: plume mapping (M and K, spec 5.4).
    stop_on_invalid / stop_when_all_found: end the episode when a vehicle becomes invalid / when every
    person has been found (QRSim has no termination logic; `done` reports it).
    placement: where search and rescue places the vehicles: ``random`` (QRSim's: uniform over 90 % of the
    area, random headings) or ``base`` (a team taking off together: a square grid ``base_spacing_m``
    [m] apart centred on the scenario's first charging base, ``bases[0]``, headings north;
    ``base_grid_ne``).
    """

    type: str = "keep_spot"
    dt_s: float = 0.02
    duration_steps: int = 500
    start_z_ned_m: float = -10.0
    waypoint_ned: tuple[float, float, float] = (-50.0, -50.0, -10.0)
    waypoint_heading_rad: float = 0.0
    target_velocity_ned: tuple[float, float, float] = (0.0, 0.0, 0.0)
    control_cost: bool = True
    num_cats: int = 3
    cat_mouse_distance_range_m: tuple[float, float] = (14.0, 20.0)
    min_inter_cat_distance_m: float = 22.0
    mouse_speed_factor: float = 1.0
    flight_z_ned_m: float = -10.0
    num_reference_locations: int = 100
    samples_per_location: int = 1
    stop_on_invalid: bool = True
    stop_when_all_found: bool = True
    placement: str = "random"
    base_spacing_m: float = 4.0

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"task.placement={self.placement!r} must be one of {', '.join(PLACEMENTS)}")
        if not (math.isfinite(self.base_spacing_m) and self.base_spacing_m > 0):
            raise ConfigError(f"task.base_spacing_m={self.base_spacing_m!r} must be > 0 [m]")
        if self.type not in TASK_TYPES:
            raise ConfigError(f"task.type={self.type!r} must be one of {', '.join(TASK_TYPES)}")
        ticks_per_update("task.dt_s", self.dt_s)
        if self.duration_steps < 1:
            raise ConfigError(f"task.duration_steps={self.duration_steps!r} must be >= 1")
        lo, hi = self.cat_mouse_distance_range_m
        if not 0 < lo <= hi:
            raise ConfigError(f"task.cat_mouse_distance_range_m={[lo, hi]} must satisfy 0 < min <= max")
        if self.num_cats < 1:
            raise ConfigError(f"task.num_cats={self.num_cats!r} must be >= 1")
        non_negative("task.min_inter_cat_distance_m", self.min_inter_cat_distance_m)
        in_range("task.mouse_speed_factor", self.mouse_speed_factor, 0.0, 10.0)
        if self.num_reference_locations < 1 or self.samples_per_location < 1:
            raise ConfigError("task.num_reference_locations and task.samples_per_location must be >= 1")


@dataclass(frozen=True)
class AreaParams(PersonsSettings):
    """The flight area: ``box`` (limits only) or ``box_with_persons`` (persons and terrain).

    type: one of AREA_TYPES.
    limits_ned: [xmin xmax ymin ymax zmin zmax] (NED, m); None = the task's default (search and rescue:
    D = sqrt(200*25*3*N) for N vehicles, spec 5.3). The other fields are the persons/terrain settings
    (``PersonsSettings``; ``persons_area_params`` adds the limits and origin, and validates them).
    persons_ned: place exactly these persons (list of [n, e, d]) instead of sampling them.
    """

    type: str = "box"
    limits_ned: tuple[float, float, float, float, float, float] | None = None
    persons_ned: tuple[tuple[float, float, float], ...] | None = None

    def __post_init__(self) -> None:
        if self.type not in AREA_TYPES:
            raise ConfigError(f"area.type={self.type!r} must be one of {', '.join(AREA_TYPES)}")
        if self.limits_ned is not None:
            area_limits("area.limits_ned", self.limits_ned)
        if self.persons_ned is not None:
            if self.type != "box_with_persons":
                raise ConfigError("area.persons_ned needs area.type: box_with_persons")
            for i, row in enumerate(self.persons_ned):
                finite(f"area.persons_ned[{i}] north", row[0])
                finite(f"area.persons_ned[{i}] east", row[1])
        if self.type == "box_with_persons":
            self.persons_area_params(self.limits_ned or PersonsAreaParams().limits_ned)

    def persons_area_params(
        self, limits_ned: tuple[float, ...], origin: GeodeticOrigin = QRSIM_ORIGIN
    ) -> PersonsAreaParams:
        """The persons area's parameters for the given limits (validates the persons/terrain settings)."""
        return PersonsAreaParams(limits_ned=tuple(limits_ned), origin=origin, **self.persons_settings())


@dataclass(frozen=True)
class PlumeParams:
    """The plume of the plume-mapping tasks (spec 4.4): model type and its sampling ranges.

    sources_ned / emission_rates: fix the sources instead of sampling them (S x 3, S values).
    ``gaussian``: one source; its emission rate, if given, is the peak concentration Q0 (default 1) and
    the spreads and orientation are still drawn. ``gaussian_dispersion``: both together.
    ``gaussian_puff``: sources only (the puff masses come from ``q_range`` and ``mu_s``).
    """

    type: str = "gaussian_dispersion"
    sigma_range_m: tuple[float, float] = (3.0, 20.0)
    num_sources_range: tuple[int, int] = (1, 1)
    q_range: tuple[float, float] = (0.1, 2.5)
    a: float = 0.33
    b: float = 0.86
    mu_s: float = 5.0
    area_dt_s: float = 1.0
    sources_ned: tuple[tuple[float, float, float], ...] | None = None
    emission_rates: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.type not in PLUME_TYPES:
            raise ConfigError(f"plume.type={self.type!r} must be one of {', '.join(PLUME_TYPES)}")
        if self.emission_rates is not None and self.sources_ned is None:
            raise ConfigError("plume.emission_rates needs plume.sources_ned")
        fixed = self.sources_ned is not None
        if self.type == "gaussian_dispersion" and fixed and self.emission_rates is None:
            raise ConfigError("plume.sources_ned and plume.emission_rates must be given together")
        if self.type == "gaussian_puff" and self.emission_rates is not None:
            raise ConfigError("plume.emission_rates does not apply to gaussian_puff (puff masses are drawn "
                              "from plume.q_range every plume.mu_s seconds on average)")
        if self.type == "gaussian" and self.sources_ned is not None and len(self.sources_ned) != 1:
            raise ConfigError(f"plume.sources_ned: a gaussian plume has one source, "
                              f"got {len(self.sources_ned)}")
        if self.sources_ned is not None:
            if len(self.sources_ned) < 1:
                raise ConfigError("plume.sources_ned must list at least one source")
            for i, src in enumerate(self.sources_ned):
                for j, v in enumerate(src):
                    finite(f"plume.sources_ned[{i}][{j}]", v)
        if self.emission_rates is not None:
            if self.sources_ned is not None and len(self.sources_ned) != len(self.emission_rates):
                raise ConfigError(f"plume.emission_rates has {len(self.emission_rates)} values for "
                                  f"{len(self.sources_ned)} sources")
            positive("plume.emission_rates", self.emission_rates)
        for name, (lo, hi) in (("sigma_range_m", self.sigma_range_m), ("q_range", self.q_range)):
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi):
                raise ConfigError(f"plume.{name}={[lo, hi]} must satisfy 0 < min <= max")
        lo_s, hi_s = self.num_sources_range
        if not 1 <= lo_s <= hi_s:
            raise ConfigError(f"plume.num_sources_range={[lo_s, hi_s]} must satisfy 1 <= min <= max")
        positive("plume.a", self.a)
        positive("plume.b", self.b)
        positive("plume.mu_s", self.mu_s)
        ticks_per_update("plume.area_dt_s", self.area_dt_s)


@dataclass(frozen=True)
class VehicleParams:
    """Every vehicle's configuration (QRSim's platform config; defaults = the noisy pelican_config).

    control: how the agent's action drives the vehicles: one of CONTROL_MODES, or one per vehicle;
    None = the task's native input. initial_states: per-vehicle states of 6, 12 or 13 values
    overriding the task's placement. The sensor/turbulence sections are the models' own parameters.
    command_timeout_s: simulated seconds a vehicle's set point (any mode) stays valid after it was
    issued (its stamp); older, the vehicle flies its failsafe (0: never expires). failsafe: what a
    vehicle does then, one of FAILSAFES: ``hold`` (closed-loop position and height hold where it was,
    on the estimated state), ``land`` (descend at ``failsafe_land_rate_m_s`` [m/s] and disarm on the
    ground) or ``level`` (open-loop level attitude at hover throttle).
    airframe: the vehicle model, one of AIRFRAMES, or one per vehicle: ``pelican`` (QRSim's identified
    model; ``mass_kg`` and ``dyn_noise`` are its parameters) or ``rotor`` (the rotor-level airframe).
    rotor: the rotor airframe's parameters: ``preset`` (one of ``rotor_params.PRESETS``, default
    ``pelican``) and overrides of any ``RotorParams`` field (e.g. ``k_m: 1.8e-7``,
    ``inertia_kgm2: [0.01, 0.01, 0.02]``); ``rotor_params()`` builds them.
    rotor_control: the rotor airframe's onboard controller gains (``RotorControlParams`` fields:
    ``attitude_gain``, ``yaw_gain``, ``speed_gain``, ``lookahead_ticks``, ``rate_gain_per_s``; default the
    documented ones, docs/ROTOR.md); ``rotor_control_params()`` builds them.
    rotor_loss_failsafe: what a vehicle does when a ``rotor_loss`` fault starts, one of
    ROTOR_LOSS_FAILSAFES: ``none`` (default: it flies on with the rotor lost) or ``emergency_land``
    (ireland_2016's emergency landing controller, ``vehicles.emergency_land``; docs/FAULTS.md).
    battery: the battery pack, its power model and the low-battery failsafe (``energy.BatterySettings``;
    on by default, ``on: false`` flies QRSim's open loop).
    """

    control: str | tuple[str, ...] | None = None
    airframe: str | tuple[str, ...] = "pelican"
    rotor: dict[str, Any] = field(default_factory=dict)
    rotor_control: dict[str, Any] = field(default_factory=dict)
    dyn_noise: tuple[float, float, float, float, float, float] = (0.2,) * 6
    mass_kg: float = 1.68
    collision_distance_m: float = 2.0
    rate_limit_rads: float = 3.0
    velocity_limit_mps: float = 15.0
    initial_states: tuple[tuple[float, ...], ...] | None = None
    command_timeout_s: float = 0.5
    failsafe: str = "hold"
    failsafe_land_rate_m_s: float = 0.5
    rotor_loss_failsafe: str = "none"
    ahars: AharsParams = field(default_factory=AharsParams)
    gps_receiver: GpsReceiverParams = field(default_factory=GpsReceiverParams)
    turbulence: TurbulenceParams = field(default_factory=TurbulenceParams)
    camera: CameraParams = field(default_factory=lambda: CameraParams(on=False))
    plume_sensor: PlumeSensorParams = field(default_factory=PlumeSensorParams)
    battery: BatterySettings = field(default_factory=BatterySettings)
    #: Registered sensor models (``core.sensors.registry``) this scenario flies, by name: their
    #: parameters (a section per sensor; present = on board).
    sensors: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        modes = (self.control,) if isinstance(self.control, str) else (self.control or ())
        for m in modes:
            if m not in CONTROL_MODES:
                raise ConfigError(f"vehicle.control={m!r} must be one of {', '.join(CONTROL_MODES)}")
        frames = (self.airframe,) if isinstance(self.airframe, str) else self.airframe
        if not frames:
            raise ConfigError("vehicle.airframe=[] must name an airframe (one of "
                              f"{', '.join(AIRFRAMES)}) or one per vehicle")
        for a in frames:
            if a not in AIRFRAMES:
                raise ConfigError(f"vehicle.airframe={a!r} must be one of {', '.join(AIRFRAMES)}")
        self.rotor_params()  # validates vehicle.rotor
        self.rotor_control_params()  # validates vehicle.rotor_control
        non_negative("vehicle.dyn_noise", self.dyn_noise)
        in_range("vehicle.mass_kg", self.mass_kg, 0.1, 100.0)
        non_negative("vehicle.collision_distance_m", self.collision_distance_m)
        in_range("vehicle.rate_limit_rads", self.rate_limit_rads, 0.1, 100.0)
        in_range("vehicle.velocity_limit_mps", self.velocity_limit_mps, 0.1, 1000.0)
        in_range("vehicle.command_timeout_s", self.command_timeout_s, 0.0, LIMITS["command_timeout_s"].hi)
        if self.failsafe not in FAILSAFES:
            raise ConfigError(f"vehicle.failsafe={self.failsafe!r} must be one of {', '.join(FAILSAFES)}")
        in_range("vehicle.failsafe_land_rate_m_s", self.failsafe_land_rate_m_s, 0.1, 3.0)
        if self.rotor_loss_failsafe not in ROTOR_LOSS_FAILSAFES:
            raise ConfigError(f"vehicle.rotor_loss_failsafe={self.rotor_loss_failsafe!r} must be one of "
                              f"{', '.join(ROTOR_LOSS_FAILSAFES)}")
        for i, row in enumerate(self.initial_states or ()):
            if len(row) not in (6, 12, 13):
                raise ConfigError(f"vehicle.initial_states[{i}] has {len(row)} values; a state has 6 "
                                  "(position, Euler angles), 12 (+ body velocity and rates) or 13 (+ thrust)")

    def rotor_params(self) -> RotorParams:
        """The rotor airframe's parameters: ``vehicle.rotor``'s preset with its overrides. ConfigError
        naming ``vehicle.rotor.<key>`` for an unknown preset or key, or a bad value."""
        section = dict(self.rotor)
        preset = section.pop("preset", "pelican")
        if not isinstance(preset, str) or preset not in PRESETS:
            raise ConfigError(f"vehicle.rotor.preset={preset!r} must be one of {', '.join(PRESETS)}")
        try:
            return rotor_preset(preset, **section)
        except ConfigError as exc:
            text = str(exc)
            raise ConfigError(f"vehicle.{text}" if text.startswith("rotor") else f"vehicle.rotor: {text}"
                              ) from None
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"vehicle.rotor: {exc}") from None

    def rotor_control_params(self) -> RotorControlParams:
        """The rotor airframe's controller gains (``vehicle.rotor_control``); ConfigError naming
        ``vehicle.rotor_control.<key>`` for an unknown key or a bad value."""
        allowed = [f.name for f in fields(RotorControlParams)]
        unknown = sorted(set(self.rotor_control) - set(allowed))
        if unknown:
            raise ConfigError(f"vehicle.rotor_control: unknown key(s) {unknown} "
                              f"(allowed: {', '.join(allowed)})")
        try:
            return RotorControlParams(**self.rotor_control)
        except ConfigError as exc:
            raise ConfigError(f"vehicle.{exc}") from None
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"vehicle.rotor_control: {exc}") from None


@dataclass(frozen=True)
class Scenario:
    """A complete, validated scenario (one YAML file plus overrides)."""

    name: str = "scenario"
    description: str = ""
    seed: int = 0
    num_vehicles: int = 1
    origin: GeodeticOrigin = QRSIM_ORIGIN
    task: TaskParams = field(default_factory=TaskParams)
    area: AreaParams = field(default_factory=AreaParams)
    plume: PlumeParams | None = None
    wind: MeanWindParams = field(default_factory=lambda: MeanWindParams(on=False))
    gps: GpsSpaceSegmentParams = field(default_factory=GpsSpaceSegmentParams)
    vehicle: VehicleParams = field(default_factory=VehicleParams)
    #: The 3-D scene (ground shape, person bodies, obstacles) for the scene sensors; None: QRSim's world
    #: (a flat area; nothing is built and nothing is checked).
    scene: SceneParams | None = None
    #: Charging stations (``energy.ChargingBase``: NED position and radius); a vehicle resting on one
    #: charges its battery.
    bases: tuple[ChargingBase, ...] = ()
    #: The top-level ``faults:`` list (docs/FAULTS.md), parsed by ``parse_faults`` against the fleet's
    #: size; empty: no faults (the Simulator then builds no fault schedule at all).
    faults: tuple[FaultSpec, ...] = ()
    #: The search-and-retrieve world and mission (``task.type: retrieve``; docs/RETRIEVE.md).
    retrieve: RetrieveParams | None = None
    #: The vehicles' radio (``core.comms``, docs/COMMS.md); off unless ``comms.on``.
    comms: CommsParams = field(default_factory=CommsParams)
    #: Every vehicle flown by its onboard autopilot and reached on MAVLink (``core.onboard``,
    #: docs/MAVLINK.md); off unless ``mavlink.on``.
    mavlink: MavlinkParams = field(default_factory=MavlinkParams)
    source: str = "<defaults>"

    def __post_init__(self) -> None:
        if self.seed < SEED_FROM_CLOCK:
            raise ConfigError(f"seed={self.seed!r} must be >= 0 (0 = from the clock)")
        LIMITS["scenario_num_vehicles"].check(self.num_vehicles, "num_vehicles")
        if self.task.type == "plume" and self.plume is None:
            raise ConfigError("a plume task needs a 'plume' section")
        if self.task.type == "retrieve" and self.retrieve is None:
            raise ConfigError("a retrieve task needs a 'retrieve' section")
        if self.task.type == "search_rescue" and self.area.type != "box_with_persons":
            raise ConfigError("search_rescue needs area.type: box_with_persons")
        if self.task.placement == "base":
            self._check_base_placement()
        if self.task.type == "cats_mouse" and self.num_vehicles != self.task.num_cats + 1:
            raise ConfigError(f"num_vehicles={self.num_vehicles} must be task.num_cats + 1 = "
                              f"{self.task.num_cats + 1} for cats_mouse (the cats and the mouse)")
        for i, (mode, airframe) in enumerate(zip(self.control_modes(), self.airframes(), strict=False)):
            if mode in LOW_LEVEL_MODES and airframe != "rotor":
                raise ConfigError(f"vehicle.control: vehicle {i} flies {mode!r}, a rotor-level input; its "
                                  f"vehicle.airframe must be 'rotor', not {airframe!r}")
        if self.task.type == "cats_mouse" and self.control_modes()[-1] != "velocity_height":
            raise ConfigError(f"vehicle.control: the mouse (vehicle {self.num_vehicles - 1}) is flown by the "
                              "task with north/east velocities: its mode must be velocity_height")
        if (self.task.type == "plume" and self.plume is not None and self.plume.type != "gaussian"
                and not (self.wind.on and self.wind.w6_mps > 0)):
            raise ConfigError(f"plume.type={self.plume.type!r} is carried by the mean wind: it needs "
                              "wind.on: true and wind.w6_mps > 0")
        if isinstance(self.vehicle.control, tuple) and len(self.vehicle.control) != self.num_vehicles:
            raise ConfigError(f"vehicle.control lists {len(self.vehicle.control)} modes for "
                              f"{self.num_vehicles} vehicles")
        if isinstance(self.vehicle.airframe, tuple) and len(self.vehicle.airframe) != self.num_vehicles:
            raise ConfigError(f"vehicle.airframe lists {len(self.vehicle.airframe)} airframes for "
                              f"{self.num_vehicles} vehicles")
        states = self.vehicle.initial_states
        if states is not None and len(states) != self.num_vehicles:
            raise ConfigError(
                f"vehicle.initial_states has {len(states)} rows for {self.num_vehicles} vehicles")
        finite("origin.alt_m", self.origin.alt_m)
        if self.mavlink.on:
            flown = self.control_modes()[:-1] if self.task.type == "cats_mouse" else self.control_modes()
            other = ", ".join(map(repr, sorted(set(flown) - {"velocity"})))
            if other:
                raise ConfigError(f"mavlink.on: the onboard autopilots fly velocity set points; "
                                  f"vehicle.control must be velocity (or unset), not {other}")

    def _check_base_placement(self) -> None:
        """``task.placement: base``: search and rescue, a charging base, the grid inside the area and, with
        generated obstacles, inside their keep-out circle around the base."""
        if self.task.type != "search_rescue":
            raise ConfigError(f"task.placement: base is for search_rescue, not {self.task.type!r}")
        if not self.bases:
            raise ConfigError("task.placement: base needs a charging base (bases: [{position_ned_m: ...}])")
        base = self.bases[0].position_ned_m
        grid = base_grid_ne(base[:2], self.num_vehicles, self.task.base_spacing_m)
        lim = self.area_limits_ned
        if grid[:, 0].min() < lim[0] or grid[:, 0].max() > lim[1] or grid[:, 1].min() < lim[2] \
                or grid[:, 1].max() > lim[3]:
            raise ConfigError(f"task.placement: base: {self.num_vehicles} vehicles "
                              f"{self.task.base_spacing_m:g} m apart around bases[0] {list(base[:2])} leave "
                              f"the area {list(lim[:4])}")
        gen = self.scene.generate if self.scene is not None else None
        if gen is not None and gen.count > 0 and gen.keep_out_ne_m is None:
            reach = float(np.max(np.hypot(*(grid - np.asarray(base[:2])).T)))
            if reach + self.scene.vehicle_radius_m > gen.keep_out_m:  # type: ignore[union-attr]
                raise ConfigError(
                    f"task.placement: base: the grid of {self.num_vehicles} vehicles reaches {reach:.1f} m "
                    f"from the base, beyond scene.generate.keep_out_m={gen.keep_out_m:g} (minus the vehicle "
                    "radius): obstacles could stand on a start; raise keep_out_m or lower base_spacing_m")

    # --- derived ------------------------------------------------------------------------------
    @property
    def area_limits_ned(self) -> tuple[float, ...]:
        """The area limits, with the task's default when the file gives none."""
        if self.area.limits_ned is not None:
            return tuple(self.area.limits_ned)
        if self.task.type == "search_rescue":
            d = math.sqrt(200 * 25 * 3 * self.num_vehicles)
            return (-d, d, -d, d, -80.0, 0.0)
        if self.task.type == "plume":
            return (-140.0, 140.0, -140.0, 140.0, -80.0, 0.0)
        if self.task.type == "cats_mouse":
            return (-140.0, 140.0, -140.0, 140.0, -40.0, 0.0)
        if self.task.type == "keep_spot_x10":
            return (-120.0, 120.0, -10.0, 10.0, -40.0, 0.0)
        if self.task.type == "goto_waypoint":
            return (-70.0, 70.0, -70.0, 70.0, -50.0, 0.0)
        return (-10.0, 20.0, -10.0, 10.0, -20.0, 0.0)

    @property
    def ground_z_ned_m(self) -> float:
        return float(self.area_limits_ned[5])

    @property
    def still_air(self) -> bool:
        """No mean wind and no turbulence: every vehicle's air velocity is zero, every tick (the Simulator
        makes it once; the graph's vehicle_dynamics then neither reads nor awaits ``uavN/wind``)."""
        return not self.wind.on and not self.vehicle.turbulence.on

    def persons_area_params(self) -> PersonsAreaParams:
        """The persons area's parameters (search and rescue)."""
        return self.area.persons_area_params(self.area_limits_ned, self.origin)

    def control_modes(self) -> tuple[str, ...]:
        """The control mode of every vehicle."""
        c = self.vehicle.control
        if c is None and self.mavlink.on:  # the autopilots fly velocity set points (the mouse: its own)
            mouse = ("velocity_height",) if self.task.type == "cats_mouse" else ()
            return ("velocity",) * (self.num_vehicles - len(mouse)) + mouse
        if c is None:
            c = {"search_rescue": "velocity", "plume": "velocity", "cats_mouse": "velocity_height"}.get(
                self.task.type, "attitude")
        return (c,) * self.num_vehicles if isinstance(c, str) else tuple(c)

    def airframes(self) -> tuple[str, ...]:
        """The airframe of every vehicle (``vehicle.airframe``, one of AIRFRAMES each)."""
        a = self.vehicle.airframe
        return (a,) * self.num_vehicles if isinstance(a, str) else tuple(a)


def run_overrides(seed: int = SEED_FROM_FILE, num_vehicles: int = 0, mavlink: bool = False) -> dict[str, Any]:
    """The scenario overrides of a run's ``seed``, ``num_vehicles`` and ``mavlink`` (as ``load_scenario``
    takes them): ``SEED_FROM_FILE``, 0 vehicles and ``mavlink`` False keep the file's values; any other
    seed (0, the clock, included) is passed on as it is; ``mavlink`` True sets ``mavlink.on``."""
    overrides: dict[str, Any] = {}
    if seed != SEED_FROM_FILE:
        overrides["seed"] = int(seed)
    if num_vehicles > 0:
        overrides["num_vehicles"] = int(num_vehicles)
    if mavlink:
        overrides["mavlink"] = {"on": True}
    return overrides


def check_seed(value: Any, name: str = "seed") -> int:
    """A requested seed, validated: an integer in [SEED_FROM_FILE, MAX_SEED] (see the module docstring).

    Raises ConfigError naming ``name``, the value and the allowed range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not SEED_FROM_FILE <= value <= MAX_SEED:
        raise ConfigError(f"{name}={value!r} must be an integer in [{SEED_FROM_FILE}, {MAX_SEED}] "
                          f"({SEED_HELP})")
    return int(value)


def clock_seed() -> int:
    """A seed from the clock (OS entropy), in [1, MAX_SEED]."""
    return secrets.randbelow(MAX_SEED) + 1


def resolve_seed(requested: int | None, file_seed: int) -> int:
    """The concrete seed to build with (>= 1 unless the file's own seed is used as is).

    ``requested``: ``SEED_FROM_FILE`` (-1, or None) takes ``file_seed``, ``SEED_FROM_CLOCK`` (0) draws
    one from the clock, 1..MAX_SEED is used as given. A clock seed (requested, or the file's 0) is drawn
    here, once: the caller prints or passes on the result so the run can be repeated. Raises ConfigError
    for a requested value outside [-1, MAX_SEED] or a negative ``file_seed``.
    """
    seed = SEED_FROM_FILE if requested is None else check_seed(requested)
    if seed == SEED_FROM_FILE:
        if isinstance(file_seed, bool) or not isinstance(file_seed, (int, np.integer)) or file_seed < 0:
            raise ConfigError(f"the scenario file's seed={file_seed!r} must be an integer >= 0 "
                              "(0 = from the clock)")
        seed = int(file_seed)
    return clock_seed() if seed == SEED_FROM_CLOCK else seed


def config_dirs() -> list[Path]:
    """Where scenario files are looked up by name, in order."""
    dirs = []
    if os.environ.get("QRSIM_CONFIG_DIR"):
        dirs.append(Path(os.environ["QRSIM_CONFIG_DIR"]))
    here = Path(__file__).resolve()
    dirs.append(here.parents[3] / "config")  # source tree (also through colcon's symlinks)
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            dirs.append(Path(prefix) / "share" / "qrsim_ros" / "config")
    dirs.append(Path(sys.prefix) / "share" / "qrsim_ros" / "config")  # pip install
    return dirs


def scenario_path(name_or_path: str | os.PathLike[str]) -> Path:
    """Resolve a scenario name (``search_rescue_2a``) or path to its YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.is_file():
            raise ScenarioError(f"{p}: scenario file not found")
        return p
    for d in config_dirs():
        candidate = d / f"{p.name}.yaml"
        if candidate.is_file():
            return candidate
    available = ", ".join(available_scenarios())
    raise ScenarioError(f"unknown scenario {str(name_or_path)!r}; available: {available}")


def available_scenarios() -> list[str]:
    """Names of the scenario files found in config_dirs()."""
    names: set[str] = set()
    for d in config_dirs():
        if d.is_dir():
            names.update(p.stem for p in d.glob("*.yaml") if _is_scenario_file(p))
    return sorted(names)


def _is_scenario_file(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            data = load_yaml(f)
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, Mapping) and "task" in data


def load_scenario(
    name_or_path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None
) -> Scenario:
    """Load, merge ``overrides`` into, and validate a scenario; errors name the file and key path."""
    path = scenario_path(name_or_path)
    try:
        with path.open(encoding="utf-8") as f:
            data = load_yaml(f)
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = "refused" if isinstance(exc, YamlLimitError) else "malformed YAML"
        raise ScenarioError(f"{path}:{where}: {what}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{path}: a scenario file must be a mapping of sections")
    data = merge(data, overrides)
    data.setdefault("name", path.stem)
    return scenario_from_mapping(data, str(path))


def scenario_from_mapping(data: Mapping[str, Any], source: str = "<mapping>") -> Scenario:
    """Validate a scenario given as a nested mapping (the YAML's content)."""
    data = dict(data)
    data["source"] = source
    raw_faults = data.pop("faults", None)
    scenario = build(Scenario, data, f"{source}:")
    try:  # after the build: the vehicle indices are checked against the fleet's size
        faults = parse_faults(raw_faults, num_vehicles=scenario.num_vehicles)
    except ConfigError as exc:  # names the key path, e.g. faults[0].rotor
        raise ScenarioError(f"{source}: {exc}") from None
    # The ground plane is the area's zmax: wind shear, turbulence and the altimeter measure from it.
    ground = scenario.ground_z_ned_m
    v = scenario.vehicle
    return replace(
        scenario,
        faults=faults,
        wind=replace(scenario.wind, z_origin_m=ground),
        vehicle=replace(
            v,
            turbulence=replace(v.turbulence, z_origin_m=ground),
            ahars=replace(v.ahars, altimeter=replace(v.ahars.altimeter, ground_z_ned_m=ground)),
            sensors=_registered_sensors(v.sensors, ground, source),
        ),
    )


def _registered_sensors(sections: Mapping[str, Any], ground_z_ned_m: float, source: str) -> dict[str, Any]:
    """``vehicle.sensors``: each section validated onto its registered parameters (``core.sensors.registry``);
    a ``ground_z_ned_m`` parameter takes the scenario's ground plane."""
    out: dict[str, Any] = {}
    for name, section in sections.items():
        where = f"{source}: vehicle.sensors.{name}"
        registration = SENSORS.get(str(name))
        if registration is None:
            known = ", ".join(sorted(SENSORS)) or "none"
            raise ScenarioError(f"{where}: unknown sensor (registered: {known})")
        params = build(registration.params_type, {} if section is None else section, where)
        if any(f.name == "ground_z_ned_m" for f in fields(params)):
            params = replace(params, ground_z_ned_m=ground_z_ned_m)
        out[str(name)] = params
    for name in out:
        check = SENSORS[name].check_scenario
        if check is not None:
            try:
                check(out)
            except ConfigError as exc:
                raise ScenarioError(f"{source}: vehicle.sensors.{name}: {exc}") from None
    return out
