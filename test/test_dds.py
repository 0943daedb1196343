"""DDS isolation: domains checked and chosen, another simulator's domain refused, Fast DDS on
loopback only.

- Pure: ``qrsim_ros.dds`` (ROS_DOMAIN_ID 0..232, free domains claimed across processes, the environment
  of a graph), the shipped Fast DDS profile, ``launch_setup.launch_environment`` (the launch files' check)
  and ``qrsim launch``'s domain options (one line for a bad domain, from the option or the environment).
- Real graphs (``qrsim launch keep_spot``, each in a free domain): a second launch in the same domain is
  refused with one line before any node starts while ``--domain-id auto`` runs beside it; every UDP/TCP
  socket of a launched graph's processes is bound to loopback (multicast groups aside), and with
  ``--network`` they are not.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rosenv import (
    REPO_ROOT,
    TestProcess,
    free_domain,
    inet_sockets,
    python,
    qrsim_launch,
    require_ros,
    ros_env,
    spin_until,
)

from qrsim_ros import dds
from qrsim_ros.launch_plan import PlanError
from qrsim_ros.launch_setup import launch_environment

PROFILE = REPO_ROOT / "config" / dds.LOCALHOST_PROFILE
NS = {"f": "http://www.eprosima.com"}


# --- domains --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "domain"), [("0", 0), ("232", 232), (" 7 ", 7), (42, 42)])
def test_valid_domain_ids(value: object, domain: int) -> None:
    assert dds.parse_domain_id(value, "--domain-id") == domain


@pytest.mark.parametrize("value", ["-1", "233", "1000", "x", "1.5", "", True, "9" * 200])
def test_invalid_domain_ids_are_one_line_naming_the_source(value: object) -> None:
    with pytest.raises(dds.DomainError) as err:
        dds.parse_domain_id(value, "--domain-id")
    text = str(err.value)
    assert text.startswith("--domain-id ") and "0..232" in text and "\n" not in text
    assert len(text) < 200  # a long value is shortened


def test_domain_from_the_environment() -> None:
    assert dds.domain_id_from_environment({}) == 0  # ROS's default
    assert dds.domain_id_from_environment({"ROS_DOMAIN_ID": ""}) == 0
    domain = free_domain()  # any valid one: a free one, so nothing here could name another suite's
    assert dds.domain_id_from_environment({"ROS_DOMAIN_ID": str(domain)}) == domain
    beyond = dds.DOMAIN_ID_MAX + 68  # out of range: no DDS domain at all
    with pytest.raises(dds.DomainError, match=rf"the environment's ROS_DOMAIN_ID '{beyond}' .* 0\.\.232"):
        dds.domain_id_from_environment({"ROS_DOMAIN_ID": str(beyond)})


def test_a_bound_discovery_port_marks_a_domain_in_use() -> None:
    domain = free_domain()
    assert not dds.domain_in_use(domain)
    # as Fast DDS with the loopback profile: the first participant's unicast port on 127.0.0.1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", dds.discovery_port(domain)))
        assert dds.domain_in_use(domain)
    # as any participant listening for multicast discovery: the multicast port, with address reuse
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", dds.PORT_BASE + dds.DOMAIN_GAIN * domain))
        assert dds.domain_in_use(domain)
    assert not dds.domain_in_use(domain) and dds.count_participants(domain) == 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s0, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s2:
        s0.bind(("127.0.0.1", dds.discovery_port(domain)))  # participants 0 and 2 (1 has left)
        s2.bind(("127.0.0.1", dds.discovery_port(domain) + 4))
        assert dds.count_participants(domain) == 2
    assert dds.discovery_port(dds.DOMAIN_ID_MAX) < 65536 <= dds.discovery_port(dds.DOMAIN_ID_MAX + 1)


def test_free_domains_are_claimed_across_processes() -> None:
    """Two suites choosing at the same moment never get the same domain: a claim holds until the
    process ends, whether or not its graph has bound the ports yet."""
    mine = {free_domain(), free_domain()}
    assert len(mine) == 2 and all(1 <= d <= dds.DOMAIN_ID_MAX for d in mine)
    code = ("import sys; from qrsim_ros import dds; "
            f"taken = {sorted(mine)}; "
            "claimable = [d for d in taken if dds._reserve(d)]; "
            "mine = dds.free_domain(start=taken[0]); "
            "print(claimable, mine in taken)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "False"], out.stdout


def test_a_graph_claim_is_seen_by_other_processes_at_once() -> None:
    """A launcher's claim on its graph's domain answers another launcher on this machine without DDS
    discovery (which under load took longer than its wait), and a process's later runs find it theirs."""
    domain, other = free_domain(), free_domain()  # reserved: no other suite's graph runs in them
    assert dds.claim_graph(domain) and dds.claim_graph(domain)  # held, and this process's own
    code = f"from qrsim_ros import dds; print(dds.claim_graph({domain}), dds.claim_graph({other}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"], out.stdout


