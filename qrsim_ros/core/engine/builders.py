"""Builders: every model of a scenario made from the typed scenario, identically in every process.

The in-process Simulator builds all of them, each ROS node the one it wraps, with the same named
random streams (``RandomStreams(seed)``), so a lockstep graph reproduces the Simulator.

``build_fleet(scenario, streams)``: the fleet (``vehicles.airframes.Airframes``: ``PelicanFleet``'s interface,
each vehicle flown on its ``vehicle.airframe``, the identified Pelican or the rotor-level airframe of
``vehicle.rotor``) with the scenario's vehicle parameters (mass, state limits from the area and the
rate/velocity limits, collision distance, dynamic noise) and one dynamic-noise stream per vehicle,
``streams.per_vehicle("pelican.dynamics", N)``: the Simulator and the vehicle_dynamics node both build their
fleet here, so a lockstep ROS run integrates exactly the Simulator's noise.

The plume (spec 4.4, 5.4):

The in-process ``Simulator`` and the ROS nodes (``plume_field``, and the referee for the reward) each
hold their own copy of the task's plume. They agree because they build it with this one function from
the same scenario, the same mean-wind draw and the same named random streams:

    rng = ContinuingStreams(RandomStreams(seed))      # once, kept across episodes
    wind = MeanWind.from_params(scenario.wind, RandomStreams(seed)); wind.reset()   # per episode
    world = build_scenario_plume(scenario, *plume_wind(wind), rng)                  # per episode

Frames and units: NED [m] in the flight-area frame, seconds of simulated time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.comms.radio import Radio
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import Scenario
from qrsim_ros.core.sensors.ahars import Ahars
from qrsim_ros.core.sensors.camera import CameraWithClassifier
from qrsim_ros.core.sensors.gps import GpsReceiver, GpsSpaceSegment
from qrsim_ros.core.sensors.plume_sensor import PlumeSensor
from qrsim_ros.core.sensors.registry import SENSORS, SensorModel
from qrsim_ros.core.vehicles.airframes import Airframes
from qrsim_ros.core.vehicles.fleet import DYNAMICS_STREAM, state_limits
from qrsim_ros.core.vehicles.pelican import STATE_NORTH_EAST, PelicanParams
from qrsim_ros.core.world.area import BoxArea, BoxWithPersonsArea
from qrsim_ros.core.world.plume import GaussianDispersionPlume, GaussianPlume, GaussianPuffPlume
from qrsim_ros.core.world.scene import Scene
from qrsim_ros.core.world.turbulence import DrydenTurbulence
from qrsim_ros.core.world.wind import MeanWind

#: Height at which QRSim evaluates the mean wind for the plume models [m] (spec 4.4).
PLUME_WIND_HEIGHT_M = 6.0

PlumeModel = GaussianPlume | GaussianDispersionPlume | GaussianPuffPlume


class ContinuingStreams(RandomStreams):
    """The scenario's named streams, each created once and then continued.

    The plume models take a RandomStreams and ask it for their named streams at every plume reset;
    a plain RandomStreams would hand out a fresh generator each time, so every episode would redraw
    the same plume. This keeps each stream's generator, so episodes differ (the first one is the same
    as with a plain RandomStreams of the same seed).
    """

    def __init__(self, streams: RandomStreams) -> None:
        super().__init__(streams.entropy)
        self._generators: dict[tuple[str, int], np.random.Generator] = {}

    def get(self, name: str, vehicle: int = 0) -> np.random.Generator:
        key = (name, int(vehicle))
        if key not in self._generators:
            self._generators[key] = super().get(name, vehicle)
        return self._generators[key]


@dataclass(frozen=True, eq=False)
class ScenarioPlume:
    """One episode's plume: the model, the M reference locations (M, 3) NED [m] and the reference
    samples (K, M) the plume task's reward compares against (empty when not computed)."""

    plume: PlumeModel
    locations_ned: Array
    reference_samples: Array


def plume_wind(wind: MeanWind) -> tuple[float, float]:
    """(speed [m/s], direction the wind blows FROM [rad]) of the mean wind at the plume height (6 m)."""
    return wind.speed_and_direction_at(PLUME_WIND_HEIGHT_M)


