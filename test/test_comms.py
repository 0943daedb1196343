"""The vehicles' radio (qrsim_ros.core.comms, docs/COMMS.md): range, line of sight, loss, latency and
bandwidth, the two delivery modes, broadcast, silencing, the scenario section and the Simulator.

Expected values come from the geometry (distances, a wall's extent), from the configured timing (ticks of
20 ms) and from the binomial distribution of the configured loss probability, never from the model.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy.stats import binomtest

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.comms import BROADCAST, CommsParams
from qrsim_ros.core.comms.radio import Radio
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import scenario_from_mapping
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.world.scene import PERSON, GroundParams, ObstacleParams, Scene, SceneParams

LIMITS = (-200.0, 200.0, -200.0, 200.0, -80.0, 0.0)
#: A significance level for the binomial tests: a correct model fails one in 10^4 runs (seeded: never).
ALPHA = 1e-4


def make_radio(n: int, seed: int = 1, scene: Scene | None = None, **kw) -> Radio:
    return Radio(n, CommsParams(on=True, **kw), RandomStreams(seed), scene)


def step(radio: Radio, k: int, positions, alive=None, silenced=None):
    p = np.asarray(positions, float)
    alive = np.ones(len(p), bool) if alive is None else np.asarray(alive, bool)
    return radio.step(k, k * BASE_DT_S, p, alive, silenced)


def wall_scene() -> Scene:
    """One building at the origin: 10 m along north ([-5, 5]), 2 m along east ([-1, 1]), 30 m high."""
    wall = ObstacleParams(type="building", center_ne_m=(0.0, 0.0), size_m=(10.0, 2.0, 30.0))
    return Scene(SceneParams(obstacles=(wall,)), LIMITS, 0.0, RandomStreams(1))


# --- range --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["datagram", "reliable"])
@pytest.mark.parametrize("offset_m, heard", [(-1e-6, True), (1e-6, False)])
def test_delivery_exactly_at_range_plus_minus_epsilon(mode: str, offset_m: float, heard: bool) -> None:
    """range_m = 100: a receiver 100 m - 1 um away (along an oblique 3-D direction) hears the sender at the
    next tick, one 100 m + 1 um away never does (a datagram is dropped, a reliable packet waits)."""
    u = np.array([2.0, 3.0, -6.0]) / 7.0  # a unit vector
    a = np.array([10.0, -20.0, -70.0])
    radio = make_radio(2, range_m=100.0, mode=mode)
    seq = radio.send(0, 1, b"ping")
    got = step(radio, 1, [a, a + (100.0 + offset_m) * u])
    expected = [(0, 1, seq, b"ping")] if heard else []
    assert [(p.source, p.receiver, p.sequence, p.payload) for p in got] == expected
    assert radio.delivered[0, 1] == int(heard)
    assert radio.dropped[0, 1] == int(not heard and mode == "datagram")
    assert radio.queued[0, 1] == int(not heard and mode == "reliable")


def test_a_send_is_never_delivered_in_the_tick_it_was_sent() -> None:
    radio = make_radio(2)
    step(radio, 1, [[0, 0, -10], [10, 0, -10]])
    radio.send(0, 1, b"x", "datagram")
    assert radio.now_s == pytest.approx(BASE_DT_S)
    got = step(radio, 2, [[0, 0, -10], [10, 0, -10]])
    assert [(p.sent_s, p.delivered_s) for p in got] == [(BASE_DT_S, 2 * BASE_DT_S)]


# --- line of sight ----------------------------------------------------------------------------------

def test_a_wall_blocks_and_moving_around_it_unblocks() -> None:
    """Vehicles 20 m either side (east) of a 2 m thick, 10 m long, 30 m high wall, 10 m up: the segment
    between them crosses the wall. With the receiver moved to north 30 the segment passes the wall's end
    (at east +-1 it is at north 14.25..15.75 > 5); above the wall (40 m up) nothing blocks either."""
    scene = wall_scene()
    radio = make_radio(2, scene=scene, mode="datagram")
    behind = [[0.0, -20.0, -10.0], [0.0, 20.0, -10.0]]
    around = [[0.0, -20.0, -10.0], [30.0, 20.0, -10.0]]
    above = [[0.0, -20.0, -40.0], [0.0, 20.0, -40.0]]
    cases = [(behind, False), (around, True), (behind, False), (above, True)]
    for k, (positions, heard) in enumerate(cases, 1):
        radio.send(0, 1, b"a")
        radio.send(1, 0, b"b")
        got = step(radio, k, positions)
        assert sorted((p.source, p.receiver) for p in got) == ([(0, 1), (1, 0)] if heard else []), k
    assert radio.delivered.tolist() == [[0, 2], [2, 0]] and radio.dropped.tolist() == [[0, 2], [2, 0]]
    # without line of sight the wall is ignored
    radio = make_radio(2, scene=scene, mode="datagram", line_of_sight=False)
    radio.send(0, 1, b"a")
    assert len(step(radio, 1, behind)) == 1


def test_landed_vehicles_on_a_flat_ground_hear_each_other() -> None:
    """Two vehicles resting on the flat ground plane (z = 0), 50 m apart with nothing between them: the
    ground does not block the link along it."""
    radio = make_radio(2, scene=wall_scene(), mode="datagram")
    radio.send(0, 1, b"a")
    assert len(step(radio, 1, [[50.0, -25.0, 0.0], [50.0, 25.0, 0.0]])) == 1


def test_a_hill_of_the_height_map_blocks() -> None:
    """A height map that is flat but for a 20 m peak at the origin (3 x 3 samples 10 m apart: along the
    east axis a tent 20 (1 - |e| / 10) m high). 5 m up at east -30 and +30 the segment crosses the tent
    (higher than 5 m for |e| < 7.5); 25 m up it passes over; 5 m up with the receiver at north 30 it
    passes east 0 at north 15, beyond the grid (flat)."""
    hill = {"type": "heightmap", "heights_m": ((0.0, 0.0, 0.0), (0.0, 20.0, 0.0), (0.0, 0.0, 0.0)),
            "cell_size_m": 10.0, "origin_ne_m": (-10.0, -10.0)}
    scene = Scene(SceneParams(ground=GroundParams(**hill)), LIMITS, 0.0, RandomStreams(1))
    radio = make_radio(2, scene=scene, mode="datagram")
    cases = [([[0.0, -30.0, -5.0], [0.0, 30.0, -5.0]], False),
             ([[0.0, -30.0, -25.0], [0.0, 30.0, -25.0]], True),
             ([[0.0, -30.0, -5.0], [30.0, 30.0, -5.0]], True)]
    for k, (positions, heard) in enumerate(cases, 1):
        radio.send(0, 1, b"a")
        assert len(step(radio, k, positions)) == int(heard), k


def test_persons_do_not_block_nor_hide_a_wall_behind_them() -> None:
    """A person standing on the line between two vehicles 1 m up is the first surface a ray meets; it
    does not block, but the wall behind it still does."""
    scene = wall_scene()
    radio = make_radio(2, scene=scene, mode="datagram")
    for k, (north_m, heard) in enumerate([(0.0, False), (20.0, True)], 1):  # through the wall, past it
        scene.set_persons([[north_m, -10.0]])
        origin = np.array([[north_m, -20.0, -1.0]])
        first = scene.cast(origin, np.array([[0.0, 1.0, 0.0]]), 40.0)
        assert scene.face_label[first.face[0]] == PERSON  # the person is in the way
        radio.send(0, 1, b"a")
        assert len(step(radio, k, [[north_m, -20.0, -1.0], [north_m, 20.0, -1.0]])) == int(heard)


# --- reliable mode -------------------------------------------------------------------------------------

def test_reliable_delivers_everything_in_order_after_a_reconnection_and_bounds_its_queue() -> None:
    """queue_limit 5: of 8 sends while out of range (150 m), 3 are dropped on arrival at the full queue;
    nothing arrives while out of range; once 50 m apart, the 5 queued ones arrive in order at one tick."""
    radio = make_radio(2, mode="reliable", queue_limit=5)
    far = [[0.0, 0.0, -10.0], [150.0, 0.0, -10.0]]
    near = [[0.0, 0.0, -10.0], [50.0, 0.0, -10.0]]
    seqs = [radio.send(0, 1, bytes([i])) for i in range(8)]
    assert seqs == list(range(8))
    assert (radio.sent[0, 1], radio.dropped[0, 1], radio.queued[0, 1]) == (8, 3, 5)
    for k in range(1, 11):
        assert step(radio, k, far) == []
    got = step(radio, 11, near)
    assert [(p.sequence, p.payload) for p in got] == [(i, bytes([i])) for i in range(5)]
    assert all(p.mode == "reliable" and p.delivered_s == pytest.approx(11 * BASE_DT_S) for p in got)
    assert (radio.delivered[0, 1], radio.dropped[0, 1], radio.queued[0, 1]) == (5, 3, 0)


def test_reliable_over_a_lossy_link_loses_nothing_and_keeps_the_order() -> None:
    """loss_probability 0.5: 40 packets all arrive, in order, after reconnecting; each tick a link makes
    transmissions until the first loss, so the draws are the deliveries plus the retransmissions."""
    radio = make_radio(2, mode="reliable", queue_limit=40, loss_probability=0.5)
    for i in range(40):
        radio.send(0, 1, i.to_bytes(2, "big"))
    got = []
    for k in range(1, 400):
        got += step(radio, k, [[0, 0, -10], [(150.0 if k < 10 else 20.0), 0, -10]])
    assert [int.from_bytes(p.payload, "big") for p in got] == list(range(40))
    assert [p.sequence for p in got] == list(range(40))
    assert radio.retransmissions[0, 1] > 0 and radio.queued[0, 1] == 0 and radio.dropped[0, 1] == 0


# --- loss -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw, distance_m, p_loss", [
    ({"loss_probability": 0.3}, 10.0, 0.3),
    ({"loss_start_m": 50.0}, 75.0, 0.5),   # halfway from loss_start_m to range_m
    ({"loss_start_m": 50.0}, 90.0, 0.8),
    ({"loss_probability": 0.2, "loss_start_m": 60.0}, 80.0, 0.2 + 0.8 * 0.5),
])
def test_datagram_loss_frequency_is_the_configured_probability(kw: dict, distance_m: float,
                                                                p_loss: float) -> None:
    n = 4000
    radio = make_radio(2, seed=11, mode="datagram", queue_limit=n, **kw)  # all n in flight at once
    for _ in range(n):
        radio.send(0, 1, b"d")
    got = step(radio, 1, [[0, 0, -10], [0, distance_m, -10]])
    lost = n - len(got)
    assert lost == radio.dropped[0, 1] and radio.queued[0, 1] == 0
    assert binomtest(lost, n, p_loss).pvalue > ALPHA, (lost / n, p_loss)


def test_no_loss_inside_loss_start() -> None:
    radio = make_radio(2, mode="datagram", loss_start_m=50.0, queue_limit=500)
    for _ in range(500):
        radio.send(0, 1, b"d")
    assert len(step(radio, 1, [[0, 0, -10], [0, 49.9, -10]])) == 500


# --- latency and bandwidth --------------------------------------------------------------------------------

def _arrival_ticks(radio: Radio, ticks: int, positions) -> list[tuple[int, int]]:
    out = []
    for k in range(1, ticks + 1):
        out += [(k, p.sequence) for p in step(radio, k, positions)]
    return out


NEAR3 = [[0, 0, -10], [10, 0, -10], [0, 10, -10]]


@pytest.mark.parametrize("mode", ["datagram", "reliable"])
def test_latency_delays_by_the_right_number_of_ticks(mode: str) -> None:
    """latency 0.1 s = 5 ticks of 20 ms: sent at t = 0, delivered at tick 5."""
    radio = make_radio(3, latency_s=0.1, mode=mode)
    radio.send(0, 1, b"x")
    assert _arrival_ticks(radio, 8, NEAR3) == [(5, 0)]


@pytest.mark.parametrize("mode", ["datagram", "reliable"])
def test_bandwidth_queues_a_senders_packets(mode: str) -> None:
    """8000 bit/s: a 100-byte payload takes 0.1 s; three sent at t = 0 end at 0.1, 0.2, 0.3 s, plus a
    latency of 0.04 s: ticks 7, 12, 17. Another sender's packet is not queued behind them (tick 7)."""
    radio = make_radio(3, latency_s=0.04, bandwidth_bps=8000.0, mode=mode)
    for _ in range(3):
        radio.send(0, 1, bytes(100))
    radio.send(2, 1, bytes(100))
    got = []
    for k in range(1, 21):
        got += [(k, p.source, p.sequence) for p in step(radio, k, NEAR3)]
    assert got == [(7, 0, 0), (7, 2, 0), (12, 0, 1), (17, 0, 2)]


