"""Golden outputs: the refactoring guard of the two front ends (one world, one core).

Each ``produce_*`` function writes a set of output files into a directory. They were run once on the
code before the refactoring (commit 57066ae) and the results stored in ``test/golden/data``; the tests in
``test/test_golden.py`` run the same functions on the current code and compare the files: CSV files
byte for byte, ``.npz`` arrays exactly (or to the tolerance a test names, with its reason).

The outputs are not expected values of any model: they record what the previous code did, so that
moving code between modules cannot change behaviour unnoticed. Regenerate only on purpose (a deliberate
behaviour change), with the command below, and say so in the commit message:

    ./qrsim exec -- python test/golden/produce.py [in-process|graph|all]

What is recorded:

- ``run_<scenario>.csv``: ``qrsim run <scenario> --seed 5 --steps K --out ...`` for every scenario
  file in config/ (the auto policy: each task's baseline).
- ``batch_<scenario>.csv``: ``qrsim batch`` results of a few episodes (W = 1) for one scenario per family.
- ``trace_<scenario>.npz``: two episodes (the second after ``reset()``, continuing every stream) of the
  in-process Simulator with the auto policy; per task step the true states (N, 13), the estimated
  states (N, 20), the reward, the plume readings and the camera's log-likelihood differences.
- ``replay.csv``: ``qrsim replay`` of a made-up control sequence with wind and an initial state.
- ``graph_<case>.npz``: the lockstep ROS graph of ``qrsim launch`` (real processes, DDS), recorded to a
  bag: every tick's fleet ground truth from /sim/vehicle_status and the referee's task status.
"""

from __future__ import annotations

import csv
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = Path(__file__).resolve().parent / "data"
for _path in (REPO_ROOT, REPO_ROOT / "test"):  # the package, and the tests' launcher helper (rosenv)
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

SEED = 5
#: The goldens were recorded before the battery model existed (QRSim's open loop): every golden run flies
#: with the battery off, which shows that the battery off changes nothing (docs/ENERGY.md, DIFFERENCES.md).
BATTERY_OFF_SET = ["--set", "vehicle.battery.on=false"]
BATTERY_OFF = {"vehicle": {"battery": {"on": False}}}
BATTERY_OFF_PARAM = ["--param", "vehicle_dynamics:battery=off"]
#: Task steps of each `qrsim run` golden (short enough for the test suite, long enough for every
#: family's sensors, controllers and rewards to act).
RUN_STEPS = {"search_rescue": 30, "plume": 30, "cats_mouse": 40}
DEFAULT_RUN_STEPS = 60
#: Scenarios with a step count of their own: the 3-D scene renders its fisheye and depth cameras every
#: frame (about 1 s of CPU per task step), and what the goldens record (flight, rewards, the person
#: classifier) shows in fewer steps. Cut from 30 run and 12 trace steps; the shorter run is the longer
#: one's first rows and the trace's first episode its first steps (checked when they were regenerated).
SCENARIO_RUN_STEPS = {"search_rescue_scene": 8}
SCENARIO_TRACE_STEPS = {"search_rescue_scene": 4}
BATCH_CASES = (("keep_spot_x10", 3, 20), ("cats_mouse_1b", 2, 20), ("search_rescue_2b", 2, 15),
               ("plume_3c", 2, 10))
TRACE_STEPS = {"search_rescue": 12, "plume": 12, "cats_mouse": 25}
DEFAULT_TRACE_STEPS = 30
#: Lockstep graphs: (case name, qrsim launch arguments).
GRAPH_CASES: dict[str, list[str]] = {
    "cats_mouse_1b": ["cats_mouse", "--variant", "1b", "--seed", "7", "--no-autopilot", "--duration", "12"],
    "keep_spot_x10": ["keep_spot_x10", "--num-vehicles", "2", "--seed", "9", "--no-autopilot",
                      "--duration", "8"],
    # (recorded without the example autopilot, whose commands were not awaited in lockstep then; the
    # flight controller holds its zero velocity set points. The autopilot's lockstep run is compared
    # with the Simulator by test_autopilot_lockstep instead)
    "search_rescue_2c": ["search_rescue", "--variant", "2c", "--num-vehicles", "2", "--seed", "2",
                         "--no-autopilot", "--duration", "6"],
}


