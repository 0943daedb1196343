"""The firmwares' motor order and output scaling, shared by the firmware interfaces.

ArduPilot and PX4 number a quadrotor's motors alike (their quad ``+`` and quad X frames; spin seen from
above). ``+``: 1 right, 2 left (both anticlockwise), 3 front, 4 back (clockwise). X: 1 front-right, 2
back-left (anticlockwise), 3 front-left, 4 back-right (clockwise). The rotor sets here are numbered 0..3
clockwise from the front (``core.vehicles.rotor_params``: ``+`` 0 front, 1 right, 2 back, 3 left; ``x``
0 front-right, 1 back-right, 2 back-left, 3 front-left) with their own spins: a firmware flies an
airframe only if every rotor turns the way the firmware's motor in its place turns (else its yaw
control would push the wrong way).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.engine.simulator import Simulator

#: By layout: the firmware's output index (0-based) of each rotor of the airframe, and the spin (+1
#: clockwise seen from above, ``RotorParams.spin``) the firmware expects of each rotor.
MOTOR_ORDERS: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = {
    "+": ((2, 0, 3, 1), (1.0, -1.0, 1.0, -1.0)),
    "x": ((0, 3, 1, 2), (-1.0, 1.0, -1.0, 1.0)),
}


def outputs_of_rotors(layout: str, spin: Sequence[float] | None = None) -> tuple[int, ...]:
    """The firmware output of each rotor for ``layout`` (with ``spin``: once it is the firmware's), else
    ValueError naming what differs."""
    if layout not in MOTOR_ORDERS:
        raise ValueError(f"rotor.layout={layout!r}: the firmwares' motor order is mapped here for "
                         f"{', '.join(MOTOR_ORDERS)}")
    outputs, expected = MOTOR_ORDERS[layout]
    if spin is not None and tuple(float(v) for v in spin) != expected:
        raise ValueError(f"rotor.spin={[float(v) for v in spin]}: the firmwares' {layout!r} frame turns its "
                         f"rotors {list(expected)} (+1 clockwise seen from above)")
    return outputs


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
    rotors = sc.vehicle.rotor_params()
    return outputs_of_rotors(rotors.layout, rotors.spin)


def motor_commands(outputs: Sequence[float], order: tuple[int, ...], low: float, high: float
                   ) -> NDArray[np.float64]:
    """Normalised motor commands [0, 1] of the rotors from the firmware's ``outputs`` (``low`` .. ``high``
    maps to 0 .. 1, clipped; non-finite: 0)."""
    values = np.array([outputs[c] for c in order], float)
    return np.clip(np.nan_to_num((values - low) / (high - low)), 0.0, 1.0)