def test_the_environment_of_a_graph(tmp_path: Path) -> None:
    env = dds.dds_environment({"PATH": "/bin"}, 12)
    assert env["ROS_DOMAIN_ID"] == "12"
    assert Path(env["FASTDDS_DEFAULT_PROFILES_FILE"]).name == dds.LOCALHOST_PROFILE
    assert Path(env["FASTDDS_DEFAULT_PROFILES_FILE"]).is_file()
    # the profile decides: rmw_fastrtps's LOCALHOST range would add a UDP transport on every interface
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT"
    assert dds.dds_environment({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"})[
        "ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT"  # loopback unless --network
    own = tmp_path / "mine.xml"
    users = dds.dds_environment({"FASTDDS_DEFAULT_PROFILES_FILE": str(own)})
    assert users["FASTDDS_DEFAULT_PROFILES_FILE"] == str(own)  # a user's profile is kept
    assert users["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    net = dds.dds_environment(env, network=True)
    assert net["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET" and "FASTDDS_DEFAULT_PROFILES_FILE" not in net
    assert net["FASTDDS_BUILTIN_TRANSPORTS"] == "UDPv4"  # every interface, no shared memory
    assert dds.dds_environment({"FASTDDS_BUILTIN_TRANSPORTS": "DEFAULT"}, network=True)[
        "FASTDDS_BUILTIN_TRANSPORTS"] == "DEFAULT"  # the user's choice is kept
    assert dds.dds_environment({"FASTDDS_DEFAULT_PROFILES_FILE": str(own)}, network=True)[
        "FASTDDS_DEFAULT_PROFILES_FILE"] == str(own)


def test_the_profile_binds_every_transport_to_loopback() -> None:
    root = ET.parse(PROFILE).getroot()
    assert root.tag == "{http://www.eprosima.com}dds"
    transports = {t.findtext("f:transport_id", namespaces=NS): t
                  for t in root.findall("f:profiles/f:transport_descriptors/f:transport_descriptor", NS)}
    participants = root.findall("f:profiles/f:participant", NS)
    assert len(participants) == 1 and participants[0].get("is_default_profile") == "true"
    rtps = participants[0].find("f:rtps", NS)
    assert rtps.findtext("f:useBuiltinTransports", namespaces=NS) == "false"
    used = [t.text for t in rtps.findall("f:userTransports/f:transport_id", NS)]
    assert sorted(used) == sorted(transports)
    kinds = {transports[u].findtext("f:type", namespaces=NS): transports[u] for u in used}
    # UDPv4 only: Fast DDS's shared-memory transport loses a participant's port for good when its
    # listening thread misses its 1 s liveness check (a loaded machine), and with it discovery
    assert set(kinds) == {"UDPv4"}
    allowed = [i.get("name") for i in kinds["UDPv4"].findall("f:interfaces/f:allowlist/f:interface", NS)]
    assert allowed == ["127.0.0.1"]
    peers = rtps.findall("f:builtin/f:initialPeersList/f:locator/f:udpv4/f:address", NS)
    assert [p.text for p in peers] == ["127.0.0.1"]
    # lost samples repaired within 0.1 s (Fast DDS's default heartbeat is every 3 s: after a short run)
    writers = root.findall("f:profiles/f:data_writer", NS)
    assert len(writers) == 1 and writers[0].get("is_default_profile") == "true"
    period = writers[0].find("f:times/f:heartbeat_period", NS)
    assert int(period.findtext("f:sec", namespaces=NS)) == 0
    assert int(period.findtext("f:nanosec", namespaces=NS)) <= 100_000_000
    installed = REPO_ROOT / "install" / "qrsim_ros" / "share" / "qrsim_ros" / "config" / dds.LOCALHOST_PROFILE
    if installed.exists():  # CMakeLists.txt installs config/ to share/
        assert installed.read_bytes() == PROFILE.read_bytes()


def test_the_launch_files_check_the_domain_and_set_the_profile(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as err:
        launch_environment({"ROS_DOMAIN_ID": str(dds.DOMAIN_ID_MAX + 1)})  # the first invalid one
    assert f"ROS_DOMAIN_ID '{dds.DOMAIN_ID_MAX + 1}'" in str(err.value) and "0..232" in str(err.value)
    assert "\n" not in str(err.value)
    env = launch_environment({"ROS_DOMAIN_ID": str(free_domain()),
                              "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"})
    assert Path(env["FASTDDS_DEFAULT_PROFILES_FILE"]).name == dds.LOCALHOST_PROFILE
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT" and "ROS_DOMAIN_ID" not in env
    own = str(tmp_path / "mine.xml")
    users = {"FASTDDS_DEFAULT_PROFILES_FILE": own, "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}
    # the user's own profile and range; the nodes' Python runs with -O (launch_setup.node_environment)
    assert launch_environment(users) == {"PYTHONOPTIMIZE": "1"}
    assert launch_environment({**users, "PYTHONOPTIMIZE": "0"}) == {}  # the user's choice is kept


# --- qrsim launch: the options ----------------------------------------------------------------------------

#: Values that are no DDS domain at all, from the valid range's end (none names a domain a test could use).
FIRST_INVALID_DOMAIN = str(dds.DOMAIN_ID_MAX + 1)
FAR_INVALID_DOMAIN = str(dds.DOMAIN_ID_MAX + 767)


@pytest.mark.parametrize(("argv", "env", "message"), [
    (["--domain-id", FIRST_INVALID_DOMAIN], {},
     f"--domain-id '{FIRST_INVALID_DOMAIN}' is not a ROS_DOMAIN_ID: it must be an integer "
     f"0..{dds.DOMAIN_ID_MAX}"),
    (["--domain-id", "many"], {}, "--domain-id 'many' is not a ROS_DOMAIN_ID"),
    ([], {"ROS_DOMAIN_ID": FAR_INVALID_DOMAIN},
     f"the environment's ROS_DOMAIN_ID '{FAR_INVALID_DOMAIN}' is not a ROS_DOMAIN_ID"),
    ([], {"ROS_DOMAIN_ID": "-3"}, "the environment's ROS_DOMAIN_ID '-3' is not a ROS_DOMAIN_ID"),
])
def test_launch_rejects_a_bad_domain_in_one_line(argv: list[str], env: dict[str, str], message: str,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from qrsim_ros.cli.main import main

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    before = dict(os.environ)
    rc = main(["launch", "keep_spot", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1, err
    assert "--domain-id auto" in err  # how to choose another
    assert dict(os.environ) == before  # refused before anything was set up


def test_launch_help_names_the_domain_range_and_the_ephemeral_ports(
        capsys: pytest.CaptureFixture[str]) -> None:
    from qrsim_ros.cli.main import main

    with pytest.raises(SystemExit):
        main(["launch", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--domain-id N|auto" in out and "0..232" in out and "ephemeral" in out and "--network" in out


# --- real graphs ----------------------------------------------------------------------------------------

def _stop(launch: TestProcess, timeout_s: float = 60.0) -> int:
    """Ctrl-C, as a user stops it; its exit status."""
    launch.send_signal(signal.SIGINT)
    try:
        return launch.wait(timeout_s)
    finally:
        launch.close()


@pytest.mark.graph
@pytest.mark.timeout(300)
def test_a_second_graph_in_the_same_domain_is_refused(tmp_path: Path) -> None:
    """Two launches in one domain used to fly each other's commands: the second is refused with one line
    before any node starts, and --domain-id auto runs beside the first in a domain of its own. The first
    prints its threads' stacks on SIGUSR1 and still stops cleanly."""
    require_ros()
    domain = free_domain()
    env = ros_env(tmp_path, domain)
    first = qrsim_launch(tmp_path, ["keep_spot", "--no-autopilot", "--seed", "3", "--duration", "120"],
                         domain_id=domain)
    try:
        first.wait_for_line(r"\[vehicle_dynamics\].*started: tick 0", 120)
        # SIGUSR1 prints the running launcher's every thread (how a hung launch says where it waits),
        # and the run goes on to a clean stop
        assert first.ask_for_stacks(30), first.output[-3000:]
        first.wait_for_line(r'File ".*qrsim_ros/cli/launch\.py", line \d+ in (watch|start)$', 10)
        t0 = time.monotonic()
        second = subprocess.run([sys.executable, "-m", "qrsim_ros.cli.main", "launch", "keep_spot",
                                 "--no-autopilot", "--duration", "1"], env=env, cwd=tmp_path,
                                capture_output=True, text=True, timeout=120)
        refused_after_s = time.monotonic() - t0
        assert second.returncode == 2, second.stdout + second.stderr
        assert second.stderr.count("\n") == 1, second.stderr
        assert f"ROS_DOMAIN_ID {domain} is taken" in second.stderr and "--domain-id auto" in second.stderr
        assert "started " not in second.stdout, second.stdout  # not one node
        print(f"\nrefused in {refused_after_s:.1f} s: {second.stderr.strip()}")

        auto = subprocess.run([sys.executable, "-m", "qrsim_ros.cli.main", "launch", "keep_spot",
                               "--no-autopilot", "--seed", "4", "--duration", "1", "--real-time-factor", "0",
                               "--domain-id", "auto"], env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=180)
        assert auto.returncode == 0, auto.stdout[-3000:] + auto.stderr
        chosen = re.search(r"DDS: ROS_DOMAIN_ID (\d+) \(free, chosen by --domain-id auto\)", auto.stdout)
        assert chosen and int(chosen.group(1)) != domain, auto.stdout[-3000:]
        assert f"export ROS_DOMAIN_ID={chosen.group(1)}" in auto.stdout
        assert "It simulated 1.00 s" in auto.stdout and "All 6 processes stopped cleanly" in auto.stdout
        # (the first graph may have ended its 20 s episode meanwhile on a loaded machine)
    finally:
        rc = _stop(first)
    assert rc == 0, first.output[-3000:]
    summary = first.wait_for_line(r"^Summary: ", 5)
    assert "All 6 processes stopped cleanly" in summary, summary


@pytest.mark.graph
def test_a_sigint_after_the_run_has_ended_keeps_its_clean_exit_status(tmp_path: Path) -> None:
    """A Ctrl-C that races the episode's own end (after the summary, during the interpreter's shutdown)
    used to raise KeyboardInterrupt and turn a clean run's status 0 into -2: it is counted now."""
    require_ros()
    argv = ["keep_spot", "--no-autopilot", "--seed", "3", "--duration", "1", "--real-time-factor", "0"]
    with qrsim_launch(tmp_path, argv) as launch:
        summary = launch.wait_for_line(r"^Summary: ", 180)
        sent = 0
        while launch.proc.poll() is None:  # a burst until the process is gone covers its whole exit
            with contextlib.suppress(ProcessLookupError):
                launch.proc.send_signal(signal.SIGINT)
                sent += 1
            with contextlib.suppress(subprocess.TimeoutExpired):
                launch.proc.wait(timeout=0.001)  # the next one as soon as it is still there 1 ms later
        rc = launch.wait(30)
    assert "All 6 processes stopped cleanly" in summary, summary
    assert rc == 0, f"exit status {rc} after {sent} late SIGINTs\n" + launch.output[-3000:]


def _graph_sockets(tmp_path: Path, extra: list[str]) -> tuple[dict[str, list[tuple[str, str, int]]], int]:
    """Every process of a running keep_spot graph (and the launcher) -> its UDP/TCP sockets; exit status.
    Also asserts that no process maps or holds a Fast DDS shared-memory file (the profile and --network
    leave its shared-memory transport out; LTTng's, from the tracing hooks, are not DDS's)."""
    tmp_path.mkdir()
    launch = qrsim_launch(tmp_path, ["keep_spot", "--no-autopilot", "--duration", "120", *extra])
    try:
        launch.wait_for_line(r"\[vehicle_dynamics\].*started: tick 0", 120)
        pids = {"launcher": launch.proc.pid, **launch.child_pids()}
        assert len(pids) == 7, launch.output[-3000:]
        sockets = {name: inet_sockets(pid) for name, pid in pids.items()}
        shm = {name: _shm_files(pid) for name, pid in pids.items()}
    finally:
        rc = _stop(launch)
    assert not any(shm.values()), shm
    return sockets, rc


def _shm_files(pid: int) -> set[str]:
    """The Fast DDS files in /dev/shm (ports, segments, their locks) process ``pid`` maps or holds open."""
    from qrsim_ros.cli.leftovers import files_used_by

    return {n for n in files_used_by(pid) if re.match(r"(sem\.)?fast(dds|rtps|_datasharing)", n)}


def _exposed(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return not (ip.is_loopback or ip.is_multicast)


@pytest.mark.graph
@pytest.mark.timeout(300)
def test_a_launched_graph_binds_loopback_only(tmp_path: Path) -> None:
    require_ros()
    sockets, rc = _graph_sockets(tmp_path / "loopback", [])
    assert rc == 0
    assert all(sockets.values()), sockets  # every process has its DDS sockets
    exposed = {name: [s for s in socks if _exposed(s[1])] for name, socks in sockets.items()}
    assert not any(exposed.values()), exposed
    n = sum(map(len, sockets.values()))
    multicast = sum(ipaddress.ip_address(s[1]).is_multicast for socks in sockets.values() for s in socks)
    print(f"\nloopback: {n} sockets in {len(sockets)} processes, {multicast} of them multicast groups")
    # --network opens it deliberately (and shows the check above can fail)
    sockets, rc = _graph_sockets(tmp_path / "network", ["--network"])
    assert rc == 0
    exposed = {name: [s for s in socks if _exposed(s[1])] for name, socks in sockets.items()}
    assert all(exposed.values()), exposed
    print(f"--network: {sum(map(len, exposed.values()))} of {sum(map(len, sockets.values()))} sockets on "
          "0.0.0.0 or an external address")


@pytest.mark.graph
def test_a_writer_waits_only_for_listed_readers_it_can_serve(rclpy_context: Any) -> None:
    """``qos.unmatched_subscriptions`` (the clock owner's start gate): a listed reader that the writer
    matched no longer counts; a reader it can never match -- a QoS it cannot serve (reliable reader,
    best-effort writer) or another message type on the topic -- never counts, so the gate does not wait
    for it."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.signals import SignalHandlerOptions
    from std_msgs.msg import String, UInt32

    from qrsim_ros.ros.qos import unmatched_subscriptions

    other = rclpy.Context()  # another participant: a topic has one type per participant
    rclpy.init(context=other, domain_id=rclpy_context.get_domain_id(),
               signal_handler_options=SignalHandlerOptions.NO)
    reader = Node("reader", context=rclpy_context)
    writer = Node("writer", context=rclpy_context)
    stranger = Node("stranger", context=other)
    executor = SingleThreadedExecutor(context=rclpy_context)
    try:
        for node in (reader, writer):
            executor.add_node(node)
        reliable = QoSProfile(depth=1)
        reader.create_subscription(UInt32, "served", lambda _m: None, reliable)
        stranger.create_subscription(String, "served", lambda _m: None, reliable)
        reader.create_subscription(UInt32, "not_served", lambda _m: None, reliable)
        served = writer.create_publisher(UInt32, "served", reliable)
        not_served = writer.create_publisher(UInt32, "not_served",
                                             QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT))

        def discovered() -> bool:
            return (len(writer.get_subscriptions_info_by_topic("served")) == 2
                    and len(writer.get_subscriptions_info_by_topic("not_served")) == 1
                    and served.get_subscription_count() == 1)

        assert spin_until(executor, discovered, 20.0, 0.05)
        assert unmatched_subscriptions(writer, served) == 0
        assert unmatched_subscriptions(writer, not_served) == 0 and not_served.get_subscription_count() == 0
    finally:
        executor.shutdown()
        reader.destroy_node()
        writer.destroy_node()
        stranger.destroy_node()
        other.try_shutdown()


@pytest.mark.graph
@pytest.mark.timeout(120)
def test_a_stopping_node_waits_until_its_readers_acknowledged(rclpy_context: Any, tmp_path: Path) -> None:
    """``node.wait_for_readers`` (what run_node does before a node leaves): True at once without readers;
    with a reader in another process, True once it acknowledged; False after the timeout while that
    process is frozen (SIGSTOP) with a sample unacknowledged; True again once it runs (SIGCONT)."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import UInt32

    from qrsim_ros.ros.node import wait_for_readers

    writer = Node("writer", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(writer)
    publisher = writer.create_publisher(UInt32, "acked", 100)
    try:
        assert wait_for_readers([writer], 0.0)
        env = ros_env(tmp_path, rclpy_context.get_domain_id())
        with TestProcess([python(), str(REPO_ROOT / "test" / "programs" / "reliable_reader.py")], env,
                         tmp_path) as reader:
            reader.wait_for_line("^ready$", 40.0)
            assert spin_until(executor, lambda: publisher.get_subscription_count() == 1, 20.0, 0.05)
            publisher.publish(UInt32(data=1))
            assert wait_for_readers([writer], 20.0)
            reader.send_signal(signal.SIGSTOP)
            try:
                publisher.publish(UInt32(data=2))
                started = time.monotonic()
                assert not wait_for_readers([writer], 0.5)
                assert time.monotonic() - started >= 0.5
            finally:
                reader.send_signal(signal.SIGCONT)
            assert wait_for_readers([writer], 20.0)
    finally:
        executor.shutdown()
        writer.destroy_node()