def scenarios() -> list[str]:
    from qrsim_ros.core.config.scenario import available_scenarios

    return sorted(available_scenarios())


def _family(task_type: str) -> str:
    return task_type if task_type in RUN_STEPS else "generic"


def _task_type(name: str) -> str:
    from qrsim_ros.core.config.scenario import load_scenario

    return load_scenario(name).task.type


def produce_run(name: str, out: Path) -> Path:
    """``qrsim run`` episode file of one scenario."""
    from qrsim_ros.cli import run

    steps = SCENARIO_RUN_STEPS.get(name) or RUN_STEPS.get(_task_type(name), DEFAULT_RUN_STEPS)
    path = out / f"run_{name}.csv"
    status = run.main([name, "--seed", str(SEED), "--steps", str(steps), "--out", str(path),
                       *BATTERY_OFF_SET])
    if status != 0:
        raise RuntimeError(f"qrsim run {name} exited {status}")
    return path


def produce_batch(name: str, out: Path) -> Path:
    """``qrsim batch`` result file of one of BATCH_CASES (in process, W = 1)."""
    from qrsim_ros.cli import batch

    runs, steps = {case: (r, k) for case, r, k in BATCH_CASES}[name]
    path = out / f"batch_{name}.csv"
    status = batch.main([name, "--runs", str(runs), "--steps", str(steps), "--workers", "1",
                         "--seed", str(SEED), "--no-progress", "--out", str(path), *BATTERY_OFF_SET])
    if status != 0:
        raise RuntimeError(f"qrsim batch {name} exited {status}")
    return path


def trace(name: str) -> dict[str, np.ndarray]:
    """Two episodes of the in-process Simulator with the auto policy (see the module docstring)."""
    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.policies import make_factory
    from qrsim_ros.policies.base import SimulatorView, check_actions, instantiate

    task_type = _task_type(name)
    steps = SCENARIO_TRACE_STEPS.get(name) or TRACE_STEPS.get(task_type, DEFAULT_TRACE_STEPS)
    sim = Simulator.from_scenario(name, overrides={"seed": SEED, "task": {"duration_steps": steps},
                                                   **BATTERY_OFF})
    records: dict[str, list[np.ndarray]] = {k: [] for k in (
        "episode", "step", "true_state", "estimated_state", "reward", "total_reward", "plume", "llkd")}
    for episode in range(2):
        sim.reset()
        view = SimulatorView(sim)
        policy = instantiate(make_factory("auto", task_type), view)
        while not sim.done:
            reward = sim.step(check_actions(policy(view), view, "golden"))
            records["episode"].append(np.array(episode))
            records["step"].append(np.array(sim.step_count))
            records["true_state"].append(sim.true_state().copy())
            records["estimated_state"].append(sim.estimated_state())
            records["reward"].append(np.array(reward))
            records["total_reward"].append(np.array(sim.total_reward))
            records["plume"].append(sim.plume_readings())
            llkd = [np.full(0, np.nan) if o is None or o.empty else np.ravel(o.llkd)
                    for o in sim.camera_observations()]
            records["llkd"].append(np.concatenate(llkd) if llkd else np.zeros(0))
    out = {k: np.stack(v) if k != "llkd" else np.concatenate(v) for k, v in records.items()}
    out["done_reason"] = np.array(sim.done_reason)
    if sim.plume_reference_samples.size:
        out["plume_reference_samples"] = sim.plume_reference_samples
        out["plume_locations"] = sim.plume_locations
        out["plume_reward_zero_estimate"] = np.array(
            sim.submit_plume_estimates(np.zeros_like(sim.plume_reference_samples)))
    return out


def produce_trace(name: str, out: Path) -> Path:
    path = out / f"trace_{name}.npz"
    np.savez_compressed(path, **trace(name))
    return path


