"""``qrsim plot`` and ``qrsim launch --plot``: PNG figures from recorded bags.

The main tests record real short runs with ``qrsim launch ... --record`` / ``--plot`` (search and rescue
2C with two vehicles; plume 3B), render them with ``qrsim plot BAG --out DIR`` and check that every
expected figure is a real PNG of the configured size that is not blank, and that what was read back
from the bag is consistent with the run. Small bags written here with rosbags cover the error paths,
the skipping of figures whose topics are absent and the GPS conversion.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rosenv import REPO_ROOT, launches_graph, require_ros, ros_env, run_launch

#: the module's shared run is paid for by the first test that reads it (its set-up is in its budget)
pytestmark = pytest.mark.timeout(300)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Search and rescue run: simulated seconds (the camera runs at 1 Hz, the GPS at 5 Hz).
SR_DURATION_S = 6.0
PLUME_DURATION_S = 3.0
DT_S = 0.02


def _cli(*argv: str, cwd: Path | None = None, env: dict[str, str] | None = None,
         timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``qrsim ARGV`` from this source tree, with this interpreter."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", "qrsim_ros.cli.main", *argv], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


def _plot(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``qrsim plot ARGV`` in this process: (exit status, stdout, stderr)."""
    from qrsim_ros.cli.main import main

    try:
        rc = main(["plot", *argv])
    except SystemExit as exc:  # argparse errors
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def _assert_figure(path: Path, name: str, min_coloured: int = 500) -> np.ndarray:
    """A real PNG of the configured pixel size, >= 20 kB, and not blank: an empty frame (axes, ticks,
    labels, grid) is all greys (measured: no pixel with a chroma above 0.15 at any figure size), so
    the data must show as at least ``min_coloured`` coloured pixels in at least 5 distinct colours."""
    from matplotlib.image import imread

    from qrsim_ros.plots import DPI, FIGURE_SIZES_IN

    assert path.is_file(), path
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert path.stat().st_size >= 20_000, (path, path.stat().st_size)
    img = imread(path)
    w_in, h_in = FIGURE_SIZES_IN[name]
    assert img.shape[:2] == (round(h_in * DPI), round(w_in * DPI)), img.shape
    rgb = img[..., :3]
    coloured = rgb[(rgb.max(axis=-1) - rgb.min(axis=-1)) > 0.15]
    assert len(coloured) >= min_coloured, (path, len(coloured))
    distinct = np.unique(np.floor(coloured * 7.99).astype(np.int64), axis=0)  # 8 levels per channel
    assert len(distinct) >= 5, (path, len(distinct))
    return rgb


def _has_colour(rgb: np.ndarray, hex_colour: str, min_pixels: int = 10) -> bool:
    """Whether at least ``min_pixels`` pixels are within 2/255 of the colour (markers drawn opaque)."""
    target = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255.0
    return int(np.sum(np.all(np.abs(rgb - target) < 2.5 / 255, axis=-1))) >= min_pixels


# --- small bags written here -------------------------------------------------------------------------