def build_scenario_plume(scenario: Scenario, wind_speed_mps: float, wind_direction_rad: float,
                         rng: RandomStreams, *, reference: bool = True) -> ScenarioPlume:
    """Draw the plume of a plume scenario as QRSim's area reset does (spec 4.4, tasks 3A-3G).

    ``rng``: the scenario's streams, normally a ``ContinuingStreams`` kept across episodes (every
    purpose has its own named stream: ``plume_area.reset``, ``.emissions``, ``.locations``,
    ``.reference``). ``reference=False`` skips the reference locations and samples (a node that only
    needs the concentration field); since they draw from their own streams, skipping them does not
    change the plumes of later episodes.
    """
    p = scenario.plume
    if p is None:
        raise ValueError(f"scenario {scenario.name!r} has no plume section")
    limits = scenario.area_limits_ned
    speed, direction = wind_speed_mps, wind_direction_rad
    plume: PlumeModel
    if p.type == "gaussian":
        plume = GaussianPlume.sample(rng, limits, sigma_range_m=p.sigma_range_m)
        if p.sources_ned is not None:  # fixed source (and peak): the spreads and yaw stay drawn
            q0 = p.emission_rates[0] if p.emission_rates is not None else plume.q0
            plume = GaussianPlume(p.sources_ned[0], plume.sigmas_m, plume.yaw_rad, q0,
                                  area_limits_ned=limits)
    elif p.sources_ned is not None:
        if p.type == "gaussian_dispersion":
            plume = GaussianDispersionPlume(np.asarray(p.sources_ned), np.asarray(p.emission_rates),
                                            speed, direction, p.a, p.b, area_limits_ned=limits)
        else:
            plume = GaussianPuffPlume(np.asarray(p.sources_ned), speed, direction, p.a, p.b, p.mu_s,
                                      p.q_range, area_limits_ned=limits, rng=rng, area_dt_s=p.area_dt_s)
    elif p.type == "gaussian_dispersion":
        plume = GaussianDispersionPlume.sample(
            rng, limits, wind_speed_mps=speed, wind_direction_rad=direction,
            num_sources_range=p.num_sources_range, q_range=p.q_range, a=p.a, b=p.b)
    else:
        plume = GaussianPuffPlume.sample(
            rng, limits, wind_speed_mps=speed, wind_direction_rad=direction,
            num_sources_range=p.num_sources_range, q_range=p.q_range, a=p.a, b=p.b, mu_s=p.mu_s,
            area_dt_s=p.area_dt_s)
    if not reference:
        return ScenarioPlume(plume, np.zeros((0, 3)), np.zeros((0, 0)))
    m, k = scenario.task.num_reference_locations, scenario.task.samples_per_location
    locations = plume.reference_locations(m, rng)
    if isinstance(plume, GaussianPuffPlume):
        samples = plume.reference_samples(locations, k, rng)
    else:
        samples = plume.reference_samples(locations)
    return ScenarioPlume(plume, locations, samples)


# --- the fleet ---------------------------------------------------------------------------------

def fleet_params(scenario: Scenario) -> PelicanParams:
    """The scenario's ``PelicanParams`` (``vehicle`` section and area limits)."""
    v = scenario.vehicle
    return PelicanParams(
        mass_kg=v.mass_kg,
        state_limits=state_limits(scenario.area_limits_ned, v.rate_limit_rads, v.velocity_limit_mps),
        collision_distance_m=v.collision_distance_m,
        dyn_noise=np.asarray(v.dyn_noise, float),
    )


def build_fleet(scenario: Scenario, streams: RandomStreams) -> Airframes:
    """The scenario's fleet with its dynamic-noise streams (see the module docstring); vehicles unplaced.
    A fleet of Pelicans only steps exactly as a bare ``PelicanFleet``."""
    n = scenario.num_vehicles
    return Airframes(scenario.airframes(), fleet_params(scenario), streams.per_vehicle(DYNAMICS_STREAM, n),
                     rotor_params=scenario.vehicle.rotor_params(),
                     rotor_gains=scenario.vehicle.rotor_control_params(),
                     ground_z_ned_m=scenario.ground_z_ned_m, ground_rest=scenario.mavlink.on)


# --- the world ---------------------------------------------------------------------------------

def build_area(scenario: Scenario, streams: RandomStreams) -> BoxArea:
    """The flight area: ``BoxWithPersonsArea`` (terrain and persons, search and rescue) or ``BoxArea``."""
    if scenario.area.type == "box_with_persons":
        return BoxWithPersonsArea(scenario.num_vehicles, scenario.persons_area_params(), streams)
    return BoxArea(scenario.area_limits_ned, scenario.origin)


def build_mean_wind(scenario: Scenario, streams: RandomStreams) -> MeanWind:
    """The mean wind field (shared by every vehicle)."""
    return MeanWind.from_params(scenario.wind, streams)


def build_turbulence(scenario: Scenario, streams: RandomStreams) -> DrydenTurbulence:
    """Dryden turbulence, one filter per vehicle."""
    return DrydenTurbulence(scenario.num_vehicles, scenario.vehicle.turbulence, streams)


