"""The scenario's shared world, redrawn at every episode start: the flight area (terrain classes and
persons), the task's plume (spec 1.3, 4.3, 4.4) and the 3-D scene's person bodies (``core.world.scene``;
its ground and obstacles are drawn once).

The one place where an episode's world is reset, used by the in-process ``Simulator`` and by the ROS
nodes that need a copy of it (the referee, camera_detector, plume_field). Every copy is built from the
same scenario and the same named random streams and redrawn once per episode, continuing the streams,
so all of them hold the same persons and the same plume, episode after episode, without a topic to
wait for.
"""

from __future__ import annotations

import numpy as np

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.config.scenario import Scenario
from qrsim_ros.core.engine.builders import (
    ContinuingStreams,
    PlumeModel,
    build_area,
    build_scenario_plume,
    build_scene,
    plume_wind,
)
from qrsim_ros.core.world.area import BoxArea, BoxWithPersonsArea
from qrsim_ros.core.world.scene import Scene
from qrsim_ros.core.world.wind import MeanWind


class ScenarioWorld:
    """Area and plume of a scenario, redrawn per episode (see the module docstring).

    ``wind``: the mean wind the plume is drawn in; the owner's (the Simulator resets its own wind at
    every episode start, before ``new_episode``), else one of the world's own, reset here. ``area`` /
    ``plume``: build them (a node that needs only one skips the other: each draws from its own
    streams, so leaving one out changes nothing in the other). ``plume_reference``: also draw the plume
    task's reference locations and samples. ``scene``: build the scenario's 3-D scene (if it has one;
    it needs the area for its persons).
    """

    def __init__(self, scenario: Scenario, streams: RandomStreams, *, wind: MeanWind | None = None,
                 area: bool = True, plume: bool = True, plume_reference: bool = True,
                 scene: bool = True) -> None:
        self.scenario = scenario
        with_scene = scene and scenario.scene is not None
        self.area: BoxArea | None = build_area(scenario, streams) if area or with_scene else None
        self.scene: Scene | None = build_scene(scenario, streams) if with_scene else None
        if self.scene is not None and isinstance(self.area, BoxWithPersonsArea):
            self.scene.terrain = self.area.terrain  # the cameras texture the ground with its classes
        self._has_plume = plume and scenario.task.type == "plume"
        self._owns_wind = wind is None
        self.wind = wind if wind is not None else (MeanWind.from_params(scenario.wind, streams)
                                                   if self._has_plume else None)
        self._plume_reference = plume_reference
        self._plume_rng = ContinuingStreams(streams)
        self.plume: PlumeModel | None = None
        self.plume_locations_ned: Array = np.zeros((0, 3))
        self.plume_reference_samples: Array = np.zeros((0, 0))
        self.episodes = 0

    @property
    def persons_area(self) -> BoxWithPersonsArea | None:
        """The area with persons (search and rescue), else None."""
        return self.area if isinstance(self.area, BoxWithPersonsArea) else None

    def new_episode(self) -> None:
        """Draw the next episode's terrain, persons and plume (continuing every stream)."""
        sc = self.scenario
        if self.area is not None:
            self.area.reset()
            if isinstance(self.area, BoxWithPersonsArea) and sc.area.persons_ned is not None:
                self.area.set_persons(np.asarray(sc.area.persons_ned, float))
        if self.scene is not None:
            persons = self.persons_area
            self.scene.set_persons(persons.persons_position_ned if persons is not None else np.zeros((0, 3)))
        if self._has_plume:
            assert self.wind is not None
            if self._owns_wind:
                self.wind.reset()
            world = build_scenario_plume(sc, *plume_wind(self.wind), self._plume_rng,
                                         reference=self._plume_reference)
            self.plume = world.plume
            self.plume_locations_ned = world.locations_ned
            self.plume_reference_samples = world.reference_samples
        self.episodes += 1
