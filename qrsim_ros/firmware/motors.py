"""The firmwares' motor order and output scaling, shared by the firmware interfaces.

ArduPilot's and PX4's quadrotor ``+`` frame number the motors 1 right, 2 left, 3 front, 4 back, front and
back turning clockwise seen from above, as the ``+`` rotor sets here turn (``core.vehicles.rotor_params``:
rotor 0 front, 1 right, 2 back, 3 left; spin +1 clockwise on 0 and 2).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.engine.simulator import Simulator

#: The firmware's output index (0-based) of each rotor of the airframe, by layout.
OUTPUTS_OF_ROTORS = {"+": (2, 0, 3, 1)}


def outputs_of_rotors(layout: str) -> tuple[int, ...]:
    """The firmware output of each rotor for ``layout``, else ValueError naming what is mapped."""
    if layout not in OUTPUTS_OF_ROTORS:
        raise ValueError(f"rotor.layout={layout!r}: the firmwares' motor order is mapped here for "
                         f"{', '.join(OUTPUTS_OF_ROTORS)}")
    return OUTPUTS_OF_ROTORS[layout]


def flown_motor_order(sim: Simulator) -> tuple[int, ...]:
    """The firmware output of each rotor of ``sim``'s airframe, once ``sim`` is one a firmware can fly in
    lockstep: the rotor airframe in the ``motors`` mode, one tick per task step; else ValueError naming
    the setting."""
    sc = sim.scenario
    if sim.ticks_per_task_step != 1:
        raise ValueError(f"task.dt_s={sc.task.dt_s} s: the firmware's lockstep needs one tick per task "
                         f"step (task.dt_s: {sim.dt_s})")
    if set(sim.control_modes) != {"motors"} or set(sim.fleet.airframes) != {"rotor"}:
        raise ValueError("the firmware flies motors: vehicle.airframe: rotor and vehicle.control: motors")
    return outputs_of_rotors(sc.vehicle.rotor_params().layout)


def motor_commands(outputs: Sequence[float], order: tuple[int, ...], low: float, high: float
                   ) -> NDArray[np.float64]:
    """Normalised motor commands [0, 1] of the rotors from the firmware's ``outputs`` (``low`` .. ``high``
    maps to 0 .. 1, clipped; non-finite: 0)."""
    values = np.array([outputs[c] for c in order], float)
    return np.clip(np.nan_to_num((values - low) / (high - low)), 0.0, 1.0)