def _header(ts, t_s: float, frame: str = "map"):  # type: ignore[no-untyped-def]
    ns = round(t_s * 1e9)
    time = ts.types["builtin_interfaces/msg/Time"](sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
    return ts.types["std_msgs/msg/Header"](stamp=time, frame_id=frame)


def _status(ts, t_s: float, step: int, reward: float, total: float):  # type: ignore[no-untyped-def]
    return ts.types["qrsim_ros/msg/TaskStatus"](
        header=_header(ts, t_s), scenario="search_rescue_2c", episode=1, step=step, time=t_s, reward=reward,
        cumulative_reward=total, persons_found=0, persons_total=0, vehicles_lost=0, messages_sent=0,
        vehicle_names=["uav1"],
        vehicle_valid=np.array([True]), done=False, done_reason="", run_id="")


def _odometry(ts, t_s: float, enu: np.ndarray, velocity_flu: np.ndarray):  # type: ignore[no-untyped-def]
    t = ts.types
    vec = t["geometry_msgs/msg/Vector3"]
    point = t["geometry_msgs/msg/Point"](x=enu[0], y=enu[1], z=enu[2])
    level = t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)
    pose = t["geometry_msgs/msg/Pose"](position=point, orientation=level)
    v = velocity_flu
    twist = t["geometry_msgs/msg/Twist"](linear=vec(x=v[0], y=v[1], z=v[2]), angular=vec(x=0.0, y=0.0, z=0.0))
    return t["nav_msgs/msg/Odometry"](
        header=_header(ts, t_s), child_frame_id="uav1/base_link",
        pose=t["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36)),
        twist=t["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=np.zeros(36)))


def _fix(ts, t_s: float, lla: np.ndarray):  # type: ignore[no-untyped-def]
    t = ts.types
    return t["sensor_msgs/msg/NavSatFix"](
        header=_header(ts, t_s, "uav1/base_link"),
        status=t["sensor_msgs/msg/NavSatStatus"](status=0, service=1),
        latitude=float(lla[0]), longitude=float(lla[1]), altitude=float(lla[2]),
        position_covariance=np.zeros(9), position_covariance_type=2)


def _battery(ts, name: str, t_s: float, volts: float, fraction: float):  # type: ignore[no-untyped-def]
    return ts.types["sensor_msgs/msg/BatteryState"](
        header=_header(ts, t_s, f"{name}/base_link"), voltage=volts, temperature=float("nan"),
        current=-10.0, charge=fraction * 5.0, capacity=5.0, design_capacity=5.0, percentage=fraction,
        power_supply_status=2, power_supply_health=1, power_supply_technology=3, present=True,
        cell_voltage=np.full(3, volts / 3, np.float32), cell_temperature=np.zeros(0, np.float32),
        location=name, serial_number=f"{name}-lipo")


#: One active fault as written: (id, vehicle index, kind, params_yaml, since [s], until [s] or NaN).
Fault = tuple[str, int, str, str, float, float]


def _faults(ts, t_s: float, episode: int, active: list[Fault]):  # type: ignore[no-untyped-def]
    one = ts.types["qrsim_ros/msg/ActiveFault"]
    return ts.types["qrsim_ros/msg/ActiveFaults"](
        header=_header(ts, t_s, ""), run_id="r1", episode=episode,
        faults=[one(id=i, vehicle=v, kind=k, params_yaml=p, since_s=a, until_s=b)
                for i, v, k, p, a, b in active])


def _write_bag(path: Path, messages: list[tuple[str, str, float, object]]) -> Path:
    """A rosbag2 MCAP bag of (topic, type, t [s], message), written with rosbags and the project's types."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    from qrsim_ros.bag.types import typestore

    ts = typestore()
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {}
        for topic, msgtype, t_s, msg in messages:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=ts)
            writer.write(conns[topic], round(t_s * 1e9), ts.serialize_cdr(msg, msgtype))
    return path


def test_not_a_bag_is_one_line_and_status_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "metadata.yaml").write_text("rosbag2_bagfile_information: {version: 9, "
                                          "storage_identifier: mcap, relative_file_paths: [nothing.mcap]}\n")
    for path in (tmp_path / "missing", tmp_path / "empty", broken):
        rc, out, err = _plot(capsys, str(path), "--out", str(tmp_path / "out"))
        assert rc == 1, (path, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("qrsim plot: "), err
        assert str(path) in lines[0] and out == ""
    assert not (tmp_path / "out").exists()


def test_a_bag_with_nothing_to_plot_is_one_line_and_status_1(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from qrsim_ros.bag.types import typestore

    ts = typestore()
    diag = ts.types["diagnostic_msgs/msg/DiagnosticArray"](header=_header(ts, 0.0), status=[])
    bag = _write_bag(tmp_path / "bag", [("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", 0.0, diag)])
    rc, _, err = _plot(capsys, str(bag), "--out", str(tmp_path / "out"))
    assert rc == 1
    assert err.count("\n") == 1 and "nothing to plot" in err and "/diagnostics" in err
    assert not (tmp_path / "out").exists()


def test_figures_without_their_topics_are_skipped_with_a_note(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Status and ground truth only: top view, altitude/speed and reward are drawn; the plume and GPS
    figures are skipped with a printed reason."""
    from qrsim_ros.bag.types import typestore

    ts = typestore()
    msgs: list[tuple[str, str, float, object]] = []
    for k in range(0, 251):
        t = k * DT_S
        enu = np.array([2.0 * t, 10.0 * np.sin(t), 20.0 + t])
        msgs.append(("/uav1/ground_truth/odom", "nav_msgs/msg/Odometry", t,
                     _odometry(ts, t, enu, np.array([2.0, 0.0, 1.0]))))
        if k % 50 == 0:
            msgs.append(("/referee/status", "qrsim_ros/msg/TaskStatus", t,
                         _status(ts, t, k // 50, -0.01 * (k > 0), -0.01 * (k // 50))))
    bag = _write_bag(tmp_path / "bag", msgs)
    out = tmp_path / "figs"
    rc, stdout, err = _plot(capsys, str(bag), "--out", str(out))
    assert rc == 0, err
    assert "skipped plume" in stdout and "skipped gps_error" in stdout
    assert "skipped battery: no uavN/battery in the bag" in stdout
    assert "skipped faults: no /sim/faults in the bag" in stdout
    assert sorted(p.name for p in out.iterdir()) == ["altitude_speed.png", "reward.png", "top_view.png"]
    for name in ("altitude_speed", "reward", "top_view"):
        _assert_figure(out / f"{name}.png", name)

    from qrsim_ros.plots import load_run

    run = load_run(bag)
    v = run.vehicles[0]
    assert [x.name for x in run.vehicles] == ["uav1"]
    assert v.truth_enu.t_s.size == 251
    np.testing.assert_allclose(v.truth_speed.values[:, 0], np.sqrt(5.0))  # |(2, 0, 1)|
    np.testing.assert_allclose(run.status.cumulative_reward, -0.01 * np.arange(6))


def test_gps_error_uses_the_scenarios_geodetic_origin(tmp_path: Path) -> None:
    """Fixes placed (through WGS-84) 3 m east, 4 m south and 1.5 m above the truth come back as that
    error in map ENU: the fix is converted with the scenario's origin, matched to the truth of its stamp."""
    from qrsim_ros.bag.types import typestore
    from qrsim_ros.core.common.frames import enu_to_ned
    from qrsim_ros.core.common.geodesy import ned_to_lla
    from qrsim_ros.core.config.scenario import load_scenario
    from qrsim_ros.plots.bagdata import gps_error, load_run

    ts = typestore()
    origin = load_scenario("search_rescue_2c").origin
    offset_enu = np.array([3.0, -4.0, 1.5])
    msgs: list[tuple[str, str, float, object]] = []
    for k in range(0, 101):
        t = k * DT_S
        enu = np.array([50.0 + t, -30.0 + 2 * t, 25.0])
        msgs.append(("/uav1/ground_truth/odom", "nav_msgs/msg/Odometry", t,
                     _odometry(ts, t, enu, np.zeros(3))))
        if k % 10 == 0:
            lla = ned_to_lla(enu_to_ned(enu + offset_enu), origin)
            msgs.append(("/uav1/gps/fix", "sensor_msgs/msg/NavSatFix", t, _fix(ts, t, lla)))
        if k % 50 == 0:
            msgs.append(("/referee/status", "qrsim_ros/msg/TaskStatus", t, _status(ts, t, k // 50, 0.0, 0.0)))
    run = load_run(_write_bag(tmp_path / "bag", msgs))
    assert run.origin_note == ""
    err = gps_error(run.vehicles[0])
    assert err.values.shape == (11, 3)
    np.testing.assert_allclose(err.values, np.tile(offset_enu, (11, 1)), atol=1e-6)


def _interval_rows(run) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(f.id, f.vehicle, f.kind, f.params_yaml, f.start_s, f.end_s, f.planned_end_s) for f in run.faults]


def test_battery_and_fault_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two vehicles' batteries and a /sim/faults history (a timed rotor loss, a permanent GPS outage
    still active at the end, a comm loss cleared before its planned end): the battery and faults figures
    are drawn, and the voltages and intervals read back are the ones written."""
    from qrsim_ros.bag.types import typestore
    from qrsim_ros.plots import load_run
    from qrsim_ros.plots.timelines import fault_colour

    ts = typestore()
    nan = float("nan")
    rotor: Fault = ("rotor_loss.0", 0, "rotor_loss", "{rotor: 2}", 1.0, 3.0)
    gps: Fault = ("gps_dropouts", 1, "gps_outage", "{}", 2.0, nan)
    link: Fault = ("link", 0, "comm_loss", "{}", 3.5, 4.5)
    history = {0: [], 50: [rotor], 100: [rotor, gps], 150: [gps], 175: [gps, link], 190: [gps]}
    msgs: list[tuple[str, str, float, object]] = []
    volts: dict[str, list[float]] = {"uav1": [], "uav2": []}
    fractions: dict[str, list[float]] = {"uav1": [], "uav2": []}
    for k in range(0, 251):
        t = k * DT_S
        for i, name in enumerate(("uav1", "uav2")):
            enu = np.array([3.0 * i, t, 10.0 + i])
            msgs.append((f"/{name}/ground_truth/odom", "nav_msgs/msg/Odometry", t,
                         _odometry(ts, t, enu, np.array([1.0, 0.0, 0.0]))))
            if k % 5 == 0:
                v, f = 12.5 - 0.2 * t - 0.1 * i, 0.96 - 0.05 * t - 0.02 * i
                volts[name].append(v)
                fractions[name].append(f)
                msgs.append((f"/{name}/battery", "sensor_msgs/msg/BatteryState", t,
                             _battery(ts, name, t, v, f)))
        if k in history:
            msgs.append(("/sim/faults", "qrsim_ros/msg/ActiveFaults", t, _faults(ts, t, 0, history[k])))
    bag = _write_bag(tmp_path / "bag", msgs)
    out = tmp_path / "figs"
    rc, _, err = _plot(capsys, str(bag), "--out", str(out), "--only", "battery,faults,altitude_speed")
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["altitude_speed.png", "battery.png", "faults.png"]
    _assert_figure(out / "battery.png", "battery")
    _assert_figure(out / "altitude_speed.png", "altitude_speed")
    timeline = _assert_figure(out / "faults.png", "faults")
    for kind in ("rotor_loss", "gps_outage", "comm_loss"):  # each firing's bar, opaque in its kind's colour
        assert _has_colour(timeline, fault_colour(kind), 200), kind

    run = load_run(bag)
    for v in run.vehicles:
        assert v.battery_v.t_s.size == 51
        np.testing.assert_allclose(v.battery_v.t_s, 0.1 * np.arange(51), atol=1e-9)
        np.testing.assert_allclose(v.battery_v.values[:, 0], volts[v.name], rtol=1e-6)  # float32 fields
        np.testing.assert_allclose(v.battery_fraction.values[:, 0], fractions[v.name], rtol=1e-6)
    got = _interval_rows(run)
    want = [(*rotor[:5], 3.0, 3.0), (*gps[:5], nan, nan), (*link[:5], 3.8, 4.5)]
    assert [g[:4] for g in got] == [w[:4] for w in want]
    np.testing.assert_allclose([g[4:] for g in got], [w[4:] for w in want], atol=1e-9)
    assert [f.label for f in run.faults] == ["rotor_loss", "gps_outage (gps_dropouts)", "comm_loss (link)"]
    assert run.fault_messages == len(history)


def test_faults_end_at_a_reset_and_an_empty_history_is_skipped(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Episodes laid end to end: a permanent fault of episode 0 ends where episode 1 starts (the ground
    truth's restart, 2 s), and a fault of episode 1 is shifted by those 2 s. A bag whose /sim/faults
    never held a fault skips the faults figure with a note and still draws the battery."""
    from qrsim_ros.bag.types import typestore
    from qrsim_ros.plots import load_run

    ts = typestore()
    nan = float("nan")
    msgs: list[tuple[str, str, float, object]] = []
    bag_t = 0.0
    for episode, ticks in ((0, 101), (1, 51)):
        for k in range(ticks):
            t = k * DT_S
            bag_t += DT_S
            msgs.append(("/uav1/ground_truth/odom", "nav_msgs/msg/Odometry", bag_t,
                         _odometry(ts, t, np.array([0.0, 0.0, 5.0]), np.zeros(3))))
            if k == 0:
                msgs.append(("/sim/faults", "qrsim_ros/msg/ActiveFaults", bag_t, _faults(ts, t, episode, [])))
            if k == 50:
                fault = ("cells", 0, "battery_cell_failure", "{cells_failed: 1}", t, nan)
                msgs.append(("/sim/faults", "qrsim_ros/msg/ActiveFaults", bag_t,
                             _faults(ts, t, episode, [fault])))
    run = load_run(_write_bag(tmp_path / "reset", msgs))
    got = _interval_rows(run)
    assert [g[:4] for g in got] == [("cells", 0, "battery_cell_failure", "{cells_failed: 1}")] * 2
    np.testing.assert_allclose([g[4:] for g in got], [(1.0, 2.0, nan), (3.0, nan, nan)], atol=1e-9)
    assert [f.episode for f in run.faults] == [0, 1]

    quiet = [("/sim/faults", "qrsim_ros/msg/ActiveFaults", 0.0, _faults(ts, 0.0, 0, []))]
    quiet += [("/uav1/battery", "sensor_msgs/msg/BatteryState", 0.1 * k,
               _battery(ts, "uav1", 0.1 * k, 12.0 - 0.01 * k, 0.9 - 0.01 * k)) for k in range(30)]
    out = tmp_path / "figs"
    rc, stdout, err = _plot(capsys, str(_write_bag(tmp_path / "quiet", quiet)), "--out", str(out),
                            "--only", "battery,faults")
    assert rc == 0, err
    assert "skipped faults: no fault was active in the run (/sim/faults: 1 message(s), all empty)" in stdout
    assert sorted(p.name for p in out.iterdir()) == ["battery.png"]
    _assert_figure(out / "battery.png", "battery", min_coloured=200)


def _mission_messages(ts, z_commands: dict[int, tuple[str, float]]):  # type: ignore[no-untyped-def]
    """A small retrieve bag's messages: the briefing, 10 task steps of uav1 climbing, and
    uav1/mission/mode at the given steps (mode, height command z NED [m])."""
    from qrsim_ros.core.mission.modes import mode_number

    t = ts.types
    point = t["geometry_msgs/msg/Point"]
    msgs: list[tuple[str, str, float, object]] = [
        ("/referee/mission", "qrsim_ros/msg/MissionBriefing", 0.0, t["qrsim_ros/msg/MissionBriefing"](
            header=_header(ts, 0.0), run_id="", episode=0, landing_site=point(x=1.0, y=2.0, z=0.0),
            drop_site=point(x=5.0, y=6.0, z=0.0), drop_radius_m=1.5, num_targets=2))]
    u32 = np.zeros(1, np.uint32)
    mission_mode, vehicle_status = t["qrsim_ros/msg/MissionMode"], t["qrsim_ros/msg/VehicleStatus"]
    for k in range(10):
        tk = k * DT_S
        if k in z_commands:
            mode, z = z_commands[k]
            msgs.append(("/uav1/mission/mode", "qrsim_ros/msg/MissionMode", tk, mission_mode(
                header=_header(ts, tk), run_id="", sequence=len(msgs), mode=mode, number=mode_number(mode),
                mission_over="", height_command_z_ned_m=z)))
        state = np.zeros(13)
        state[2] = -0.1 * k
        msgs.append(("/sim/vehicle_status", "qrsim_ros/msg/VehicleStatus", tk, vehicle_status(
            header=_header(ts, tk), run_id="", episode=0, tick=k, names=["uav1"], valid=np.array([True]),
            invalid_reason=[""], command_fresh=np.array([True]), commands_rejected=u32, commands_clamped=u32,
            command_timeouts=u32, wind_rejected=u32, failsafe=[""], setpoints_rejected=u32,
            setpoints_clamped=u32, failsafe_onsets=u32, faults_listed=True, faults=[],
            battery_fraction=np.zeros(0, np.float32), battery_voltage_v=np.zeros(0, np.float32),
            state=state, specific_force=np.zeros(3))))
        msgs.append(("/referee/status", "qrsim_ros/msg/TaskStatus", tk, _status(ts, tk, k, 0.0, 0.0)))
    return msgs


def test_a_mission_bag_carries_the_height_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """uav1/mission/mode's height command is Figure 9's dashed line: load_mission_bag holds the latest
    message's at every task step (NaN before the first, and for a non-finite one), and the figure is drawn."""
    from qrsim_ros.bag.types import typestore
    from qrsim_ros.plots.mission_bag import load_mission_bag

    ts = typestore()
    modes = {1: ("take_off", -1.0), 4: ("identify", -2.25), 6: ("search", float("nan"))}
    bag = _write_bag(tmp_path / "bag", _mission_messages(ts, modes))
    run = load_mission_bag(bag)
    assert run is not None
    assert run.modes == ["idle"] + ["take_off"] * 3 + ["identify"] * 2 + ["search"] * 4, run.modes
    np.testing.assert_array_equal(run.zcmd_ned_m, [np.nan] + [-1.0] * 3 + [-2.25] * 2 + [np.nan] * 4)
    out = tmp_path / "out"
    rc, _, err = _plot(capsys, str(bag), "--out", str(out), "--only", "mission_height")
    assert rc == 0, err
    assert (out / "mission_height.png").read_bytes().startswith(PNG_SIGNATURE)


def test_only_unknown_figure_is_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _plot(capsys, str(tmp_path), "--only", "top_view,heatmap")
    assert rc == 2 and "heatmap" in err


# --- real runs ----------------------------------------------------------------------------------------

def _require_recorder() -> None:
    require_ros()
    from qrsim_ros.cli.launch import find_executable
    from qrsim_ros.launch_plan import NodeSpec

    if find_executable(NodeSpec("recorder", "recorder")) is None:
        pytest.skip("the recorder node is not installed (see QRSIM_NODES in CMakeLists.txt)")


@pytest.fixture(scope="module")
@launches_graph
def sr_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Search and rescue 2C, 2 vehicles, SR_DURATION_S with ``--plot`` and no --record: the bag goes
    to the default bags/<config>_<time> under the working directory and is plotted after the run.
    The nodes run in one process (the recorder in its own): the graph is not what is tested here, and
    one process starts much faster than nine on a loaded machine."""
    _require_recorder()
    work = tmp_path_factory.mktemp("sr_run")
    argv = ["search_rescue", "--variant", "2c", "--num-vehicles", "2", "--seed", "11",
            "--duration", f"{SR_DURATION_S:g}", "--plot", "--single-process"]
    rc, out = run_launch(work, argv, timeout_s=240)
    assert rc == 0, out[-5000:]
    bags = list((work / "bags").glob("search_rescue_2c_*"))
    assert len(bags) == 1, out[-2000:]
    return bags[0], out


@pytest.mark.graph
def test_launch_plot_records_and_renders_at_the_end(sr_run: tuple[Path, str]) -> None:
    bag, stdout = sr_run
    assert (bag / "metadata.yaml").is_file()
    for name in ("top_view", "altitude_speed", "reward", "gps_error", "battery"):
        assert f"[qrsim launch] plot: wrote {bag / 'plots' / name}.png" in stdout
        assert (bag / "plots" / f"{name}.png").stat().st_size >= 20_000
    # the summary (bag closed) comes before the figures are drawn from it
    assert stdout.index("Summary:") < stdout.index("[qrsim launch] plot: wrote")


@pytest.mark.graph
def test_a_single_process_run_is_recorded_to_its_last_tick(sr_run: tuple[Path, str]) -> None:
    """At --duration, vehicle_dynamics ends a single-process run by its exit status with the context
    still up, so every node waits for the recorder's acknowledgements before it is destroyed: each
    vehicle's ground truth (vehicle_dynamics) and its altimeter (another node, handling the last ticks
    before the process ends) are in the bag at every sample time from 0 to the duration."""
    from qrsim_ros.core.config.scenario import load_scenario
    from qrsim_ros.plots.bagdata import load_run

    bag, stdout = sr_run
    summary = [line for line in stdout.splitlines() if line.startswith("Summary: ")][-1]
    assert f"stopped: --duration {SR_DURATION_S:g} s reached" in summary, summary
    altimeter_dt_s = load_scenario("search_rescue_2c").vehicle.ahars.altimeter.dt_s
    run = load_run(bag)
    assert len(run.vehicles) == 2
    for v in run.vehicles:
        truth_ticks = np.unique(np.round(v.truth_keys[v.truth_keys[:, 0] >= 0, 1] / (DT_S * 1e9)))
        np.testing.assert_array_equal(truth_ticks, np.arange(round(SR_DURATION_S / DT_S) + 1),
                                      err_msg=f"{v.name}: ground truth ticks")
        # free-running, the sensors may lag a tick or two behind the clock: the process handles what
        # was published before it ends (single_process.drain)
        samples = np.unique(np.round(v.altimeter.t_s / altimeter_dt_s))
        np.testing.assert_array_equal(samples, np.arange(round(SR_DURATION_S / altimeter_dt_s) + 1),
                                      err_msg=f"{v.name}: altimeter samples")


@pytest.mark.graph
def test_qrsim_plot_renders_a_recorded_search_and_rescue_run(sr_run: tuple[Path, str],
                                                             tmp_path: Path) -> None:
    from qrsim_ros.plots.figures import FOUND_COLOUR, UNFOUND_COLOUR, VEHICLE_COLOURS

    bag, _ = sr_run
    out = tmp_path / "figs"
    r = _cli("plot", str(bag), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "skipped plume" in r.stdout  # no plume in search and rescue: skipped, not an error
    assert "skipped faults: no fault was active in the run" in r.stdout  # 2C has no faults:
    assert sorted(p.name for p in out.iterdir()) == ["altitude_speed.png", "battery.png", "gps_error.png",
                                                      "reward.png", "top_view.png"]
    top = _assert_figure(out / "top_view.png", "top_view")
    for name in ("altitude_speed", "reward", "gps_error", "battery"):
        _assert_figure(out / f"{name}.png", name)
    # both vehicles' start markers and the persons are drawn in their opaque colours
    assert _has_colour(top, VEHICLE_COLOURS[0]) and _has_colour(top, VEHICLE_COLOURS[1])
    assert _has_colour(top, UNFOUND_COLOUR) or _has_colour(top, FOUND_COLOUR)


@pytest.mark.graph
def test_the_recorded_run_reads_back_consistently(sr_run: tuple[Path, str]) -> None:
    from qrsim_ros.plots.bagdata import gps_error, load_run

    bag, _ = sr_run
    run = load_run(bag)
    assert [v.name for v in run.vehicles] == ["uav1", "uav2"]
    assert run.scenario == "search_rescue_2c" and run.origin_note == ""
    assert run.terrain is not None and run.terrain.classes.size > 0
    st = run.status
    assert st is not None and np.all(np.diff(st.t_s) >= 0)
    # /sim/faults was recorded (its tick-0 message: the active set, empty in 2C), no interval
    assert run.fault_messages >= 1 and run.faults == []
    # the persons drawn are the referee's: as many as the status counts, as many found
    assert len(run.persons_enu) == st.persons_total[-1] > 0
    assert int(run.persons_found.sum()) == st.persons_found[-1]
    for v in run.vehicles:
        # ground truth every tick (tick 0 .. the duration), within 10 %
        assert v.truth_enu.t_s.size >= 0.9 * SR_DURATION_S / DT_S
        assert np.all(np.diff(v.truth_enu.t_s) > 0)
        # the battery every 0.1 s (docs/ENERGY.md), a 3-cell pack draining below its 85 % start
        assert v.battery_v.t_s.size >= 0.9 * SR_DURATION_S / 0.1
        assert np.all((v.battery_v.values > 9.0) & (v.battery_v.values <= 12.0))
        f = v.battery_fraction.values[:, 0]
        assert f[-1] < f[0] <= 0.85 + 1e-6
        # 2C's GPS is off: a noiseless sample-and-hold of the true position at its tick, so fix - truth
        # is only the NED -> WGS-84 -> NED round trip (a few 1e-9 m, estimated_state.py)
        err = gps_error(v)
        assert err.t_s.size >= 0.9 * SR_DURATION_S / 0.2
        assert float(np.nanmax(np.abs(err.values))) < 1e-6
        # camera at 1 Hz; a footprint's centre is within one altitude of the vehicle's nadir (the
        # camera looks down: the view is tilted by the vehicle's attitude, far less than 45 degrees)
        assert len(v.footprints) >= SR_DURATION_S - 1
        for t, quad in v.footprints:
            i = int(np.argmin(np.abs(v.truth_enu.t_s - t)))
            p = v.truth_enu.values[i]
            assert np.linalg.norm(quad.mean(axis=0) - p[:2]) < p[2], (v.name, t)


@pytest.mark.graph
def test_qrsim_plot_renders_a_recorded_plume_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _require_recorder()
    from qrsim_ros.plots.bagdata import load_run

    bag = tmp_path / "plume_bag"
    r = _cli("launch", "plume", "--variant", "3b", "--seed", "5", "--duration", f"{PLUME_DURATION_S:g}",
             "--record", str(bag), "--single-process", cwd=tmp_path, env=ros_env(tmp_path), timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    out = tmp_path / "figs"
    rc, _, err = _plot(capsys, str(bag), "--out", str(out))
    assert rc == 0, err
    rgb = _assert_figure(out / "plume.png", "plume")
    assert _has_colour(rgb, "#ff7f0e")  # the source star
    _assert_figure(out / "top_view.png", "top_view", min_coloured=100)  # a short track in a 280 m area
    for name in ("altitude_speed", "reward", "gps_error"):
        _assert_figure(out / f"{name}.png", name)
    run = load_run(bag)
    assert len(run.plume_sources_enu) >= 1
    readings = run.vehicles[0].plume
    assert readings.t_s.size >= PLUME_DURATION_S * 2 * 0.9  # 3B's sensor: 2 Hz
    if "/plume/field" in run.topics:
        assert run.plume_field is not None and run.plume_field.concentration.size > 0
        assert np.all(run.plume_field.concentration > 0)


def test_many_fault_intervals_draw_a_few_artists_per_kind_with_the_spans_merged(tmp_path: Path) -> None:
    """A repeating fault fired thousands of times draws a bounded number of artists (each kind's spans
    in one collection, merged where they overlap; a bounded number of labels), and both figures render."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.figure import Figure

    from qrsim_ros.plots.bagdata import RunData
    from qrsim_ros.plots.faults import FaultInterval
    from qrsim_ros.plots.timelines import MAX_INTERVAL_LABELS, faults_timeline, shade_faults

    # disjoint spans of 5 ms every 10 ms
    outages = [FaultInterval("gps_outage.0", k % 3, "gps_outage", "{}", 0.01 * k, 0.01 * k + 0.005,
                             math.nan, 0) for k in range(3000)]
    # two overlapping rotor faults and one still active at the end: three intervals, two merged spans
    rotor = [FaultInterval("r", 0, "rotor_loss", "{rotor: 0}", 1.0, 3.0, math.nan, 0),
             FaultInterval("r2", 1, "rotor_loss", "{rotor: 1}", 2.0, 4.0, 5.0, 0),
             FaultInterval("r3", 2, "rotor_loss", "{rotor: 2}", 20.0, math.nan, math.nan, 0)]
    run = RunData(tmp_path / "bag", {"/sim/faults": "qrsim_ros/msg/ActiveFaults"}, [], faults=outages + rotor)
    ax = Figure().add_subplot()
    assert shade_faults(ax, run) == len(run.faults)
    spans = {c.get_label(): c for c in ax.collections if isinstance(c, PolyCollection)}
    assert set(spans) == {"fault: gps_outage", "fault: rotor_loss"}
    assert len(spans["fault: gps_outage"].get_paths()) == 3000  # disjoint: none merged
    assert len(spans["fault: rotor_loss"].get_paths()) == 2      # [1, 4] and [20, the run's end]
    starts = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert sum(len(c.get_segments()) for c in starts) == 3000 + 3
    assert len(ax.collections) == 4 and len(ax.texts) == MAX_INTERVAL_LABELS
    assert faults_timeline(run, tmp_path / "faults.png") is None
    assert (tmp_path / "faults.png").stat().st_size > 1000