def produce_replay(out: Path) -> Path:
    """``qrsim replay`` of 400 steps of varied controls, with wind and an initial state."""
    from qrsim_ros.cli import replay

    inputs = out / "replay_inputs.csv"
    k = np.arange(400)
    rows = np.column_stack([0.05 * np.sin(k / 30), 0.04 * np.cos(k / 23), 0.59 + 0.02 * np.sin(k / 17),
                            0.3 * np.sin(k / 50), 12.0 - k / 400])
    with open(inputs, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["pitch", "roll", "throttle", "yaw_rate", "battery"])
        w.writerows([[repr(float(v)) for v in row] for row in rows])
    path = out / "replay.csv"
    status = replay.main(["--inputs", str(inputs), "--out", str(path), "--state0", "1,2,-20,0,0,0.3",
                          "--wind=1.5,-0.5,0.1"])
    inputs.unlink()
    if status != 0:
        raise RuntimeError(f"qrsim replay exited {status}")
    return path


def in_process_files() -> list[str]:
    """The names of the in-process golden files, each made by ``produce_file``."""
    return ([f"run_{name}.csv" for name in scenarios()] + [f"batch_{name}.csv" for name, _, _ in BATCH_CASES]
            + [f"trace_{name}.npz" for name in scenarios()] + ["replay.csv"])


def produce_file(file_name: str, out: Path) -> Path:
    """Write the in-process golden file ``file_name`` (one of ``in_process_files()``) into ``out``."""
    if file_name == "replay.csv":
        return produce_replay(out)
    kind, _, rest = file_name.partition("_")
    producers = {"run": produce_run, "batch": produce_batch, "trace": produce_trace}
    if kind not in producers or file_name not in in_process_files():
        raise ValueError(f"no in-process golden file {file_name!r}")
    return producers[kind](rest.rsplit(".", 1)[0], out)


def produce_in_process(out: Path) -> list[Path]:
    return [produce_file(name, out) for name in in_process_files()]


# --- the launched graph -------------------------------------------------------------------------

#: Wall seconds a golden graph run may take (inside test_golden's 300 s budget, which also reads the bag;
#: the runs take 20-50 s on an idle machine).
GRAPH_RUN_TIMEOUT_S = 240.0


def graph_run(case: str, work: Path, domain_id: int) -> dict[str, np.ndarray]:
    """Launch the case's graph in lockstep as fast as possible, recorded; read the bag back. A run that
    has not ended within GRAPH_RUN_TIMEOUT_S is stopped and fails with the end of its output."""
    from rosenv import run_launch

    bag = work / f"bag_{case}"
    argv = [*GRAPH_CASES[case], "--lockstep", "--real-time-factor", "0", "--record", str(bag),
            *BATTERY_OFF_PARAM]
    rc, output = run_launch(work, argv, timeout_s=GRAPH_RUN_TIMEOUT_S, domain_id=domain_id)
    if rc != 0:
        raise RuntimeError(f"qrsim launch {case} exited {rc}; its output ends:\n{output[-6000:]}")
    return read_graph_bag(bag)


#: Sensor topics read from a graph's bag (per vehicle, uavN/...) and how each message becomes numbers.
SENSOR_FIELDS = {
    "imu/data": lambda m: [m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w,
                           m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z,
                           m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z],
    "gps/fix": lambda m: [m.latitude, m.longitude, m.altitude, m.status.status],
    "gps/vel": lambda m: [m.twist.linear.x, m.twist.linear.y, m.twist.linear.z],
    "altimeter": lambda m: [m.height, m.vertical_speed],
    "wind": lambda m: [m.vector.x, m.vector.y, m.vector.z],
    "cmd/attitude": lambda m: [m.pitch, m.roll, m.throttle, m.yaw_rate, m.battery_voltage],
    "camera/detections": lambda m: np.frombuffer(bytes(m.data), np.uint8).view(np.float32)
                                   if len(m.data) % 4 == 0 else [],
}


