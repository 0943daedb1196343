"""The generated qrsim_ros interfaces: they import, and travel between processes over real DDS."""

from __future__ import annotations

import json
import subprocess

import pytest
from rosenv import REPO_ROOT, interrupt, python, require_ros, ros_env


def test_generated_types_have_the_documented_fields() -> None:
    require_ros()
    from qrsim_ros.msg import (
        Altitude,
        AttitudeCommand,
        Concentration,
        GrasperCommand,
        MissionMode,
        MotorCommand,
        RatesThrustCommand,
        RunMember,
        TaskStatus,
        VehicleStatus,
    )
    from qrsim_ros.srv import GetPlumeLocations, SubmitPlumeEstimates

    assert set(AttitudeCommand.get_fields_and_field_types()) == {
        "header", "roll", "pitch", "yaw_rate", "throttle", "battery_voltage",
        # the flight controller's failsafe state, passed on to vehicle_dynamics (autopilots leave them)
        "failsafe", "disarm", "setpoints_rejected", "setpoints_clamped"}
    # the rotor airframe's lower-level inputs (docs/ROTOR.md)
    assert set(RatesThrustCommand.get_fields_and_field_types()) == {
        "header", "roll_rate_radps", "pitch_rate_radps", "yaw_rate_radps", "thrust_n"}
    assert MotorCommand.get_fields_and_field_types() == {"header": "std_msgs/Header",
                                                         "normalised": "sequence<double>"}
    assert {"run_id", "failsafe", "failsafe_onsets", "setpoints_rejected", "setpoints_clamped"} <= set(
        VehicleStatus.get_fields_and_field_types())
    assert "run_id" in RunMember.get_fields_and_field_types()
    assert {"height", "vertical_speed"} <= set(Altitude.get_fields_and_field_types())
    assert "concentration" in Concentration.get_fields_and_field_types()
    status = TaskStatus()
    assert TaskStatus.DONE_ALL_PERSONS_FOUND == "all_persons_found"
    assert {"reward", "cumulative_reward", "persons_found", "vehicle_valid", "done", "done_reason",
            "run_id"} <= set(
        status.get_fields_and_field_types())
    assert "locations" in GetPlumeLocations.Response.get_fields_and_field_types()
    assert "samples" in SubmitPlumeEstimates.Request.get_fields_and_field_types()
    # the retrieve mission's mode report, with Figure 9's height command (docs/RETRIEVE.md)
    assert MissionMode.get_fields_and_field_types() == {
        "header": "std_msgs/Header", "run_id": "string", "sequence": "uint32", "mode": "string",
        "number": "uint8", "mission_over": "string", "height_command_z_ned_m": "double"}
    # the grasper command names the latest mode report sent before it (a lockstep referee waits for it)
    assert GrasperCommand.get_fields_and_field_types() == {
        "header": "std_msgs/Header", "closed": "boolean", "mode_sequence": "uint32"}


def test_comms_packet_has_the_documented_fields_and_constants() -> None:
    """uavN/comms/tx and uavN/comms/rx (docs/COMMS.md): the fields, and the constants equal the core's."""
    require_ros()
    from qrsim_ros.msg import CommsPacket

    from qrsim_ros.core.comms import BROADCAST, MODES

    assert CommsPacket.get_fields_and_field_types() == {
        "header": "std_msgs/Header", "source": "uint32", "destination": "int32", "sequence": "uint32",
        "mode": "uint8", "payload": "sequence<uint8>"}
    assert CommsPacket.BROADCAST == BROADCAST == -1
    assert (CommsPacket.MODE_DEFAULT, CommsPacket.MODE_DATAGRAM, CommsPacket.MODE_RELIABLE) == (0, 1, 2)
    assert MODES == ("datagram", "reliable")  # MODE_DATAGRAM, MODE_RELIABLE = 1 + their index here


def test_fault_interfaces_and_their_conversions() -> None:
    """/sim/faults and the fault services (docs/FAULTS.md "Graph"): the fields, and the active faults
    through ActiveFaults and back (``to_messages.active_faults_message``, ``from_messages.active_faults``)."""
    require_ros()
    import math

    from qrsim_ros.msg import ActiveFault, ActiveFaults
    from qrsim_ros.srv import ClearFault, InjectFault

    from qrsim_ros.core.faults import ActiveFault as CoreFault
    from qrsim_ros.ros.from_messages import active_faults, fault_request
    from qrsim_ros.ros.stamps import stamp_from_tick
    from qrsim_ros.ros.to_messages import active_faults_message

    assert set(ActiveFault.get_fields_and_field_types()) == {
        "id", "vehicle", "kind", "params_yaml", "since_s", "until_s"}
    assert set(ActiveFaults.get_fields_and_field_types()) == {"header", "run_id", "episode", "faults"}
    assert set(InjectFault.Request.get_fields_and_field_types()) == {"fault_yaml"}
    assert set(InjectFault.Response.get_fields_and_field_types()) == {"success", "message", "id"}
    assert set(ClearFault.Request.get_fields_and_field_types()) == {"id", "kind", "vehicle"}
    assert set(ClearFault.Response.get_fields_and_field_types()) == {"success", "message"}

    active = [CoreFault("r", 2, "rotor_degradation", {"rotor": 1, "factor": 0.6}, 12.0, 17.0),
              CoreFault("g", 0, "gps_degradation", {"sigma_factor": 2.0, "bias_ned_m": (1.0, -2.0, 0.5),
                                                    "satellites_lost": 0}, 0.5, None),
              CoreFault("c", 1, "comm_loss", {}, 0.3, None)]
    msg = active_faults_message(active, stamp_from_tick(50), "run7", 3)
    assert (msg.run_id, msg.episode, msg.header.stamp.sec, msg.header.stamp.nanosec) == ("run7", 3, 1, 0)
    assert [(f.id, f.vehicle, f.kind) for f in msg.faults] == [
        ("r", 2, "rotor_degradation"), ("g", 0, "gps_degradation"), ("c", 1, "comm_loss")]
    assert msg.faults[0].params_yaml == "{factor: 0.6, rotor: 1}" and msg.faults[2].params_yaml == "{}"
    assert msg.faults[0].until_s == 17.0 and math.isnan(msg.faults[1].until_s)
    assert active_faults(msg) == active
    assert fault_request("{kind: gps_outage, vehicles: [0]}") == {"kind": "gps_outage", "vehicles": [0]}
    assert "not valid YAML" in fault_request("kind: [")
    assert "mapping" in fault_request("- 1")


@pytest.mark.graph
def test_attitude_command_crosses_processes(tmp_path) -> None:
    require_ros()
    env = ros_env(tmp_path)  # a free DDS domain of its own
    programs = REPO_ROOT / "test" / "programs"
    sub = subprocess.Popen([python(), str(programs / "attitude_sub.py")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pub = subprocess.Popen([python(), str(programs / "attitude_pub.py")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sub_out, sub_err = sub.communicate(timeout=60)
        _, pub_err = pub.communicate(timeout=60)
    finally:
        for p in (sub, pub):  # never left behind (a CI run left a subscriber spinning in DDS teardown)
            interrupt(p, 10.0)
    assert sub.returncode == 0, f"subscriber: {sub_err}"
    assert pub.returncode == 0, f"publisher: {pub_err}"
    got = json.loads(sub_out.strip().splitlines()[-1])
    assert got == {"frame_id": "uav1/base_link_frd", "roll": 0.1, "pitch": -0.2, "yaw_rate": 0.3,
                   "throttle": 0.59004353928, "battery_voltage": 11.5}
