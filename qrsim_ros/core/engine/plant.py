"""The plant's tick: the one place the vehicles' physics is stepped, for both front ends.

The in-process ``Simulator`` and the graph's ``vehicle_dynamics`` node each hold a ``Plant`` built on
their airframes, batteries, faults and scene, and advance it one 20 ms tick at a time with
``Plant.tick(k, inputs)``. The order is fixed here (spec 2.7, extended by the battery and fault models;
docs/FAULTS.md "Where in the tick"):

1. the fault schedule steps to tick ``k`` (what started and ended acts from this tick on);
2. ``inputs(events)``: the front end's control rows (N, 5), air velocity in body FRD (N, 3) and the
   rotor-level inputs of the tick, from its own set points, modes and failsafes (its business);
3. the batteries apply pack voltage and motor supply to the controls (an empty pack: motors off);
4. rotor faults add their yaw disturbance to what the airframes fly (the commanded controls are kept);
5. the airframes integrate the tick;
6. the scene's solid obstacles invalidate every vehicle inside one (``CRASH_REASON``, as the area
   bounds do);
7. the batteries discharge under the power the airframes drew in their new state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.faults import FaultEvents
from qrsim_ros.core.world.scene import CRASH_REASON

if TYPE_CHECKING:
    from qrsim_ros.core.engine.faults import FaultEffects
    from qrsim_ros.core.vehicles.airframes import Airframes
    from qrsim_ros.core.vehicles.energy import FleetEnergy
    from qrsim_ros.core.world.scene import Scene

Array = NDArray[np.float64]
#: ``Airframes.views()``: state (N, 13), valid (N,), accel_body (N, 3)
FleetViews = tuple[Array, NDArray[np.bool_], Array]


class PlantInputs(NamedTuple):
    """What a front end gives the plant for one tick (a named tuple: one is built every tick).

    controls: (N, 5) SI Pelican control rows (pitch, roll [rad], thrust [N], yaw rate [rad/s], battery
    [V]); wind_body: (N, 3) air velocity in body FRD [m/s] (non-finite rows only for invalid vehicles);
    rates_thrust, motors: the rotor airframe's lower-level inputs (``Airframes.step``), None when no
    vehicle flies them."""

    controls: Array
    wind_body: Array
    rates_thrust: Array | None = None
    motors: Array | None = None


class Plant:
    """The fleet's physics for one tick (module docstring): airframes, batteries, faults and the scene's
    obstacles, stepped in one order by both front ends.

    fleet: the airframes (``Airframes``); energy: every vehicle's battery (``FleetEnergy``); faults: the
    scenario's fault effects on them (``FaultEffects``); scene: the 3-D scene (None: QRSim's open area);
    dt_s: the tick [s].
    """

    def __init__(self, fleet: Airframes, energy: FleetEnergy, faults: FaultEffects, scene: Scene | None,
                 dt_s: float) -> None:
        self.fleet = fleet
        self.energy = energy
        self.faults = faults
        self.scene = scene
        self.dt_s = float(dt_s)
        #: the inputs of the last tick (``tick``); none before the first
        self.inputs = PlantInputs(np.zeros((0, 5)), np.zeros((0, 3)))

    def tick(self, k: int, inputs: Callable[[FaultEvents], PlantInputs]) -> FleetViews:
        """Advance the plant to tick ``k`` (t = k dt_s) with the inputs that ``inputs`` gives once the
        faults of tick ``k`` are known (it gets their events; they are kept in ``self.inputs``). Returns
        the fleet's ``views()`` after the tick (state, valid, accel_body: no copies, see there)."""
        faults, fleet, energy = self.faults, self.fleet, self.energy
        events = faults.step(k)
        self.inputs = u = inputs(events)
        applied = energy.apply(u.controls, fleet)
        if faults.any_active:
            applied = faults.adjust_controls(applied)
        fleet.step(applied, u.wind_body, rates_thrust=u.rates_thrust, motors=u.motors)
        if self.scene is not None:
            fleet.disarm(self.scene.crashes(fleet.state, fleet.valid), CRASH_REASON)
        views = fleet.views()
        energy.step(fleet, self.dt_s, views[0], views[1])
        return views
