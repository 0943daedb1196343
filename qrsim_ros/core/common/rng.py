"""Seeded random streams: one independent numpy Generator per noise source (DESIGN "Time and determinism").

Every stochastic component asks for its streams by *name* (and vehicle index):

    streams = RandomStreams(seed=42)
    gyro_rngs = streams.per_vehicle("gyroscope", num_vehicles)     # one Generator per vehicle
    wind_rng = streams.get("mean_wind")                             # one shared Generator

A stream is derived from ``SeedSequence(entropy=seed, spawn_key=(crc32(name), vehicle))``, i.e. it is
a deterministic function of the scenario seed, the component name and the vehicle index alone. QRSim
allocates streams in construction order (spec 1.6); deriving them by name keeps the same property
(independent streams, reproducible from one seed) and adds one: a sensor node in the ROS graph gets
exactly the stream the in-process simulator gives the same sensor, whatever other components exist.

Seed 0 (or None) means "from the clock", as in QRSim: fresh OS entropy, recorded in ``entropy`` so a
run can be reproduced afterwards.
"""

from __future__ import annotations

import zlib

import numpy as np


def _name_key(name: str) -> int:
    if not name:
        raise ValueError("a random stream needs a non-empty component name")
    return zlib.crc32(name.encode("utf-8"))


def clock_entropy() -> int:
    """Fresh OS entropy for seed 0 ("from the clock"): the one place the core draws it (the test suite
    fixes it per test, so that a clock-seeded test runs the same every time)."""
    return int(np.random.SeedSequence().entropy)


def clock_generators(count: int) -> list[np.random.Generator]:
    """``count`` independent Generators from fresh entropy (``clock_entropy``): the default of models
    built without streams."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(clock_entropy()).spawn(count)]


class RandomStreams:
    """Factory of named, independent, reproducible random streams from one scenario seed."""

    def __init__(self, seed: int | None = 0) -> None:
        if seed is not None and (not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer (0 = from the clock), got {seed!r}")
        self.seed = 0 if seed is None else int(seed)
        #: The entropy actually used (equals ``seed`` unless seed was 0).
        self.entropy: int = self.seed if self.seed != 0 else clock_entropy()

    def seed_sequence(self, name: str, vehicle: int = 0) -> np.random.SeedSequence:
        """The SeedSequence of component ``name`` for ``vehicle`` (0 for shared components)."""
        if vehicle < 0:
            raise ValueError(f"vehicle index must be >= 0, got {vehicle}")
        return np.random.SeedSequence(entropy=self.entropy, spawn_key=(_name_key(name), int(vehicle)))

    def get(self, name: str, vehicle: int = 0) -> np.random.Generator:
        """One Generator for component ``name`` (and ``vehicle``)."""
        return np.random.Generator(np.random.PCG64(self.seed_sequence(name, vehicle)))

    def per_vehicle(self, name: str, num_vehicles: int, first_vehicle: int = 0) -> list[np.random.Generator]:
        """One Generator per vehicle for component ``name``: vehicles first..first+num-1."""
        return [self.get(name, first_vehicle + i) for i in range(num_vehicles)]