def test_datagrams_a_sender_cannot_carry_are_dropped_at_the_queue_limit() -> None:
    """A sender that sends faster than its bit rate holds at most queue_limit datagrams not yet due:
    at 8000 bit/s a 100-byte datagram takes 0.1 s, so 572 sent at once queued 57 s of transmissions
    (1.57e6 s with larger floods); with queue_limit 5 the sixth and later are dropped and counted at once,
    a broadcast on every link, and once the five are delivered the sender may send again."""
    radio = make_radio(3, bandwidth_bps=8000.0, queue_limit=5, mode="datagram")
    for i in range(8):
        radio.send(0, 1, bytes([i]) * 100)
    radio.send(0, BROADCAST, bytes(100))
    assert (radio.sent[0, 1], radio.dropped[0, 1], radio.queued[0, 1]) == (9, 4, 5)
    assert (radio.sent[0, 2], radio.dropped[0, 2], radio.queued[0, 2]) == (1, 1, 0)
    got = []
    for k in range(1, 30):
        got += [(k, p.payload[0]) for p in step(radio, k, NEAR3)]
    assert [payload for _, payload in got] == [0, 1, 2, 3, 4]  # the first five, in order, 0.1 s apart
    assert [k for k, _ in got] == [5, 10, 15, 20, 25]
    radio.send(0, 1, bytes([9]) * 100)  # room again
    assert radio.queued[0, 1] == 1 and radio.dropped[0, 1] == 4


