"""vehicle_dynamics publishes /diagnostics like the other nodes: a real node process over real
DDS (a free domain), a test-side probe that sends it a non-finite and an out-of-limits attitude command
and reads its DiagnosticArray: the rejected and clamped commands are counted, lockstep waits that timed
out are counted, and the measured tick rate and real-time factor are reported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rosenv import free_domain, require_ros, ros_env
from test_node_dynamics import NodeProcess, Probe, reliable, wait_for

pytestmark = pytest.mark.graph


def _latest(arrays: list[Any], name: str) -> dict[str, str] | None:
    """The key/values of the latest status named ``name`` in the received DiagnosticArrays."""
    for array in reversed(arrays):
        for status in array.status:
            if status.name == name:
                return {kv.key: kv.value for kv in status.values}
    return None


def _lockstep_without_wind_field(scenario: str, tmp_path: Path, domain: int) -> NodeProcess:
    """vehicle_dynamics alone in lockstep (no wind_field): a missing input times out after 0.05 s and the
    tick steps on ("continue")."""
    return NodeProcess("vehicle_dynamics", {
        "scenario": scenario, "seed": 3, "real_time_factor": 0.0, "lockstep": True,
        "lockstep_timeout_s": 0.05, "lockstep_on_timeout": "continue", "command_timeout_s": 0.0,
        "start_timeout_s": 0.0}, ros_env(tmp_path, domain), tmp_path)


def test_vehicle_dynamics_publishes_its_counters_and_pace(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    require_ros()
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from qrsim_ros.msg import AttitudeCommand

    domain = free_domain()
    # lockstep without a wind_field: every tick waits lockstep_timeout_s, then steps on ("continue")
    node = _lockstep_without_wind_field("keep_spot", tmp_path, domain)
    probe = Probe(tmp_path, domain, monkeypatch)
    try:
        arrays: list[Any] = []
        probe.node.create_subscription(DiagnosticArray, "/diagnostics", arrays.append, reliable())
        pub = probe.node.create_publisher(AttitudeCommand, "uav1/cmd/attitude", reliable())
        wait_for(lambda: pub.get_subscription_count() > 0, 30, "vehicle_dynamics's command subscription",
                 [node])
        bad = AttitudeCommand(pitch=float("nan"), roll=0.0, throttle=0.5, yaw_rate=0.0, battery_voltage=12.0)
        too_much = AttitudeCommand(pitch=0.0, roll=0.0, throttle=2.0, yaw_rate=0.0, battery_voltage=12.0)
        pub.publish(bad)  # stamp 0: never ahead of the simulated time; command_timeout_s 0: never stale
        pub.publish(too_much)

        def counted() -> bool:
            v = _latest(arrays, "/vehicle_dynamics")
            return (v is not None and int(v["commands_rejected"]) >= 1 and int(v["commands_clamped"]) >= 1
                    and int(v["lockstep_timeouts"]) >= 1 and float(v["tick_rate_hz"]) > 0)

        wait_for(counted, 30, "/diagnostics of vehicle_dynamics with the counters", [node])
        v = _latest(arrays, "/vehicle_dynamics")
        assert v is not None
        assert v["started"] == "True" and v["lockstep"] == "True" and int(v["episode"]) == 1
        assert float(v["tick_period_s"]) == pytest.approx(0.02)
        assert float(v["real_time_factor"]) == pytest.approx(float(v["tick_rate_hz"]) * 0.02, abs=2e-3)
        assert float(v["real_time_factor_target"]) == 0.0
        assert int(v["commands_rejected"]) == 1 and int(v["commands_clamped"]) == 1  # exactly what was sent
        assert int(v["wind_rejected"]) == 0 and int(v["steps"]) >= 1
        status = next(s for a in reversed(arrays) for s in a.status if s.name == "/vehicle_dynamics")
        assert status.level == DiagnosticStatus.WARN  # inputs were rejected
        stamp_s = arrays[-1].header.stamp.sec + arrays[-1].header.stamp.nanosec * 1e-9
        assert stamp_s == pytest.approx(int(_latest(arrays[-1:], "/vehicle_dynamics")["tick"]) * 0.02)
    finally:
        probe.close()
        assert node.stop() == 0, node.stderr()


def test_in_still_air_lockstep_does_not_wait_for_a_wind(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """keep_spot without turbulence (no mean wind either: still air, the Simulator's ``_still_air``):
    without a wind_field the lockstep steps on without a single timeout, where with turbulence (above)
    every tick times out waiting for uav1/wind."""
    require_ros()
    from diagnostic_msgs.msg import DiagnosticArray

    repo = Path(__file__).resolve().parents[1]
    text = (repo / "config" / "keep_spot.yaml").read_text()
    still_text = text.replace("  turbulence:\n    on: true", "  turbulence:\n    on: false")
    assert still_text != text  # the file's turbulence switch was found
    still = tmp_path / "keep_spot_still_air.yaml"
    still.write_text(still_text)
    domain = free_domain()
    node = _lockstep_without_wind_field(str(still), tmp_path, domain)
    probe = Probe(tmp_path, domain, monkeypatch)
    try:
        arrays: list[Any] = []
        probe.node.create_subscription(DiagnosticArray, "/diagnostics", arrays.append, reliable())

        def stepped() -> bool:
            v = _latest(arrays, "/vehicle_dynamics")
            return v is not None and int(v["steps"]) >= 100

        wait_for(stepped, 30, "/diagnostics of vehicle_dynamics after 100 steps", [node])
        v = _latest(arrays, "/vehicle_dynamics")
        assert v is not None and int(v["lockstep_timeouts"]) == 0, v
        assert "still air (no mean wind, no turbulence): /sim/fleet/wind is not read" in node.stderr()
    finally:
        probe.close()
        assert node.stop() == 0, node.stderr()


def test_a_late_input_waited_past_renew_after_s_is_subscribed_again(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Lockstep that waits: the probe is keep_spot's wind_field (/sim/fleet/wind stamped t_k for each tick's
    /sim/vehicle_status) but withholds tick 3's wind until vehicle_dynamics says it made that subscription
    again. The tick is re-sent every lockstep_timeout_s; past RENEW_AFTER_S of waiting the wind
    subscription is made again (the log names it with the publishers its old reader had matched), and the
    run completes through the new one."""
    require_ros()
    from qrsim_ros.msg import FleetSamples, VehicleStatus

    from qrsim_ros.ros.fleet_topics import FLEET_WIND_TOPIC, WIND_COLUMNS, fleet_samples
    from qrsim_ros.ros.renewable_inputs import RENEW_AFTER_S
    from qrsim_ros.ros.stamps import stamp_from_tick

    domain = free_domain()
    node = NodeProcess("vehicle_dynamics", {
        "scenario": "keep_spot", "seed": 3, "real_time_factor": 0.0, "lockstep": True,
        "lockstep_timeout_s": 0.5, "lockstep_on_timeout": "wait", "command_timeout_s": 0.0,
        "start_timeout_s": 0.0, "duration_s": 0.2}, ros_env(tmp_path, domain), tmp_path)
    probe = Probe(tmp_path, domain, monkeypatch)
    # the renewal names what the node's graph knows of the input's publishers: our probe
    renewed = ("tick 3: subscribed again to /sim/fleet/wind (1 publisher matched; the graph lists "
               f"/{probe.node.get_name()})")
    try:
        wind = probe.node.create_publisher(FleetSamples, FLEET_WIND_TOPIC, reliable())
        ticks: list[int] = []
        answered_after_renewal: list[int] = []

        def on_status(msg: Any) -> None:
            k = int(msg.tick)
            ticks.append(k)
            if k == 3:
                if renewed not in node.stderr():
                    return  # withheld
                answered_after_renewal.append(k)
            answer = fleet_samples(FleetSamples(), stamp_from_tick(k), "", WIND_COLUMNS, [0], [[0.0] * 3])
            wind.publish(answer)

        probe.node.create_subscription(VehicleStatus, "/sim/vehicle_status", on_status, reliable())
        assert node.wait_exit(RENEW_AFTER_S + 60) == 0, node.stderr()
        err = node.stderr()
        assert err.count("subscribed again") == 1 and renewed in err, err
        assert answered_after_renewal and "waiting for uav1/wind@t=0.06" in err  # re-sent while withheld
        assert set(ticks) == set(range(11)) and ticks.count(3) >= 2, ticks  # 0.2 s: ticks 0..10
    finally:
        probe.close()
        node.stop()
