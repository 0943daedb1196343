"""The one table of bounded run and launch values, with units and reasons.

Both front ends check against it — the launch plan (``qrsim launch`` and ``ros2 launch``), the ``qrsim``
command, the scenario validation — and every node declares its parameters' ranges from it
(``qrsim_ros.ros.parameters.limited``), so a value the launcher accepts is one every node accepts::

    from qrsim_ros.core.common.limits import LIMITS
    LIMITS["real_time_factor"].check(1e9)   # ConfigError: real_time_factor=1000000000.0 must be in ...

Rows are closed ranges ``[lo, hi]``; ``integer`` rows take integers only. The table is printed in
docs/LAUNCH.md ("Limits"); ``python -m qrsim_ros.core.common.limits`` prints it as Markdown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from qrsim_ros.core.common.validation import ConfigError, shorten


@dataclass(frozen=True)
class Limit:
    """One bounded value: its name, closed range ``[lo, hi]``, unit, whether it is an integer, and
    why the bounds are what they are (for the documentation and the error messages)."""

    name: str
    lo: float
    hi: float
    unit: str
    reason: str
    integer: bool = False

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is a number of the right kind inside the range."""
        if isinstance(value, (bool, np.bool_)):
            return False
        if self.integer:
            return isinstance(value, (int, np.integer)) and self.lo <= value <= self.hi
        return (isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)
                and self.lo <= value <= self.hi)

    def allowed(self) -> str:
        """The range in words: ``an integer in [0, 1000]`` or ``a number in [0, 10000] (s)``."""
        kind = "an integer" if self.integer else "a number"
        unit = f" {self.unit}" if self.unit and self.unit != "1" else ""
        return f"{kind} in [{_fmt(self.lo)}, {_fmt(self.hi)}]{unit}"

    def check(self, value: Any, name: str | None = None) -> Any:
        """``value`` if inside the range, else ConfigError (one line: name, value shortened, range,
        reason). ``name``: how the caller calls it (an option, a key path); default the row's."""
        if not self.contains(value):
            raise ConfigError(f"{name or self.name}={shorten(value)} must be {self.allowed()} "
                              f"({self.reason})")
        return value


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


#: Most vehicles of a launched node graph: every node subscribes and publishes per vehicle, and the
#: fleet's pairwise proximity check is O(n^2); beyond this a graph no longer starts in reasonable time.
MAX_GRAPH_VEHICLES = 1000
#: Most vehicles of an in-process scenario (Simulator, ``qrsim run`` / ``batch``, Gymnasium).
MAX_SCENARIO_VEHICLES = 10000
#: The largest seed: ROS integer parameters are 64-bit but the seed is drawn/printed as a C int.
MAX_SEED = 2**31 - 1
#: vehicle_dynamics' default lockstep window [ticks]; example_autopilot paces its progress reports by the
#: same window (the launch plan gives it vehicle_dynamics' value).
LOCKSTEP_WINDOW_TICKS = 25
#: The Foxglove WebSocket's port when none is named (``--foxglove``, ``foxglove:=true``, ``qrsim play``):
#: the Foxglove app's default connection, ws://localhost:8765.
FOXGLOVE_PORT = 8765