# --- broadcast and silencing --------------------------------------------------------------------------------

def test_broadcast_reaches_exactly_the_vehicles_in_range() -> None:
    """From vehicle 0, receivers at 50, 99.9, 100.1 and 150 m (range 100): only the first two hear it."""
    radio = make_radio(5)
    positions = [[0, 0, -10], [0, 50, -10], [99.9, 0, -10], [0, -100.1, -10], [150, 0, -10]]
    radio.send(0, BROADCAST, b"all")
    got = step(radio, 1, positions)
    assert sorted(p.receiver for p in got) == [1, 2]
    assert all(p.destination == BROADCAST and p.mode == "datagram" for p in got)
    assert radio.sent[0].tolist() == [0, 1, 1, 1, 1]
    assert radio.delivered[0].tolist() == [0, 1, 1, 0, 0] and radio.dropped[0].tolist() == [0, 0, 0, 1, 1]
    with pytest.raises(ValueError, match="broadcast is a datagram"):
        radio.send(0, BROADCAST, b"x", mode="reliable")


def test_silenced_and_dead_vehicles_neither_send_nor_receive() -> None:
    radio = make_radio(3, mode="datagram")
    radio.send(0, 1, b"to silenced")
    radio.send(1, 2, b"from silenced")
    radio.send(0, 2, b"unaffected")
    got = step(radio, 1, NEAR3, silenced=[False, True, False])
    assert [p.payload for p in got] == [b"unaffected"]
    radio.send(0, 2, b"to dead")
    assert step(radio, 2, NEAR3, alive=[True, True, False]) == []
    # reliable: waits for the silence to end
    radio.send(0, 1, b"later", mode="reliable")
    assert step(radio, 3, NEAR3, silenced=[False, True, False]) == []
    assert [p.payload for p in step(radio, 4, NEAR3)] == [b"later"]


