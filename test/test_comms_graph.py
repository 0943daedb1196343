"""The radio over the graph (docs/COMMS.md, qrsim_ros.nodes.comms): the real
comms node process over DDS, driven tick by tick with the in-process Simulator's ground truth and active
faults (as test_node_sensors does for the sensor nodes), with the same sends on ``uavN/comms/tx``: every
``uavN/comms/rx`` delivery equals the Simulator's (``Simulator.send`` / ``receive``), tick for tick, in
order, through losses (a lossy radio edge), latency, a comm_loss fault, broadcasts and both modes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from rosenv import REPO_ROOT, free_domain, require_ros, ros_env, wait_until
from test_node_sensors import (
    GroundTruthPublisher,
    Harness,
    NodeProcess,
    stop_all,
    wait_for,
    wait_for_graph,
)

pytestmark = pytest.mark.graph

SEED, N, TICKS = 17, 3, 90
TICK_TIMEOUT_S = 20.0
#: Three hovering vehicles on a line: 0-1 at 18 m (loss 0.1), 1-2 at 27 m (near the range's edge: loss
#: about 0.7), 0-2 at 45 m (out of range).
X0 = [[0.0, 0.0, -20.0, 0.0, 0.0, 0.0], [18.0, 0.0, -20.0, 0.0, 0.0, 0.0], [45.0, 0.0, -20.0, 0.0, 0.0, 0.0]]
COMMS = {"on": True, "range_m": 30.0, "loss_probability": 0.1, "loss_start_m": 20.0, "latency_s": 0.04,
         "mode": "reliable", "queue_limit": 20}
#: vehicle 1 (the middle one) without a radio from 0.6 s for 0.4 s: ticks 30..49
FAULTS = [{"id": "radio_down", "kind": "comm_loss", "vehicles": [1], "trigger": {"at_time_s": 0.6},
           "duration_s": 0.4}]
SILENT = range(30, 50)


def _scenario(tmp_path: Path) -> Path:
    from qrsim_ros.core.config.loader import load_yaml, merge

    data = load_yaml((REPO_ROOT / "config" / "keep_spot.yaml").read_text(encoding="utf-8"))
    data = merge(data, {"name": "comms_graph", "num_vehicles": N, "comms": COMMS, "faults": FAULTS,
                        "task": {"duration_steps": 100000},
                        "area": {"limits_ned": [-100.0, 100.0, -100.0, 100.0, -60.0, 0.0]},
                        "vehicle": {"control": "velocity", "initial_states": X0}})
    path = tmp_path / "comms_graph.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _sends(k: int) -> list[tuple[int, int, str | None]]:
    """What the vehicles send after tick k: (source, destination, mode); -1 = BROADCAST."""
    out: list[tuple[int, int, str | None]] = [(i, (i + 1) % N, None if k % 2 else "datagram")
                                              for i in range(N)]
    out += [(i, (i - 1) % N, "reliable") for i in range(N) if k % 3 == 0]
    if k % 4 == 0:
        out.append((k // 4 % N, -1, None))
    return out


def _payload(source: int, k: int, n: int) -> bytes:
    return f"{source}@{k}#{n}".encode()


def _key(source: int, destination: int, sequence: int, mode: str, payload: bytes) -> tuple[Any, ...]:
    return (source, destination, sequence, mode, payload)


def test_comms_node_delivers_what_the_simulator_delivers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    require_ros()
    from qrsim_ros.msg import CommsPacket, TickProgress

    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.ros.comms_messages import MESSAGE_MODE
    from qrsim_ros.ros.names import TICK_PROGRESS_TOPIC
    from qrsim_ros.ros.stamps import stamp_from_tick

    scenario = _scenario(tmp_path)
    sim = Simulator.from_scenario(scenario, {"seed": SEED})
    action = np.zeros((N, sim.action_spec["width"]))
    truth_rows, sim_rx = [], {}
    for k in range(TICKS + 1):
        if k:
            sim.step(action)
        assert bool(np.all(sim.valid))
        truth_rows.append((sim.true_state().copy(), sim.fleet.accel_body.copy(), list(sim.active_faults)))
        for r in range(N):
            sim_rx[(r, k)] = [_key(p.source, p.destination, p.sequence, p.mode, p.payload)
                              for p in sim.receive(r)]
        for n, (s, d, mode) in enumerate(_sends(k)):
            sim.send(s, d, _payload(s, k, n), mode)
    delivered = sum(len(v) for v in sim_rx.values())
    sent_links = int(sim.comms.sent.sum())
    # the scenario exercises what it should: deliveries, losses or waits, and vehicle 1 deaf while silenced
    assert 100 < delivered < sent_links
    assert all(not sim_rx[(1, k)] for k in SILENT)
    assert any(sim_rx[(1, k)] for k in range(SILENT[-1] + 1, TICKS))
    assert not any(p[0] == 0 and r == 2 for (r, _), v in sim_rx.items() for p in v)  # 45 m: never in range

    domain = free_domain()
    env = ros_env(tmp_path, domain)
    harness = Harness(tmp_path, domain, monkeypatch)
    procs: list[NodeProcess] = []
    progress: dict[int, int] = {}
    try:
        procs.append(NodeProcess("comms", {"scenario": str(scenario), "seed": SEED, "num_vehicles": N},
                                 env, tmp_path / "logs"))
        rx_topics = [f"/uav{r + 1}/comms/rx" for r in range(N)]
        for topic in rx_topics:
            harness.subscribe(CommsPacket, topic)

        def on_progress(msg: Any) -> None:
            if msg.node == "/comms":
                with harness.lock:
                    progress[int(msg.tick)] = progress.get(int(msg.tick), 0) + 1

        harness.node.create_subscription(TickProgress, TICK_PROGRESS_TOPIC, on_progress, 100)
        tx = [harness.node.create_publisher(CommsPacket, f"/uav{i + 1}/comms/tx", 1000) for i in range(N)]
        truth = GroundTruthPublisher(harness, N)
        wait_for_graph(harness, truth, 1, rx_topics, procs)
        wait_for(lambda: all(p.get_subscription_count() >= 1 for p in tx), 60.0, "the tx subscriptions",
                 procs)
        # A reader drops a writer's samples until it has discovered that writer itself, whatever the writer
        # sees: a malformed packet on each tx topic (a wrong source: rejected with a warning naming the topic,
        # never sent), repeated until the node has warned about every topic, proves it hears them all.
        def heard(i: int) -> bool:
            return f"uav{i + 1}/comms/tx: source=" in procs[0].log()

        next_probe = 0.0

        def heard_all() -> bool:  # probing the topics not heard yet every 0.5 s
            nonlocal next_probe
            assert procs[0].proc.poll() is None, procs[0].log()[-2000:]
            if all(heard(i) for i in range(N)):
                return True
            if time.monotonic() >= next_probe:
                for i in (i for i in range(N) if not heard(i)):
                    m = CommsPacket(source=(i + 1) % N, destination=i, payload=b"probe")
                    m.header.stamp = stamp_from_tick(0)
                    tx[i].publish(m)
                next_probe = time.monotonic() + 0.5
            return False

        wait_until(heard_all, 60.0, "the comms node's warning about every tx topic (its log)", poll_s=0.005,
                   detail=lambda: procs[0].log()[-2000:])
        # a packet stamped 1e6 s ahead would wait in the node for ever: refused at once, named
        future = CommsPacket(source=0, destination=1, payload=b"later")
        future.header.stamp = stamp_from_tick(50_000_000)
        tx[0].publish(future)
        wait_until(lambda: "is ahead of the simulated time 0.00 s by more than 10 s" in procs[0].log(), 30.0,
                   "the comms node's refusal of a packet stamped 1e6 s ahead",
                   detail=lambda: procs[0].log()[-2000:])
        for k, (x, a, faults) in enumerate(truth_rows):
            # the sends of tick k go out before its ground truth: the node holds them until it reaches t_k
            for n, (s, d, mode) in enumerate(_sends(k)):
                m = CommsPacket(source=s, destination=d, payload=_payload(s, k, n),
                                mode=CommsPacket.MODE_DEFAULT if mode is None else MESSAGE_MODE[mode])
                m.header.stamp = stamp_from_tick(k)
                tx[s].publish(m)
            truth.publish(k, x, a, 1, faults)
            wait_for(lambda k=k: progress.get(k, 0) >= 1, TICK_TIMEOUT_S, f"the comms node's tick {k}",
                     procs)
        codes = stop_all(procs)
    finally:
        stop_all(procs)
        harness.close()
    assert codes == {"comms": 0}, codes

    mode_of = {v: k for k, v in MESSAGE_MODE.items()}
    for r in range(N):
        for k in range(TICKS + 1):
            got = [_key(m.source, m.destination, m.sequence, mode_of[m.mode], bytes(m.payload))
                   for m in harness.got.get((1, f"/uav{r + 1}/comms/rx", k), [])]
            assert got == sim_rx[(r, k)], (r, k)
    dropped = [line for line in procs[0].log().splitlines() if "packet dropped" in line]
    # the probes and the packet from the future only
    assert sum("header.stamp 1000000.00 s is ahead" in line for line in dropped) == 1
    assert all("is not this topic's vehicle" in line or "header.stamp 1000000.00 s is ahead" in line
               for line in dropped)
