"""What vehicle_dynamics flies each tick from the held commands: the command while it is fresh, hover
before the first, the scenario's failsafe once it expired or the battery runs low.

A held command older than ``command_timeout_s`` (simulated time, by its stamp) has expired: the vehicle
flies the scenario's ``vehicle.failsafe`` (``FleetControl``'s hold / land / level, computed on the exact
state in the eX layout: vehicle_dynamics has no estimated state, the in-process Simulator uses its
estimated one) until a new command arrives (counted in ``command_timeouts``). The flight_controller's
own failsafe travels in its commands and is reported with this one's; a command with ``disarm`` (touched
down in ``land``), or a touch-down in this failsafe's ``land``, disarms the vehicle until the next
episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from qrsim_ros.core.common.ticks import BASE_DT_S, TICK_NS
from qrsim_ros.core.config.scenario import Scenario
from qrsim_ros.core.vehicles.airframes import Airframes
from qrsim_ros.core.vehicles.emergency_land import emergency_failsafe
from qrsim_ros.core.vehicles.energy import BatterySettings, FleetEnergy
from qrsim_ros.core.vehicles.estimated_state import exact_estimated_state
from qrsim_ros.core.vehicles.fleet_control import FleetControl
from qrsim_ros.core.vehicles.pelican import HOVER_CONTROL
from qrsim_ros.ros.command_intake import HeldCommands
from qrsim_ros.ros.node import Warn


class CommandFailsafe:
    """The controls of N vehicles from their held commands (see the module docstring)."""

    def __init__(self, names: Sequence[str], scenario: Scenario, battery: BatterySettings, timeout_s: float,
                 warn: Warn) -> None:
        n = len(names)
        self.names = list(names)
        self.timeout_s = timeout_s
        self._warn = warn
        # every vehicle taken as attitude mode: the graph's flight_controller has its own failsafe
        self.control = FleetControl(["attitude"] * n, scenario.task.flight_z_ned_m, timeout_s,
                                    scenario.vehicle.failsafe, scenario.vehicle.failsafe_land_rate_m_s,
                                    battery, scenario.bases)
        self.fresh = np.zeros(n, bool)  # the last step flew the held command (not hover or a failsafe)
        self.failsafe = [""] * n  # what the last step flew
        self.failsafe_onsets = np.zeros(n, np.int64)
        self.command_timeouts = np.zeros(n, np.int64)

    def restart_episode(self) -> None:
        self.control.reset()
        self.failsafe = [""] * len(self.names)

    def controls(self, held: HeldCommands, fleet: Airframes, energy: FleetEnergy, k: int) -> np.ndarray:
        """The controls (N, 5) of step k+1 (see the module docstring); disarms the vehicles whose
        command or landing says so."""
        fresh = held.present.copy()
        valid = fleet.valid
        if self.timeout_s > 0:
            fresh &= (k * TICK_NS - held.stamp_ns) * 1e-9 <= self.timeout_s
        expired = self.fresh & ~fresh & valid
        fc = self.control
        # the exact state in the eX layout: built only when something below reads it, once a tick
        exact_ex = cache(lambda: exact_estimated_state(fleet.state, fleet.accel_body))
        if fc.home_pending:  # (fc.controls runs only in a failsafe here)
            fc.record_home(exact_ex(), valid)
        if energy.low:
            fc.update_battery(energy.percentage, energy.drain_per_s, exact_ex(), valid)
        if expired.any():
            self.command_timeouts[expired] += 1
            names = ", ".join(self.names[i] for i in np.flatnonzero(expired))
            self._warn("timeout", f"{names}: no command (cmd/attitude, cmd/rates_thrust, cmd/motors) for "
                                  f"more than command_timeout_s={self.timeout_s:g} s (simulated): failsafe "
                                  f"{fc.failsafe_mode!r} until the next")
        self.fresh = fresh
        u = np.where(fresh[:, None], held.control, HOVER_CONTROL)
        if (held.present & ~fresh & valid).any() or fc.failsafe_code.any():
            issued_s = np.where(held.present, held.stamp_ns * 1e-9, np.nan)
            u = fc.controls(np.where(held.present[:, None], held.control, np.nan), exact_ex(), valid,
                            np.zeros(len(self.names)), k * BASE_DT_S, issued_s)
        emergency = bool((fleet.emergency_land_rotor >= 0).any())
        if any(held.failsafe) or any(self.failsafe) or fc.failsafe_code.any() or emergency:
            own = fc.failsafe
            failsafe = emergency_failsafe([own[i] or (held.failsafe[i] if fresh[i] else "")
                                           for i in range(len(self.names))], fleet)
            for i, (old, new) in enumerate(zip(self.failsafe, failsafe, strict=True)):
                if new and not old:
                    self.failsafe_onsets[i] += 1
            self.failsafe = failsafe
        disarm = valid & ((fresh & held.disarm) | fc.landed)
        if disarm.any():  # touched down in the land failsafe: motors off for good (this episode)
            fleet.disarm(np.flatnonzero(disarm))
        return u

    def flies_low_level(self, fleet: Airframes) -> np.ndarray:
        """(N,) bool: the vehicles that fly their held lower-level command this step (valid, fresh and in
        no failsafe of their own)."""
        return self.fresh & fleet.valid & (self.control.failsafe_code == 0)