def test_send_rejects_bad_arguments() -> None:
    radio = make_radio(2)
    for args, key in [((2, 0, b""), "source"), ((0, 5, b""), "destination"), ((0, 0, b""), "itself"),
                      ((0, 1, "text"), "payload"), ((0, 1, b"", "tcp"), "mode"), ((True, 1, b""), "source")]:
        with pytest.raises(ValueError, match=key):
            radio.send(*args)


# --- the scenario section ---------------------------------------------------------------------------------

def test_comms_is_off_by_default_with_the_papers_defaults() -> None:
    p = scenario_from_mapping({"task": {"type": "keep_spot"}}).comms
    assert (p.on, p.range_m, p.line_of_sight, p.mode, p.latency_s, p.bandwidth_bps) == (
        False, 100.0, True, "reliable", 0.0, None)
    assert Simulator.from_scenario("keep_spot", {"seed": 1}).comms is None


@pytest.mark.parametrize("section, key", [
    ({"range_m": -1}, "range_m"),
    ({"range_m": 0}, "range_m"),
    ({"range_m": "far"}, "range_m"),
    ({"loss_probability": 1.5}, "loss_probability"),
    ({"loss_start_m": 100.0}, "loss_start_m"),
    ({"loss_start_m": -1.0}, "loss_start_m"),
    ({"latency_s": -0.1}, "latency_s"),
    ({"bandwidth_bps": 0}, "bandwidth_bps"),
    ({"mode": "tcp"}, "mode"),
    ({"queue_limit": 0}, "queue_limit"),
    ({"queue_limit": 2.5}, "queue_limit"),
    ({"on": "yes"}, "on"),
    ({"rnage_m": 5}, "rnage_m"),
])
def test_bad_comms_values_give_one_clear_error(section: dict, key: str) -> None:
    with pytest.raises(ScenarioError, match=rf"comms.*{key}") as info:
        scenario_from_mapping({"task": {"type": "keep_spot"}, "comms": {"on": True, **section}}, "x.yaml")
    assert str(info.value).startswith("x.yaml: comms")
    assert isinstance(info.value, ValueError)