_ROWS = (
    Limit("num_vehicles", 0, MAX_GRAPH_VEHICLES, "vehicles",
          "0: the scenario file's; a node graph subscribes and publishes per vehicle", integer=True),
    Limit("scenario_num_vehicles", 1, MAX_SCENARIO_VEHICLES, "vehicles",
          "a scenario's num_vehicles in process; the fleet's proximity check is O(n^2)", integer=True),
    Limit("seed", -1, MAX_SEED, "",
          f"-1: the scenario file's; 0: from the clock; 1..{MAX_SEED}: that seed", integer=True),
    Limit("real_time_factor", 0.0, 10000.0, "",
          "simulated s per wall s; 1: wall-clock pace; 0: as fast as possible (more is no faster)"),
    Limit("duration_s", 0.0, 1e9, "s", "simulated time to run; 0: until the episode ends"),
    Limit("lockstep_timeout_s", 0.001, 3600.0, "s", "wall time a lockstep input is awaited before a warning"),
    Limit("lockstep_window_ticks", 0, 1_000_000, "ticks",
          "how far the clock may run ahead of the slowest ground-truth consumer in lockstep; 0: no limit",
          integer=True),
    Limit("lockstep_consumers", 0, 1000, "nodes",
          "ground-truth consumers the lockstep window waits for until each has reported", integer=True),
    Limit("command_timeout_s", -1.0, 1e6, "s",
          "simulated age after which a set point expires; 0: never; -1 (node parameter): the scenario's"),
    Limit("start_subscribers", 0, 1000, "subscriptions",
          "ground-truth consumers the start gate waits for (the planned nodes)", integer=True),
    Limit("start_timeout_s", 0.0, 3600.0, "s", "wall time the start gate waits for them"),
    Limit("tf_every_n_ticks", 0, 100000, "ticks", "/tf decimation; 0: never", integer=True),
    Limit("battery_every_n_ticks", 0, 100000, "ticks", "uavN/battery decimation; 0: never", integer=True),
    Limit("scene_size_m", 0.0, 10000.0, "m",
          "an obstacle's or person's size (length, width, height, radius): the ray caster works in float32 "
          "(about 1 mm at 10 km)"),
    Limit("image_size_px", 1, 8192, "px",
          "a camera's width or height (camera, fisheye): the scenario's memory estimate refuses what the "
          "machine cannot hold (a scene camera keeps about 110 B per pixel and vehicle)", integer=True),
    Limit("battery_cells", 1, 24, "cells",
          "LiPo cells in series (vehicle.battery.cells): 1S to 24S, the packs multirotors fly", integer=True),
    Limit("fault_log_entries", 0, 10000, "entries",
          "the episode's fault log keeps the latest this many starts and ends (older ones are counted as "
          "folded): a repeating fault on 100 vehicles logged 63 MB per 20 simulated s", integer=True),
    Limit("comms_queue_limit", 1, 1_000_000, "packets",
          "comms.queue_limit, per directed link or sender; more are dropped and counted", integer=True),
    Limit("comms_stamp_ahead_ticks", 0, 500, "ticks",
          "a packet's stamp after the comms node's last tick (10 s); later: refused, counted", integer=True),
    Limit("foxglove_port", 0, 65535, "", "the Foxglove WebSocket's TCP port; 0: any free one", integer=True),
    Limit("mission_items", 0, 500, "items", "MAVLink mission items one vehicle takes", integer=True),
    Limit("yaml_bytes", 0, 1_000_000, "bytes", "a YAML document (scenario, --set value, fault request)",
          integer=True),
    Limit("yaml_nodes", 0, 1_000_000, "nodes", "a YAML document's values with its aliases expanded",
          integer=True),
    Limit("mdp_successors", 1, 12, "states",
          "a state's successors in qrsim verify's interval MDP: up to k 2^(k-1) choices for k", integer=True),
    Limit("mdp_transitions", 1, 200_000, "transitions",
          "qrsim verify's interval MDP in all (Storm: 56 us and 3 KB per transition here)", integer=True),
    Limit("domain_id", 0, 232, "",
          "ROS_DOMAIN_ID: Fast DDS's UDP ports overflow above 232 (101 and up depend on the port base)",
          integer=True),
)

#: The table: name -> Limit.
LIMITS: dict[str, Limit] = {row.name: row for row in _ROWS}


def markdown_table() -> str:
    """The table in Markdown (docs/LAUNCH.md, "Limits")."""
    lines = ["| value | range | unit | why |", "|---|---|---|---|"]
    for row in _ROWS:
        lines.append(f"| `{row.name}` | {_fmt(row.lo)} .. {_fmt(row.hi)}{' (integer)' * row.integer} | "
                     f"{row.unit or '—'} | {row.reason} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