# --- the sensors -------------------------------------------------------------------------------

def build_ahars(scenario: Scenario, streams: RandomStreams) -> Ahars:
    """Accelerometer, gyroscope, orientation estimator and altimeter of every vehicle."""
    return Ahars(scenario.num_vehicles, scenario.vehicle.ahars, streams)


def build_gps(scenario: Scenario, streams: RandomStreams) -> tuple[GpsSpaceSegment, GpsReceiver]:
    """The GPS space segment (shared) and every vehicle's receiver."""
    space = GpsSpaceSegment(scenario.gps, streams)
    receiver = GpsReceiver(scenario.num_vehicles, space, scenario.vehicle.gps_receiver, streams,
                           origin=scenario.origin)
    return space, receiver


def has_camera(scenario: Scenario) -> bool:
    """Whether the scenario flies the camera with person classifier (search and rescue, camera on)."""
    return scenario.vehicle.camera.on and scenario.task.type == "search_rescue"


def build_camera(scenario: Scenario, streams: RandomStreams) -> CameraWithClassifier | None:
    """Every vehicle's camera with person classifier (sized for the area's persons), or None."""
    if not has_camera(scenario):
        return None
    params = replace(scenario.vehicle.camera, person_size_m=scenario.area.person_size_m)
    return CameraWithClassifier(scenario.num_vehicles, params, streams)


def build_plume_sensor(scenario: Scenario, streams: RandomStreams) -> PlumeSensor | None:
    """Every vehicle's plume sensor (plume tasks), or None."""
    if scenario.task.type != "plume":
        return None
    return PlumeSensor(scenario.num_vehicles, scenario.vehicle.plume_sensor, streams)


def build_registered_sensor(scenario: Scenario, name: str, streams: RandomStreams,
                            scene: Scene | None = None) -> SensorModel:
    """The registered sensor ``name`` (``core.sensors.registry``) with the scenario's parameters for it;
    a sensor that looks at the 3-D scene (``uses_scene``) is given ``scene``."""
    params = scenario.vehicle.sensors[name]
    registration = SENSORS[name]
    if not registration.uses_scene:
        return registration.build(params, scenario.num_vehicles, streams)
    if scene is None:
        raise ScenarioError(f"{scenario.source}: vehicle.sensors.{name} looks at the 3-D scene: the scenario "
                            "needs a 'scene' section")
    return registration.build(params, scenario.num_vehicles, streams, scene)


def step_registered_sensor(name: str, model: SensorModel, k: int, x: Array, valid: Array,
                           specific_force: Array | None) -> bool:
    """Step a registered sensor on tick k's ground truth (with the specific force if it reads it)."""
    if SENSORS[name].reads_specific_force:
        return bool(model.step(k, x, valid, specific_force=specific_force))  # type: ignore[call-arg]
    return bool(model.step(k, x, valid))


def build_scene(scenario: Scenario, streams: RandomStreams) -> Scene | None:
    """The scenario's 3-D scene (``scene`` section; None without one). Generated obstacles keep clear of
    the vehicles' listed initial positions, else of their base (``task.placement: base``), else of the
    origin and the area's centre."""
    params = scenario.scene
    if params is None:
        return None
    lim = scenario.area_limits_ned
    if scenario.task.placement == "base" and scenario.vehicle.initial_states is None:
        keep = np.array([scenario.bases[0].position_ned_m[:2]], float)
    elif scenario.vehicle.initial_states is not None:
        keep = np.array([row[STATE_NORTH_EAST] for row in scenario.vehicle.initial_states], float)
    else:
        keep = np.array([[0.0, 0.0], [0.5 * (lim[0] + lim[1]), 0.5 * (lim[2] + lim[3])]])
    source = Path(scenario.source)
    base_dir = source.parent if source.suffix in (".yaml", ".yml") else None
    try:
        return Scene(params, lim, scenario.ground_z_ned_m, streams, keep_out_ne=keep, base_dir=base_dir)
    except ConfigError as exc:
        raise ScenarioError(f"{scenario.source}: scene: {exc}") from None


# --- the radio ---------------------------------------------------------------------------------

def build_comms(scenario: Scenario, streams: RandomStreams, scene: Scene | None = None) -> Radio | None:
    """The vehicles' radio (``comms`` section, docs/COMMS.md) with its loss stream, or None when it is off;
    ``scene``: the solids that block a link (line of sight), None: nothing blocks."""
    if not scenario.comms.on:
        return None
    return Radio(scenario.num_vehicles, scenario.comms, streams, scene)