# --- the Simulator ----------------------------------------------------------------------------------------

def comms_sim(seed: int, **overrides) -> Simulator:
    """Three hovering vehicles 30 m apart in a row, a lossy datagram radio."""
    return Simulator.from_scenario("keep_spot", {
        "seed": seed, "num_vehicles": 3,
        "task": {"dt_s": 0.1, "duration_steps": 50},
        "area": {"limits_ned": [-100.0, 100.0, -100.0, 100.0, -40.0, 0.0]},
        "vehicle": {"control": "velocity", "dyn_noise": [0.0] * 6, "turbulence": {"on": False},
                    "initial_states": [[0.0, -30.0, -10.0, 0, 0, 0], [0.0, 0.0, -10.0, 0, 0, 0],
                                       [0.0, 30.0, -10.0, 0, 0, 0]]},
        "comms": {"on": True, "mode": "datagram", "loss_probability": 0.5},
        **overrides,
    })


def run_chatter(sim: Simulator, steps: int = 20) -> list[tuple]:
    """Every vehicle broadcasts every task step; everything received, in order."""
    log = []
    for i in range(steps):
        for v in range(3):
            sim.send(v, BROADCAST, bytes([v, i]))
        sim.step(np.zeros((3, 3)))
        for v in range(3):
            log += [(v, p.source, p.sequence, p.payload, round(p.delivered_s, 6)) for p in sim.receive(v)]
    return log


def test_simulator_same_seed_same_deliveries_different_seed_different_losses() -> None:
    a, b, c = run_chatter(comms_sim(5)), run_chatter(comms_sim(5)), run_chatter(comms_sim(6))
    assert a == b
    assert a != c
    # 20 steps x 3 senders x 2 receivers at p = 0.5
    assert binomtest(len(a), 120, 0.5).pvalue > ALPHA
    # deliveries come one tick after the send (the task step's first tick)
    steps_after = [(t - 0.02) / 0.1 for *_, t in a]
    assert np.allclose(steps_after, np.round(steps_after), atol=1e-6)


def test_simulator_reset_clears_queues_and_inboxes() -> None:
    sim = comms_sim(5, comms={"on": True, "mode": "reliable", "range_m": 20.0})  # vehicles 30 m apart
    sim.send(0, 1, b"never")
    sim.step(np.zeros((3, 3)))
    assert sim.comms.queued[0, 1] == 1 and sim.receive(1) == []
    sim.send(1, 0, b"unread")
    sim.reset()
    assert sim.comms.queued.sum() == 0 and sim.comms.sent.sum() == 0
    sim.step(np.zeros((3, 3)))
    assert sim.receive(0) == [] and sim.receive(1) == []
    with pytest.raises(ValueError, match="vehicle"):
        sim.receive(3)


