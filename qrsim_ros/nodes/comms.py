"""comms: the vehicles' range-limited radio over the graph (docs/COMMS.md, docs/NODE_GRAPH.md).

The core's ``Radio`` (``core.comms``: range, line of sight through the scene, distance-dependent loss,
latency, bandwidth, datagram and reliable links), built from the scenario with the Simulator's named
streams (``comms.loss``) and scene, stepped on the fleet's ground truth: a lockstep run delivers what
the in-process Simulator delivers for the same sends.

Topics:
  in   ``uavN/comms/tx`` (qrsim_ros/CommsPacket): a packet vehicle N-1 sends; ``source`` must be that
       vehicle's index, ``destination`` another vehicle's index or ``BROADCAST``, ``mode`` DEFAULT /
       DATAGRAM / RELIABLE, the stamp a tick time t_j (``ros.stamps``): the packet is sent at t_j, as
       ``Simulator.send`` between the steps to t_j and t_j+1: exactly so whenever it arrives before the
       node handles tick j+1 (the radio goes to t_j+1 only then). One that arrives later is sent at the
       radio's time (counted ``tx_late``; in lockstep it does not happen when the autopilot publishes its
       packets before its set points of the tick, which the clock awaits); one of the last episode that
       arrives after the reset is dropped (``tx_late`` too).
       ``/sim/vehicle_status`` (ground truth, validity, the tick's faults: ``comm_loss`` silences a
       vehicle) through ``ros.ground_truth.GroundTruthSync``.
  out  ``uavN/comms/rx`` (qrsim_ros/CommsPacket) stamped t_k: each packet delivered to vehicle N-1 at tick
       k, in the radio's delivery order (``sequence`` as the sender got it).
       ``/diagnostics``: the node's counters (rejected and late packets), and every ``stats_period_s`` of
       simulated time one status per sending vehicle (``comms/uavN``) with its links' statistics
       (``to uavM``: sent / delivered / dropped / queued / retransmissions), stamped with the tick: they
       go into a bag like any topic.
       ``/viz/comms`` (visualization_msgs/MarkerArray, latched): the links that are up, one line each, at
       most once per ``viz_period_s`` of simulated time and only when changed (0: off).

Bad input (a source that is not the topic's vehicle, a destination out of range or the sender itself, an
unknown mode, a stamp off the tick grid or more than ``TX_AHEAD_TICKS`` (10 s) after the last tick handled)
is rejected with one warning naming the topic and the field, and
counted on /diagnostics; nothing else changes.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from visualization_msgs.msg import MarkerArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.comms import BROADCAST
from qrsim_ros.core.engine.builders import build_comms, build_scene
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED
from qrsim_ros.msg import CommsPacket
from qrsim_ros.ros import markers as viz
from qrsim_ros.ros.comms_messages import MODE_OF_MESSAGE, rx_bytes
from qrsim_ros.ros.ground_truth import GROUND_TRUTH_NODE_PARAMETERS, GroundTruthNode, Outgoing
from qrsim_ros.ros.names import MAP_FRAME, vehicle_namespace
from qrsim_ros.ros.node import Counters, run_node
from qrsim_ros.ros.parameters import Param, ParamTable
from qrsim_ros.ros.qos import QOS_LATCHED, QOS_RELIABLE
from qrsim_ros.ros.stamps import stamp_from_tick, tick_of_stamp

PARAMETERS = ParamTable(
    "comms", *GROUND_TRUTH_NODE_PARAMETERS,
    Param("stats_period_s", 1.0, "simulated time between two link-statistics arrays on /diagnostics "
          "(0: off) [s]", lo=0.0, hi=3600.0),
    Param("viz_period_s", viz.VIZ_PERIOD_S, "least simulated time between two /viz/comms (0: off) [s]",
          lo=0.0, hi=3600.0),
)

COUNTERS = ("tx_rejected", "tx_late")
#: A packet stamped more than this many ticks after the last tick handled here is refused: it would wait in
#: the node for its tick (a stamp 1e6 s ahead: for ever). Wider than the command window (one tick): this
#: node may lag the clock (by up to the lockstep window, 25 ticks; more, free-running on a loaded machine).
TX_AHEAD_TICKS = int(LIMITS["comms_stamp_ahead_ticks"].hi)


class CommsNode(GroundTruthNode):
    """The fleet's radio: ``uavN/comms/tx`` in, ``uavN/comms/rx`` out, stepped on the ground truth."""

    def __init__(self) -> None:
        super().__init__("comms", PARAMETERS)
        sc = self.scenario
        if not sc.comms.on:
            raise ValueError(f"scenario {sc.name!r} has no radio (comms.on: false): nothing for this node")
        self.radio = build_comms(sc, self.streams, build_scene(sc, self.streams))
        assert self.radio is not None
        # (tick, source, destination, payload, mode) of the packets received and not sent yet: they go to
        # the radio only within a tick's handling (``on_tick``), so a packet of a new episode never meets
        # the old episode's radio
        self._pending: list[tuple[int, int, int, bytes, str | None]] = []
        self._rx = self.per_vehicle_publishers(CommsPacket, "comms/rx")
        self._tx = [self.create_subscription(CommsPacket, f"{vehicle_namespace(i)}/comms/tx",
                                             lambda msg, i=i: self._on_tx(i, msg), QOS_RELIABLE)
                    for i in range(self.num_vehicles)]
        self.counters = Counters(self, COUNTERS)
        self._stats_pub = self.create_publisher(DiagnosticArray, "/diagnostics", QOS_RELIABLE)
        self._stats_period_ticks = round(self.params.stats_period_s / BASE_DT_S)
        self._viz = viz.VizThrottle(self.params.viz_period_s)
        self._viz_pub = self.create_publisher(MarkerArray, "/viz/comms", QOS_LATCHED)
        c = sc.comms
        self.follow_ground_truth(f"radio {c.range_m:g} m, {c.mode}, line of sight "
                                 f"{'on' if c.line_of_sight else 'off'}")

    # --- sends -------------------------------------------------------------------------------------
    def _reject(self, i: int, text: str) -> None:
        self.counters.count("tx_rejected")
        self.get_logger().warning(f"{vehicle_namespace(i)}/comms/tx: {text}; packet dropped")

    def _on_tx(self, i: int, msg: Any) -> None:
        k = tick_of_stamp(msg.header.stamp)
        if k is None:
            self._reject(i, f"header.stamp {msg.header.stamp.sec}.{msg.header.stamp.nanosec:09d} s is not a "
                            f"tick time (a multiple of {BASE_DT_S} s)")
            return
        now = self.sync.last_tick or 0
        if k > now + TX_AHEAD_TICKS:
            self._reject(i, f"header.stamp {k * BASE_DT_S:.2f} s is ahead of the simulated time "
                            f"{now * BASE_DT_S:.2f} s by more than {TX_AHEAD_TICKS * BASE_DT_S:g} s (stamp "
                            "packets with the tick they are sent at: use_sim_time)")
            return
        if msg.source != i:
            self._reject(i, f"source={msg.source} is not this topic's vehicle ({i})")
            return
        if msg.mode not in MODE_OF_MESSAGE:
            self._reject(i, f"mode={msg.mode} is not MODE_DEFAULT, MODE_DATAGRAM or MODE_RELIABLE")
            return
        dst = int(msg.destination)
        if dst != BROADCAST and not (0 <= dst < self.num_vehicles and dst != i):
            self._reject(i, f"destination={dst} must be another vehicle's index in [0, "
                            f"{self.num_vehicles - 1}] or BROADCAST ({BROADCAST})")
            return
        mode = MODE_OF_MESSAGE[msg.mode]
        if dst == BROADCAST and mode == "reliable":
            self._reject(i, "a BROADCAST is a datagram (send MODE_RELIABLE to each vehicle)")
            return
        self._pending.append((k, i, dst, bytes(msg.payload), mode))

    def _send_due(self, tick: int) -> None:
        """Send the pending packets stamped at or before ``tick`` (the radio's time), in arrival order."""
        keep = []
        for k, source, dst, payload, mode in self._pending:
            if k > tick:
                keep.append((k, source, dst, payload, mode))
                continue
            if k < tick:
                self.counters.count("tx_late")
            self.radio.send(source, dst, payload, mode)
        self._pending = keep

    # --- ticks ---------------------------------------------------------------------------------------
    def on_tick(self, k: int, x: Array, accel: Array | None, present: np.ndarray, valid: np.ndarray,
                reset: bool) -> Outgoing:
        if reset:  # a new episode: queues, statistics and sequence numbers start again
            self.radio.reset()
            stale = sum(p[0] > 0 for p in self._pending)  # the last episode's, too late
            if stale:
                self.counters.count("tx_late", stale)
            self._pending = [p for p in self._pending if p[0] == 0]
        else:  # the radio is still at t_(k-1): packets of t_(k-1) that came after its step go now, exactly
            self._send_due(k - 1)
        position_ned = x[:, STATE_POSITION_NED]
        delivered = self.radio.step(k, k * BASE_DT_S, position_ned, valid & present, self.faults.links_lost)
        self._send_due(k)  # the packets of t_k, sent after the step as Simulator.send after step()
        out: Outgoing = [(self._rx[p.receiver], rx_bytes(p, k)) for p in delivered]  # (serialised)
        if self._stats_period_ticks > 0 and k % self._stats_period_ticks == 0:
            out.append((self._stats_pub, self.link_statistics(k)))
        if self._viz.period_s > 0 and self._viz.due(k * BASE_DT_S):
            links = self.radio.links
            key = viz.content_key(position_ned[np.unique(links.pairs)] if links.pairs.size else (),
                                  links.pairs, resolution=0.5)
            if self._viz.changed(k * BASE_DT_S, key):
                out.append((self._viz_pub, viz.link_markers(position_ned, links.pairs, MAP_FRAME,
                                                            stamp_from_tick(k))))
        return out

    def link_statistics(self, k: int) -> DiagnosticArray:
        """One DiagnosticStatus per sending vehicle (``comms/uavN``): a KeyValue ``to uavM`` per link it
        has used, ``sent/delivered/dropped/queued/retransmissions`` (the radio's counts this episode)."""
        r = self.radio
        sent, delivered, dropped, queued, retx = r.sent, r.delivered, r.dropped, r.queued, r.retransmissions
        msg = DiagnosticArray()
        msg.header.stamp = stamp_from_tick(k)
        for s in range(self.num_vehicles):
            totals = (f"sent={int(sent[s].sum())} delivered={int(delivered[s].sum())} "
                      f"dropped={int(dropped[s].sum())} queued={int(queued[s].sum())}")
            values = [KeyValue(key="totals", value=totals)]
            for d in np.flatnonzero(sent[s]):
                values.append(KeyValue(key=f"to {vehicle_namespace(int(d))}",
                                       value=f"{sent[s, d]}/{delivered[s, d]}/{dropped[s, d]}/{queued[s, d]}/"
                                             f"{retx[s, d]}"))
            msg.status.append(DiagnosticStatus(
                level=DiagnosticStatus.OK, name=f"comms/{vehicle_namespace(s)}", hardware_id="qrsim_ros",
                message="links: sent/delivered/dropped/queued/retransmissions", values=values))
        return msg


def main(argv: list[str] | None = None) -> int:
    return run_node(CommsNode, argv)


if __name__ == "__main__":
    sys.exit(main())
