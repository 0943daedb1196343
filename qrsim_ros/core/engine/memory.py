"""The memory a scenario needs in one process, estimated before anything is allocated, and the check
that this machine can give it.

The estimate sums what grows with the scenario's sizes, each from a cost measured on this project's
models (docs/results/2026-12-04-hostile-input.md gives the runs):

- the process itself (interpreter, numpy/scipy/numba, the models' tables): ``PROCESS_BYTES``;
- every vehicle's state, streams and small sensors: ``VEHICLE_BYTES`` each;
- the camera classifier's windows, at the most a frame can have (``CameraParams.min_window_px`` caps the
  grid; a level camera reaches it above ~142 m): ``CAMERA_WINDOW_BYTES`` per window and vehicle;
- the registered sensors that say what one vehicle's copy holds (``SensorRegistration.memory_bytes``: the
  scene cameras per pixel, the lidar per ray of a sweep).

``check_memory(scenario)`` refuses, in one line naming the largest parts, a scenario whose estimate is
more than the memory available now (``available_bytes``: the least of the kernel's MemAvailable, the
cgroup's limit less its usage and the address-space limit less the address space in use).
"""

from __future__ import annotations

import math
import resource
from pathlib import Path
from typing import TYPE_CHECKING

from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.engine.builders import has_camera
from qrsim_ros.core.sensors.registry import SENSORS

if TYPE_CHECKING:
    from qrsim_ros.core.config.scenario import Scenario

#: The process before any scenario-sized array (RSS of a 1-vehicle run: 170-300 MB; with headroom).
PROCESS_BYTES = 400e6
#: Per vehicle without a camera: state, streams, the QRSim sensors (9 KB measured at 1,000-4,000).
VEHICLE_BYTES = 10e3
#: Per camera-classifier window of one frame: the stacked window arrays the observations are views of
#: and the step's temporaries (340 B measured: 657 KB per vehicle at 1,938 windows).
CAMERA_WINDOW_BYTES = 350.0


def _gigabytes(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def estimate(scenario: Scenario) -> list[tuple[str, float]]:
    """The parts of the in-process memory estimate [bytes], largest first: (what, bytes)."""
    n = scenario.num_vehicles
    fleet = f"{n} vehicle{'s' * (n != 1)}"
    parts = [("the process", PROCESS_BYTES), (f"the state of {fleet}", n * VEHICLE_BYTES)]
    cam = scenario.vehicle.camera
    if has_camera(scenario):
        windows = math.prod(max(1, round(2.0 * c / cam.min_window_px)) for c in cam.c_px)
        parts.append((f"camera classifier windows ({windows:,} per frame) of {fleet}",
                      n * windows * CAMERA_WINDOW_BYTES))
    for name, params in scenario.vehicle.sensors.items():
        registration = SENSORS[name]
        if registration.memory_bytes is not None:
            parts.append((f"{name} of {fleet}", n * registration.memory_bytes(params)))
    return sorted(parts, key=lambda p: -p[1])


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _meminfo_kib(key: str, path: str = "/proc/meminfo") -> int | None:
    try:
        for line in Path(path).read_text().splitlines():
            name, _, rest = line.partition(":")
            if name == key:
                return int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_bytes() -> tuple[float, str] | None:
    """The memory this process can still take [bytes] and where the bound comes from; None where the
    machine does not say (not Linux)."""
    bounds: list[tuple[float, str]] = []
    avail = _meminfo_kib("MemAvailable")
    if avail is not None:
        bounds.append((avail * 1024.0, "MemAvailable"))
    limit, usage = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and usage is not None:
        bounds.append((float(limit - usage), "the cgroup's memory.max"))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    vm = _meminfo_kib("VmSize", "/proc/self/status")
    if soft != resource.RLIM_INFINITY and vm is not None:
        bounds.append((float(soft - vm * 1024), "the address-space limit (ulimit -v)"))
    return min(bounds) if bounds else None


def check_memory(scenario: Scenario, available: tuple[float, str] | None = None) -> list[tuple[str, float]]:
    """The estimate (``estimate``); ConfigError (one line, naming the largest parts) when it exceeds
    ``available`` (default ``available_bytes()``)."""
    parts = estimate(scenario)
    room = available if available is not None else available_bytes()
    total = sum(b for _, b in parts)
    if room is not None and total > room[0]:
        largest = ", ".join(f"{what} {_gigabytes(b)}" for what, b in parts[:3])
        raise ConfigError(f"needs about {_gigabytes(total)} in process ({largest}), more than the "
                          f"{_gigabytes(max(room[0], 0.0))} this machine can give now ({room[1]}): "
                          "fewer vehicles or smaller sensors")
    return parts