def test_simulator_comm_loss_fault_silences_a_vehicle() -> None:
    """comm_loss on vehicle 1 from 0.5 s to 1.5 s: nothing from or to it in that time, lossless radio."""
    sim = comms_sim(3, comms={"on": True, "mode": "datagram"},
                    faults=[{"kind": "comm_loss", "vehicles": 1, "trigger": {"at_time_s": 0.5},
                             "duration_s": 1.0}])
    heard = []
    for _ in range(25):
        for v in range(3):
            sim.send(v, BROADCAST, b"")
        sim.step(np.zeros((3, 3)))
        for v in range(3):
            heard += [(round(p.delivered_s, 2), p.source, v) for p in sim.receive(v)]
    silent = [(t, s, r) for t, s, r in heard if 0.5 <= t < 1.5 and 1 in (s, r)]
    assert silent == []
    assert {(s, r) for t, s, r in heard if 0.5 <= t < 1.5} == {(0, 2), (2, 0)}
    assert {(s, r) for t, s, r in heard if t >= 1.6} == {(s, r) for s in range(3) for r in range(3) if s != r}


@pytest.mark.parametrize("line_of_sight", [True, False])
def test_simulator_radio_sees_the_scenario_scene(line_of_sight: bool) -> None:
    """The scenario's scene reaches the radio: a 30 m high wall at east 14..16, north -5..5 stands between
    vehicle 2 (east 30) and vehicles 0 and 1 (east -30 and 0), all at north 0, 10 m up; 0 and 1 see each
    other."""
    wall = {"type": "building", "center_ne_m": [0.0, 15.0], "size_m": [10.0, 2.0, 30.0]}
    sim = comms_sim(4, comms={"on": True, "mode": "datagram", "line_of_sight": line_of_sight},
                    scene={"obstacles": [wall]})
    for source, destination in [(0, 1), (0, 2), (1, 2)]:
        sim.send(source, destination, b"")
    sim.step(np.zeros((3, 3)))
    got = sorted((p.source, p.receiver) for v in range(3) for p in sim.receive(v))
    assert got == ([(0, 1)] if line_of_sight else [(0, 1), (0, 2), (1, 2)])


def test_simulator_without_comms_refuses_send() -> None:
    sim = Simulator.from_scenario("keep_spot", {"seed": 1})
    with pytest.raises(RuntimeError, match=r"comms\.on"):
        sim.send(0, BROADCAST, b"")


# --- scale ------------------------------------------------------------------------------------------------

def _brute_force_up(p: np.ndarray, range_m: float) -> set[tuple[int, int]]:
    d = np.sqrt(((p[:, None, :] - p[None, :, :]) ** 2).sum(-1))
    return {(i, j) for i in range(len(p)) for j in range(i + 1, len(p)) if d[i, j] <= range_m}


@pytest.mark.parametrize("n", [1, 10, 50])
def test_step_time_and_links_against_brute_force(n: int) -> None:
    """Every vehicle broadcasts each tick, vehicles scattered over 300 m x 300 m without obstacles: the
    links are exactly the pairs within range (an independent O(N^2) distance table), each receiver hears
    one broadcast per in-range neighbour. Step time is printed (not asserted)."""
    rng = np.random.default_rng(n)
    p = np.column_stack([rng.uniform(-150, 150, (n, 2)), rng.uniform(-40, -5, n)])
    radio = make_radio(n, mode="datagram")
    expected = _brute_force_up(p, 100.0)
    ticks = 50
    t0 = time.perf_counter()
    for k in range(1, ticks + 1):
        for v in range(n):
            radio.send(v, BROADCAST, b"state")
        got = step(radio, k, p)
    dt = (time.perf_counter() - t0) / ticks
    assert {tuple(pair) for pair in radio.links.pairs.tolist()} == expected
    assert len(got) == 2 * len(expected)
    print(f"\n{n} vehicles, all broadcasting: {dt * 1e3:.3f} ms per tick (send + step), "
          f"{len(expected)} links")
