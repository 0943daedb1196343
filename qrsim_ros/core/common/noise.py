"""Noise processes: the one place for white noise, first-order Gauss-Markov and random walks.

Every process is vectorised over vehicles and draws from one Generator per vehicle (see ``rng``).
``PerVehicleNormals`` buffers each vehicle's standard normals in blocks: numpy's Generator yields the
same sequence whether values are drawn one step at a time or in blocks, so buffering changes the cost
(one call per vehicle per block instead of per step), never the numbers.

Resets (spin-up of a process after ``set_state``) draw from a separate per-vehicle reset stream, so a
reset of one vehicle never disturbs the buffered noise of the others.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]


class PerVehicleNormals:
    """Standard normal draws of fixed width per vehicle, each vehicle from its own Generator.

    ``next()`` returns an (N, width) array: row i holds the next ``width`` values of generator i.
    """

    def __init__(self, rngs: list[np.random.Generator], width: int, block_steps: int = 64) -> None:
        if width < 1:
            raise ValueError(f"width must be >= 1, got {width}")
        self._rngs = list(rngs)
        self.width = int(width)
        self._block = max(1, int(block_steps))
        self._buf = np.empty((len(self._rngs), 0, self.width))
        self._pos = 0

    @property
    def num_vehicles(self) -> int:
        return len(self._rngs)

    def next(self) -> Array:
        """The next draw for every vehicle, shape (N, width)."""
        if self._pos >= self._buf.shape[1]:
            self._buf = np.stack(
                [r.standard_normal((self._block, self.width)) for r in self._rngs]
            ) if self._rngs else np.empty((0, self._block, self.width))
            self._pos = 0
        out = self._buf[:, self._pos, :]
        self._pos += 1
        return out

    def rewind(self, steps: int) -> None:
        """Give back the last ``steps`` draws so ``next()`` returns them again (e.g. when a reset
        cancels a step that was already drawn for). Only draws still in the current block can be
        given back; raises ValueError otherwise."""
        if not 0 <= steps <= self._pos:
            raise ValueError(f"cannot rewind {steps} draws (at most {self._pos} in the current block)")
        self._pos -= steps

    def discard_buffer(self) -> None:
        """Drop buffered values (after a reseed the generators were replaced or re-seeded)."""
        self._buf = np.empty((len(self._rngs), 0, self.width))
        self._pos = 0


def ou_coefficients(beta_per_s: ArrayLike, sigma: ArrayLike, dt_s: float) -> tuple[Array, Array]:
    """Exact discretisation of an Ornstein-Uhlenbeck process (spec 3.1, orientation estimator).

    ``n <- a n + b eta`` with ``a = exp(-beta dt)`` and ``b = sigma sqrt((1 - exp(-2 beta dt)) / (2 beta))``;
    stationary std ``sigma / sqrt(2 beta)``.
    """
    beta = np.asarray(beta_per_s, float)
    sigma = np.asarray(sigma, float)
    a = np.exp(-beta * dt_s)
    b = sigma * np.sqrt((1.0 - np.exp(-2.0 * beta * dt_s)) / (2.0 * beta))
    return a, b


class GaussMarkov:
    """First-order Gauss-Markov processes ``n <- a * n + b * eta`` for N vehicles x K components.

    ``a`` and ``b`` are (K,) coefficient vectors (QRSim uses several parameterisations: OU for the
    orientation estimator, ``exp(-tau dt)`` with a plain sigma for the altimeter, the pseudorange
    processes of GPS). ``a = 1`` gives a random walk, ``a = 0`` white noise of std ``b``.
    """

    def __init__(self, num_vehicles: int, a: ArrayLike, b: ArrayLike) -> None:
        self.a = np.atleast_1d(np.asarray(a, float))
        self.b = np.broadcast_to(np.asarray(b, float), self.a.shape).copy()
        self.state = np.zeros((int(num_vehicles), self.a.size))

    def step(self, eta: Array) -> Array:
        """Advance all vehicles by one step with standard normals ``eta`` (N, K); returns the state."""
        self.state = self.a * self.state + self.b * eta
        return self.state

    def step_rows(self, rows: ArrayLike, eta: Array) -> None:
        """Advance only the given vehicles (rows) with ``eta`` (len(rows), K)."""
        rows = np.asarray(rows)
        self.state[rows] = self.a * self.state[rows] + self.b * eta

    def spin_up(self, vehicle: int, steps: int, rng: np.random.Generator) -> None:
        """Reset one vehicle's state to zero and iterate ``steps`` times with its own generator.

        Evaluated in closed form, ``n = sum_j a^(steps-1-j) b eta_j`` over the same draws, so a long
        spin-up costs one vectorised sum instead of ``steps`` Python iterations.
        """
        steps = int(steps)
        if steps <= 0:
            self.state[vehicle] = 0.0
            return
        eta = rng.standard_normal((steps, self.a.size))
        powers = self.a ** np.arange(steps - 1, -1, -1, dtype=float)[:, None]
        self.state[vehicle] = self.b * np.sum(powers * eta, axis=0)
