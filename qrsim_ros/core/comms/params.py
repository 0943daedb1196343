"""The ``comms:`` section of a scenario: the vehicles' radio (docs/COMMS.md).

Units: metres, seconds, bits per second, bytes. The defaults are siegemund_2011's WLAN (section 5.1: "the
maximum range is approximately 100 meters") with the reliable, TCP-like link of its section 4.1.1; the
radio is off unless a scenario turns it on.
"""

from __future__ import annotations

from dataclasses import dataclass

from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.core.common.validation import (
    ConfigError,
    flag,
    in_range,
    set_frozen_field,
    single_non_negative,
    single_positive,
)

#: Delivery modes. ``datagram``: a packet whose link is down or lost at its delivery time is lost.
#: ``reliable``: kept in a bounded FIFO per directed link and delivered in order once the link is up
#: (siegemund_2011 section 4.1.1, "similar to TCP").
MODES = ("datagram", "reliable")
#: The destination of a packet for every vehicle the sender's radio reaches (always a datagram).
BROADCAST = -1
#: Largest ``queue_limit`` (packets per directed link).
MAX_QUEUE_LIMIT = int(LIMITS["comms_queue_limit"].hi)


@dataclass(frozen=True)
class CommsParams:
    """The radio every vehicle carries (one model for the fleet).

    on: the radio runs (default off: QRSim has none).
    range_m: the largest distance between two antennas at which a link can be up [m] (default 100,
    siegemund_2011 section 5.1); a link is up at distance d <= range_m.
    line_of_sight: the scene's solids (obstacles, a height-map ground; not the persons) between two
    vehicles block their link (default true; nothing blocks without a ``scene`` section). siegemund_2011
    section 4.1.1 has no "damping, or blocking": this is the extension it names.
    loss_probability: probability [0, 1] that one transmission over an up link is lost, at any distance
    (default 0).
    loss_start_m: distance [m] beyond which the loss probability rises linearly from
    ``loss_probability`` to 1 at ``range_m`` (siegemund_2011 section 5.1: "the bigger the intersection of
    the WLAN-range circles, the higher the possibility that a message can be sent and received");
    None (default): no distance-dependent loss. Must be < range_m.
    latency_s: time from the end of a transmission to its delivery [s] (default 0: the next tick).
    bandwidth_bps: each sender's bit rate [bit/s]: a payload of L bytes takes 8 L / bandwidth_bps seconds
    to send, queued behind the sender's previous packets; None (default): unlimited.
    mode: the delivery mode of a send that names none, one of MODES (default ``reliable``, the paper's).
    queue_limit: most packets held: reliable mode, per directed link; datagrams, per sender (sent and not
    yet due); a send beyond it is dropped (counted in the link's ``dropped``) (default 100).
    """

    on: bool = False
    range_m: float = 100.0
    line_of_sight: bool = True
    loss_probability: float = 0.0
    loss_start_m: float | None = None
    latency_s: float = 0.0
    bandwidth_bps: float | None = None
    mode: str = "reliable"
    queue_limit: int = 100

    def __post_init__(self) -> None:
        set_frozen_field(self, "on", flag("on", self.on))
        set_frozen_field(self, "line_of_sight", flag("line_of_sight", self.line_of_sight))
        set_frozen_field(self, "range_m", single_positive("range_m", self.range_m))
        set_frozen_field(self, "loss_probability",
                         in_range("loss_probability", self.loss_probability, 0.0, 1.0))
        if self.loss_start_m is not None:
            start = single_non_negative("loss_start_m", self.loss_start_m)
            if start >= self.range_m:
                raise ConfigError(f"loss_start_m={self.loss_start_m!r} must be < range_m={self.range_m!r}")
            set_frozen_field(self, "loss_start_m", start)
        set_frozen_field(self, "latency_s", single_non_negative("latency_s", self.latency_s))
        if self.bandwidth_bps is not None:
            set_frozen_field(self, "bandwidth_bps", single_positive("bandwidth_bps", self.bandwidth_bps))
        if self.mode not in MODES:
            raise ConfigError(f"mode={self.mode!r} must be one of {', '.join(MODES)}")
        if isinstance(self.queue_limit, bool) or not isinstance(self.queue_limit, int) \
                or not 1 <= self.queue_limit <= MAX_QUEUE_LIMIT:
            raise ConfigError(f"queue_limit={self.queue_limit!r} must be an integer in "
                              f"[1, {MAX_QUEUE_LIMIT}]")

    @property
    def lossy(self) -> bool:
        """Whether a transmission over an up link can be lost (a loss draw is needed)."""
        return self.loss_probability > 0.0 or self.loss_start_m is not None
