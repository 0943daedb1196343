"""The vehicles' radio: sends queued per sender, links decided per tick, deliveries by mode.

Driven by positions and a send queue alone (no Simulator), so the in-process ``Simulator`` and a thin
ROS node step the same model::

    radio = Radio(num_vehicles, params, RandomStreams(seed), scene)
    seq = radio.send(0, 1, b"hello")              # or destination=BROADCAST; mode=None: params.mode
    packets = radio.step(k, t_s, positions_ned, alive, silenced)   # once per tick

Rules, with the source each follows (siegemund_2011, docs/COMMS.md):

- A link between two vehicles is up when both are alive and not silenced (the ``comm_loss`` fault: the
  vehicle neither sends nor receives), their distance is at most ``range_m`` (section 5.1: WLAN, 100 m)
  and, with ``line_of_sight``, no solid of the scene lies between them (section 4.1.1 names blocking as
  the extension its model leaves open). Links are symmetric (``links.LinkState``).
- A send is transmitted at the sender's bit rate after its earlier sends (``bandwidth_bps``), then
  travels ``latency_s``: it is due at ``max(now, sender busy until) + 8 L / bandwidth_bps + latency_s``
  and is decided at the first tick at or after that time (never the tick it was sent in).
- ``datagram``: at its due tick a packet whose link is down, or lost (a draw against
  ``links.loss_probability``, section 5.1's error probability growing towards the range's edge), is
  dropped. A sender holds at most ``queue_limit`` datagrams not yet due (sent faster than its bit rate
  carries them); a send beyond that is dropped at once, so memory and delivery times stay bounded. A
  ``BROADCAST`` is a datagram to every other vehicle (section 4.1.1: "either a message is broadcast to
  all communication adapters, or to a specified ID"), each receiver decided on its own.
- ``reliable`` (section 4.1.1: "the sender can be sure that the data is delivered (similar to TCP)"): a
  packet waits in its directed link's FIFO (at most ``queue_limit``; a send to a full queue is dropped)
  and is delivered, in order, at the first due tick its link is up and its transmission not lost; a loss
  is retransmitted at the next tick (counted in ``retransmissions``; retransmissions cost no bandwidth,
  a simplification).

Statistics per directed link (source row, receiver column), int64 (N, N), a broadcast counting on every
link it was sent over: ``sent``, ``delivered``, ``dropped``, ``queued`` (sent, not yet delivered or
dropped: sent = delivered + dropped + queued), ``retransmissions``. Loss draws come from the named
stream ``comms.loss`` (``common.rng``), in a fixed order: same seed and sends, same deliveries.
Time: simulated seconds; positions: NED [m].
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.accessors import copy_of
from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.comms.links import LinkState, loss_probability
from qrsim_ros.core.comms.packets import Packet, vehicle_index
from qrsim_ros.core.comms.params import BROADCAST, MODES, CommsParams
from qrsim_ros.core.world.scene import Scene

#: The named random stream of the transmission losses.
LOSS_STREAM = "comms.loss"
#: A packet due within this much after a tick's time is decided at that tick [s] (float round-off of
#: sums of tick times).
DUE_TOLERANCE_S = 1e-9


@dataclass
class _InFlight:
    """A packet on its way (to one vehicle, or a broadcast to all)."""

    source: int
    destination: int
    sequence: int
    mode: str
    payload: bytes
    sent_s: float
    due_s: float

    def delivered(self, receiver: int, t_s: float) -> Packet:
        return Packet(self.source, self.destination, receiver, self.sequence, self.mode, self.payload,
                      self.sent_s, t_s)


class Radio:
    """The fleet's radio (see the module docstring)."""

    def __init__(self, num_vehicles: int, params: CommsParams, streams: RandomStreams,
                 scene: Scene | None = None) -> None:
        if num_vehicles < 1:
            raise ValueError(f"num_vehicles={num_vehicles!r} must be >= 1")
        self.num_vehicles = int(num_vehicles)
        self.params = params
        self.scene = scene
        self._rng = streams.get(LOSS_STREAM)
        self.reset()

    # --- episode ---------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Clear every queue, packet in flight, statistic and sequence counter; time back to 0 (the loss
        stream continues)."""
        n = self.num_vehicles
        self.now_s = 0.0
        self.tick = 0
        self._order = 0  # tie-break of equal due times: send order
        # datagrams in flight, one per send (a broadcast once), a heap on (due, order)
        self._datagrams: list[tuple[float, int, _InFlight]] = []
        self._datagrams_waiting = np.zeros(n, np.int64)  # per sender: sent, not yet due (queue_limit)
        self._queues: dict[tuple[int, int], deque[_InFlight]] = {}
        self._busy_until_s = np.zeros(n)
        self._next_sequence = np.zeros(n, np.int64)
        self._others = ~np.eye(n, dtype=bool)  # row s: every vehicle but s (a broadcast's receivers)
        self._sent = np.zeros((n, n), np.int64)
        self._delivered = np.zeros((n, n), np.int64)
        self._dropped = np.zeros((n, n), np.int64)
        self._retransmissions = np.zeros((n, n), np.int64)
        self._positions: Array = np.full((n, 3), np.nan)
        self._usable = np.zeros(n, bool)
        self._links: LinkState | None = None

    # --- sending ---------------------------------------------------------------------------------------
    def send(self, source: int, destination: int, payload: bytes, mode: str | None = None) -> int:
        """Queue ``payload`` from vehicle ``source`` to vehicle ``destination`` (or BROADCAST) at the
        present time (``now_s``, the last step's); returns its sequence number (per sender). ``mode``:
        ``datagram``, ``reliable`` or None (``params.mode``; a broadcast is always a datagram). Raises
        ValueError for a vehicle out of range, a send to itself, a payload that is not bytes or an unknown
        mode."""
        s = vehicle_index("source", source, self.num_vehicles)
        if destination == BROADCAST:
            if mode not in (None, "datagram"):
                raise ValueError(f"mode={mode!r}: a broadcast is a datagram (send reliable to each vehicle)")
            mode, dst = "datagram", BROADCAST
        else:
            dst = vehicle_index("destination", destination, self.num_vehicles)  # (or BROADCAST, above)
            if dst == s:
                raise ValueError(f"destination={destination!r}: vehicle {s} cannot send to itself")
            mode = self.params.mode if mode is None else mode
            if mode not in MODES:
                raise ValueError(f"mode={mode!r} must be one of {', '.join(MODES)} or None")
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise ValueError(f"payload must be bytes, got {type(payload).__name__}")
        data = bytes(payload)
        seq = int(self._next_sequence[s])
        self._next_sequence[s] += 1
        if dst == BROADCAST:
            self._sent[s] += self._others[s]
        else:
            self._sent[s, dst] += 1
        if mode == "reliable":
            queue = self._queues.setdefault((s, dst), deque())
            if len(queue) >= self.params.queue_limit:
                self._dropped[s, dst] += 1
                return seq
        elif self._datagrams_waiting[s] >= self.params.queue_limit:  # the sender's queue is full: dropped
            if dst == BROADCAST:
                self._dropped[s] += self._others[s]
            else:
                self._dropped[s, dst] += 1
            return seq
        due = self._transmit(s, len(data)) + self.params.latency_s
        packet = _InFlight(s, dst, seq, mode, data, self.now_s, due)
        if mode == "reliable":
            self._queues[(s, dst)].append(packet)
        else:
            heapq.heappush(self._datagrams, (due, self._order, packet))
            self._order += 1
            self._datagrams_waiting[s] += 1
        return seq

    def _transmit(self, source: int, num_bytes: int) -> float:
        """When the sender finishes transmitting ``num_bytes`` after its earlier packets [s]."""
        bandwidth = self.params.bandwidth_bps
        if bandwidth is None:
            return self.now_s
        end = max(self.now_s, float(self._busy_until_s[source])) + 8.0 * num_bytes / bandwidth
        self._busy_until_s[source] = end
        return end

    # --- stepping --------------------------------------------------------------------------------------
    def step(self, k: int, t_s: float, positions_ned: ArrayLike, alive: ArrayLike,
             silenced: ArrayLike | None = None) -> list[Packet]:
        """Advance to tick ``k`` at time ``t_s`` [s] with the vehicles' antenna positions (N, 3) [NED m],
        which are alive (N,) bool and which silenced (N,) bool (``comm_loss``; None: none); returns the
        packets delivered at this tick (datagrams, then the reliable links in (source, receiver) order;
        each link's in sequence order)."""
        self.tick = int(k)
        self.now_s = float(t_s)
        self._positions = np.asarray(positions_ned, float).reshape(self.num_vehicles, 3)
        usable = np.asarray(alive, bool).copy()
        if silenced is not None:
            usable &= ~np.asarray(silenced, bool)
        self._usable = usable
        self._links = None
        horizon = self.now_s + DUE_TOLERANCE_S
        out = self._deliver_datagrams(horizon)
        out += self._deliver_reliable(horizon)
        return out

    @property
    def links(self) -> LinkState:
        """The links at the last step (computed on first use after a step)."""
        if self._links is None:
            self._links = LinkState(self._positions, self._usable, self.params, self.scene)
        return self._links

    def _lost(self, source: NDArray[np.intp], receiver: NDArray[np.intp]) -> NDArray[np.bool_]:
        """One loss draw per transmission (source[i] -> receiver[i]), in order."""
        if not self.params.lossy:
            return np.zeros(len(source), bool)
        p = self._positions
        d = np.linalg.norm(p[receiver] - p[source], axis=1)
        return self._rng.random(len(source)) < loss_probability(d, self.params)

    def _deliver_datagrams(self, horizon_s: float) -> list[Packet]:
        heap = self._datagrams
        due: list[_InFlight] = []
        while heap and heap[0][0] <= horizon_s:
            due.append(heapq.heappop(heap)[2])
        if not due:
            return []
        # one row per (packet, receiver): a broadcast to every other vehicle, expanded at once
        m = len(due)
        src = np.fromiter((q.source for q in due), np.intp, m)
        np.subtract.at(self._datagrams_waiting, src, 1)
        dst = np.fromiter((q.destination for q in due), np.intp, m)
        wide = dst == BROADCAST
        reach = np.zeros((m, self.num_vehicles), bool)
        reach[wide] = self._others[src[wide]]
        reach[np.flatnonzero(~wide), dst[~wide]] = True
        row, rcv = np.nonzero(reach)  # in due order, receivers ascending
        if not row.size:  # broadcasts of a fleet of one
            return []
        s = src[row]
        ok = self.links.up[s, rcv]
        if ok.any():
            ok[ok] = ~self._lost(s[ok], rcv[ok])
            np.add.at(self._delivered, (s[ok], rcv[ok]), 1)
        np.add.at(self._dropped, (s[~ok], rcv[~ok]), 1)
        t = self.now_s
        return [due[i].delivered(r, t) for i, r in zip(row[ok].tolist(), rcv[ok].tolist(), strict=True)]

    def _deliver_reliable(self, horizon_s: float) -> list[Packet]:
        ready = sorted(key for key, q in self._queues.items() if q and q[0].due_s <= horizon_s)
        if not ready:
            return []
        keys = np.array(ready, np.intp)
        up = self.links.up[keys[:, 0], keys[:, 1]]
        out: list[Packet] = []
        for (s, r), link_up in zip(ready, up, strict=True):
            if not link_up:
                continue
            queue = self._queues[(s, r)]
            one = np.array([s]), np.array([r])
            while queue and queue[0].due_s <= horizon_s:
                if self._lost(*one)[0]:
                    self._retransmissions[s, r] += 1
                    break
                out.append(queue.popleft().delivered(r, self.now_s))
                self._delivered[s, r] += 1
        return out

    # --- statistics ------------------------------------------------------------------------------------
    sends = copy_of("_next_sequence", "Sends per vehicle (N,) this episode (a broadcast once; the referee's "
                                      "\"messages sent\").")
    sent = copy_of("_sent", "Packets sent per directed link (N, N) (a broadcast on every link it went over).")
    delivered = copy_of("_delivered", "Packets delivered per directed link (N, N).")
    dropped = copy_of("_dropped", "Packets dropped per directed link (N, N): datagrams down or lost, "
                                  "reliable queue overflows.")

    @property
    def queued(self) -> NDArray[np.int64]:
        """Packets sent and neither delivered nor dropped yet, per directed link (N, N)."""
        return self._sent - self._delivered - self._dropped

    retransmissions = copy_of("_retransmissions", "Lost transmissions of reliable packets, retried at a "
                                                  "later tick, per directed link (N, N).")