def read_graph_bag(bag: Path) -> dict[str, np.ndarray]:
    """Every tick's fleet ground truth (/sim/vehicle_status), the referee's task statuses and the
    sensor and command messages of every vehicle (SENSOR_FIELDS), each keyed by its stamp in ns."""
    from rosbags.highlevel import AnyReader

    from qrsim_ros.bag.types import typestore

    ticks, states, valid = [], [], []
    status_rows = []
    sensors: dict[str, dict[int, np.ndarray]] = {}
    with AnyReader([bag], default_typestore=typestore()) as reader:
        for conn, _, raw in reader.messages(connections=reader.connections):
            topic = conn.topic
            kind = topic.split("/", 2)[2] if topic.startswith("/uav") else None
            if topic not in ("/sim/vehicle_status", "/referee/status") and kind not in SENSOR_FIELDS:
                continue
            msg = reader.deserialize(raw, conn.msgtype)
            if topic == "/sim/vehicle_status":
                ticks.append((msg.episode, msg.tick))
                n = len(msg.valid)
                states.append(np.asarray(msg.state, float).reshape(n, 13))
                valid.append(np.asarray(msg.valid, bool))
            elif topic == "/referee/status":
                status_rows.append([msg.step, msg.reward, msg.cumulative_reward])
            else:
                stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
                sensors.setdefault(topic, {})[stamp] = np.asarray(SENSOR_FIELDS[kind](msg), float)
    order = np.lexsort(np.array(ticks).T[::-1])
    keys = np.array(ticks)[order]
    _, first = np.unique(keys, axis=0, return_index=True)  # a re-sent tick carries the same state
    order = order[first]
    out = {"episode_tick": np.array(ticks)[order], "state": np.stack(states)[order],
           "valid": np.stack(valid)[order], "task_status": np.unique(np.array(status_rows, float), axis=0)}
    for topic, by_stamp in sensors.items():
        stamps = sorted(by_stamp)
        name = topic.strip("/").replace("/", "__")
        out[f"stamp:{name}"] = np.array(stamps, np.int64)
        rows = [by_stamp[t] for t in stamps]
        width = max(len(r) for r in rows)
        out[f"data:{name}"] = np.array([np.pad(r, (0, width - len(r)), constant_values=np.nan)
                                        for r in rows])
    return out


def launched_states(work: Path, argv: list[str]) -> tuple[dict[int, np.ndarray], str]:
    """``qrsim launch argv``, recorded: every tick's true states (N, 13) of its first episode, from the
    bag, and the launcher's output."""
    from rosenv import run_launch

    bag = work / "bag"
    rc, out = run_launch(work, [*argv, "--record", str(bag)], timeout_s=300)
    assert rc == 0, out[-5000:]
    run = read_graph_bag(bag)
    return {int(tick): state for (episode, tick), state in zip(run["episode_tick"], run["state"], strict=True)
            if episode == 1}, out


def assert_same_flight(got: dict[int, np.ndarray], want: dict[int, np.ndarray], last_tick: int,
                       tolerance: float) -> None:
    """The graph's states ``got`` equal the in-process ``want`` (by tick, up to ``last_tick``) within
    ``tolerance``; the recorder may miss the last tick of a stopping graph, never the ones before."""
    ticks = sorted(want)
    assert ticks[-1] == last_tick
    compared = [k for k in ticks if k in got]
    assert len(compared) >= len(ticks) - 1, (sorted(got)[-3:], ticks)
    for k in compared:
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=tolerance, err_msg=f"tick {k}")


def produce_graphs(out: Path, domain_base: int | None = None) -> list[Path]:
    files = []
    base = domain_base if domain_base is not None else 150 + os.getpid() % 50
    with tempfile.TemporaryDirectory(prefix="qrsim_golden_") as tmp:
        for j, case in enumerate(GRAPH_CASES):
            path = out / f"graph_{case}.npz"
            np.savez_compressed(path, **graph_run(case, Path(tmp), base + j))
            files.append(path)
    return files


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    if what in ("in-process", "all"):
        files += produce_in_process(DATA_DIR)
    if what in ("graph", "all"):
        files += produce_graphs(DATA_DIR)
    for f in files:
        print(f"{f.relative_to(REPO_ROOT)}: {f.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
