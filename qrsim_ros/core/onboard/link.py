"""What connects the onboard autopilots to their ground: a front end's link (the MAVLink adapter).

The in-process ``Simulator`` calls its ``onboard_link`` twice a tick: ``receive`` before the autopilots
step (commands, set points, missions and parameters become ``OnboardAutopilot`` calls), ``send`` after
the tick with the new estimated states (telemetry). Pure interface: nothing here knows a wire format.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray


class OnboardLink(Protocol):
    """A front end's link to the onboard autopilots of ``Simulator.onboard``."""

    def receive(self, now_s: float) -> None:
        """Handle what arrived, at the tick whose state is at ``now_s`` [s] (before the autopilots step)."""

    def send(self, now_s: float, ex: NDArray[np.float64]) -> None:
        """The tick ending at ``now_s`` [s] is done: report the autopilots' vehicles' estimated states
        ``ex`` (M, 20) (their rows of eX, NaN for invalid vehicles)."""
