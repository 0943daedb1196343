"""Single-run figures of a retrieve mission (ireland_2016 section 6.1, Figures 8-10): the mission columns
``qrsim run retrieve_... --out RUN.csv`` writes (qrsim_ros/cli/run.py) and ``qrsim plot RUN.csv``
(qrsim_ros/cli/plot.py, qrsim_ros/plots/mission.py), run in process through ``qrsim_ros.cli.main.main``."""

from __future__ import annotations

import csv
import io
import itertools
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.image import imread
from test_cli_run_batch import qrsim, read_csv  # the CLI tests' helpers

from qrsim_ros.cli import run as run_cli
from qrsim_ros.cli.main import main
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.mission.guidance import GuidanceParams, MissionGuidance
from qrsim_ros.core.mission.modes import MODES
from qrsim_ros.core.tasks.retrieve import RetrieveTask
from qrsim_ros.core.world.targets import PHASES
from qrsim_ros.plots import MISSION_FIGURES, MissionCsvError, load_mission_csv
from qrsim_ros.plots.style import DPI, FIGURE_SIZES_IN

SEED = "3"


class _Mission:
    """The fixture's run: its CSV, parsed columns and the simulator it flew (the task at the end)."""

    def __init__(self, path: Path, sim: Simulator, stdout: str) -> None:
        self.path = path
        self.sim = sim
        self.stdout = stdout
        self.header, self.rows = read_csv(path)
        self.col = {name: i for i, name in enumerate(self.header)}

    def column(self, name: str) -> list[str]:
        return [r[self.col[name]] for r in self.rows]

    def numbers(self, name: str) -> np.ndarray:
        return np.array(self.column(name), float)

    @property
    def task(self) -> RetrieveTask:
        task = self.sim.task
        assert isinstance(task, RetrieveTask)
        return task


@pytest.fixture(scope="module")
def mission(tmp_path_factory: pytest.TempPathFactory) -> _Mission:
    """One whole retrieve_simplified mission without faults, flown by ``qrsim run`` with --out; the
    Simulator the command built is kept to compare the file with the world at the end."""
    built: list[Simulator] = []

    class Recording(Simulator):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self)

    path = tmp_path_factory.mktemp("mission") / "run.csv"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run_cli, "Simulator", Recording)
        out = io.StringIO()
        mp.setattr(sys, "stdout", out)
        rc = main(["run", "retrieve_simplified", "--policy", "mission", "--seed", SEED, "--set", "faults=[]",
                   "--no-progress", "--out", str(path)])
    assert rc == 0, out.getvalue()
    assert len(built) == 1
    return _Mission(path, built[0], out.getvalue())


# --- the mission columns of qrsim run --out ------------------------------------------------------------

def test_retrieve_csv_keeps_the_run_columns_first_and_adds_the_mission_columns(mission: _Mission) -> None:
    m = mission.task.targets.count
    assert m == 2  # retrieve_simplified
    assert mission.header[:8] == run_cli.episode_header(1)
    assert mission.header[8:] == [
        "mode_0", "zcmd_0", "battery_v_0", "holding_0",
        "tx_0", "ty_0", "tz_0", "phase_0", "tx_1", "ty_1", "tz_1", "phase_1",
        "landing_x", "landing_y", "drop_x", "drop_y", "drop_radius_m", "battery_full_v", "battery_low_v"]
    assert all(len(r) == len(mission.header) for r in mission.rows)
    # a whole mission: it ends when the guidance reports it over, long before the 12000-step limit
    assert "outcome: success" in mission.stdout
    assert 200 < len(mission.rows) < 3000
    np.testing.assert_array_equal(mission.numbers("step"), np.arange(1, len(mission.rows) + 1))


def test_the_mode_column_is_the_reported_mode_path(mission: _Mission) -> None:
    modes = mission.column("mode_0")
    assert set(modes) <= set(MODES)
    for needed in ("take_off", "initialise", "search", "identify", "grasp", "transport", "drop", "land"):
        assert needed in modes
    assert modes[-1] == "idle" and mission.task.mode[0] == "idle"
    # the changes of mode_0 are the referee's log: row k's mode was reported at row k-1's time
    t = mission.numbers("t")
    changes = [(modes[k], float(t[k - 1]) if k else 0.0) for k in range(len(modes))
               if k == 0 or modes[k] != modes[k - 1]]
    log = [(mode, since) for mode, since, _ in mission.task.logs[0].entries]
    if log[0][0] == "idle" and changes[0][0] != "idle":
        log = log[1:]  # the episode's start entry: the first step already left idle
    assert [c[0] for c in changes] == [e[0] for e in log]
    np.testing.assert_allclose([c[1] for c in changes], [e[1] for e in log], rtol=0, atol=1e-9)


def test_the_height_command_is_the_modes_set_point_and_is_flown(mission: _Mission) -> None:
    p = mission.task.retrieve.guidance
    modes, zcmd, pz = mission.column("mode_0"), mission.numbers("zcmd_0"), mission.numbers("pz_0")
    expected = {"take_off": p.hover_z_ned_m, "initialise": p.hover_z_ned_m, "search": p.search_z_ned_m,
                "descend_to_grasp": p.grasp_z_ned_m, "grasp": p.grasp_z_ned_m, "ascend": p.transport_z_ned_m,
                "transport": p.transport_z_ned_m, "drop": p.grasp_z_ned_m, "land": -p.quad_radius_m,
                "idle": -p.quad_radius_m}
    for k, mode in enumerate(modes):
        if mode in expected:
            assert zcmd[k] == expected[mode], (k, mode)
    assert np.all(np.isfinite(zcmd))
    # the vehicle reaches the commanded height at the end of each take-off, transport and landing
    for k in range(len(modes) - 1):
        if modes[k] in ("take_off", "transport", "land") and modes[k + 1] != modes[k]:
            assert abs(pz[k] - zcmd[k]) < 0.15, (k, modes[k], pz[k], zcmd[k])


def test_the_battery_column_starts_full_and_drains_in_flight(mission: _Mission) -> None:
    v, modes = mission.numbers("battery_v_0"), mission.column("mode_0")
    assert v[0] == pytest.approx(11.0, abs=1e-3)
    flying = np.array([m not in ("idle", "take_off", "land") for m in modes])
    both = flying[1:] & flying[:-1]
    assert both.sum() > 100
    assert np.all(np.diff(v)[both] < 0)
    # the linear model: -0.005 V/s while not on the base
    dt = np.diff(mission.numbers("t"))[both]
    np.testing.assert_allclose(np.diff(v)[both] / dt, -0.005, rtol=1e-6)
    assert v[-1] < 11.0 - 0.005 * 30
    assert v[-1] == pytest.approx(float(mission.sim.battery.voltage_v[0]), abs=0)


def test_the_holding_and_target_columns_follow_the_grasper(mission: _Mission) -> None:
    modes, holding = mission.column("mode_0"), mission.numbers("holding_0")
    carrying = np.array([m in ("ascend", "transport", "descend_to_drop") for m in modes])
    assert carrying.any()
    assert np.all(holding[carrying] == 1)  # no faults: what is grasped is carried to the drop site
    assert np.all(holding[np.array([m in ("search", "take_off", "land") for m in modes])] == 0)
    task = mission.task
    for j in range(task.targets.count):
        phases = mission.column(f"phase_{j}")
        assert set(phases) <= set(PHASES)
        assert phases[0] == "resting" and "tethered" in phases
        final = [float(mission.rows[-1][mission.col[f"t{a}_{j}"]]) for a in "xyz"]
        np.testing.assert_array_equal(final, task.targets.position_ned_m[j])
        assert phases[-1] == PHASES[int(task.targets.phase[j])]
    # at the end both targets rest in the drop zone (the outcome is success)
    assert task.in_drop_zone().all()
    constants = [mission.numbers(c) for c in run_cli.RETRIEVE_CONSTANTS]
    assert all(np.all(c == c[0]) for c in constants)
    g = task.retrieve.guidance
    assert [c[0] for c in constants] == [*task.landing_site_ne, *task.drop_site_ne,
                                         task.retrieve.drop_radius_m, g.full_battery_v, g.low_battery_v]


def test_other_scenarios_csv_is_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keep.csv"
    rc, _, err = qrsim(capsys, "run", "keep_spot", "--steps", "5", "--policy", "hover", "--seed", "2",
                       "--out", str(path), "--no-progress")
    assert rc == 0, err
    text = path.read_text()
    assert text.startswith("step,t,reward,cumulative_reward,px_0,py_0,pz_0,valid_0\n")
    assert all(line.count(",") == 7 for line in text.splitlines())


def test_a_retrieve_run_with_another_policy_has_no_height_command(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "hover.csv"
    rc, _, err = qrsim(capsys, "run", "retrieve_simplified", "--steps", "5", "--policy", "hover",
                       "--set", "faults=[]", "--out", str(path), "--no-progress")
    assert rc == 0, err
    header, rows = read_csv(path)
    zcol = header.index("zcmd_0")
    assert [r[zcol] for r in rows] == ["nan"] * 5
    assert [r[header.index("mode_0")] for r in rows] == ["idle"] * 5


def test_height_command_of_every_mode() -> None:
    p = GuidanceParams()
    g = MissionGuidance(p, (0.0, 0.0), (1.0, 1.0), 2, lambda: True)
    g._entry = np.array([0.5, 0.5, -1.7])
    want = {"idle": -0.2, "take_off": -1.0, "initialise": -1.0, "search": -2.0, "identify": -1.7,
            "hover_above_target": -2.0, "descend_to_grasp": -0.3, "grasp": -0.3, "ascend": -1.0,
            "transport": -1.0, "descend_to_drop": -0.3, "drop": -0.3, "return_to_search": -2.0,
            "return_to_base": -1.0, "land": -0.2, "reacquire_target": -1.7, "emergency_land": -0.2}
    assert set(want) == set(MODES)
    for mode, z in want.items():
        g.mode = mode
        assert g.height_command_z_ned_m() == pytest.approx(z, abs=1e-12), mode


# --- qrsim plot RUN.csv ---------------------------------------------------------------------------------

def _check_png(path: Path, name: str) -> None:
    assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = imread(path)
    w_in, h_in = FIGURE_SIZES_IN[name]
    assert img.shape[:2] == (round(h_in * DPI), round(w_in * DPI))
    rgb = img[..., :3]
    assert np.mean(np.any(rgb < 0.9, axis=-1)) > 0.02  # something drawn, not a blank page
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 50  # lines, shading, text: many colours


def test_plot_writes_the_three_mission_figures(mission: _Mission, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "figs"
    rc, out, err = qrsim(capsys, "plot", str(mission.path), "--out", str(out_dir))
    assert rc == 0, err
    assert err == ""
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(f"{n}.png" for n in MISSION_FIGURES)
    for name in MISSION_FIGURES:
        _check_png(out_dir / f"{name}.png", name)
        assert f"wrote {out_dir / name}.png" in out
    assert "3 figure(s)" in out


def test_plot_defaults_to_a_directory_next_to_the_csv(mission: _Mission, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    csv_path = tmp_path / "flight.csv"
    csv_path.write_bytes(mission.path.read_bytes())
    rc, _, err = qrsim(capsys, "plot", str(csv_path), "--only", "mission_height")
    assert rc == 0, err
    assert [p.name for p in (tmp_path / "flight_plots").iterdir()] == ["mission_height.png"]
    _check_png(tmp_path / "flight_plots" / "mission_height.png", "mission_height")
    rc, _, err = qrsim(capsys, "plot", str(csv_path), "--only", "top_view")
    assert rc == 2 and "unknown figure(s) top_view" in err and "mission_path" in err


def test_an_output_directory_that_cannot_be_made_exits_1(mission: _Mission, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    rc, out, err = qrsim(capsys, "plot", str(mission.path), "--out", str(blocker))
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and str(blocker) in err and "cannot write the figures" in err


def test_the_battery_figure_is_skipped_without_a_battery(mission: _Mission, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    header, rows = mission.header, [list(r) for r in mission.rows]
    for r in rows:
        r[mission.col["battery_v_0"]] = "nan"
    path = tmp_path / "nobattery.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([header, *rows])
    rc, out, err = qrsim(capsys, "plot", str(path), "--out", str(tmp_path / "o"))
    assert rc == 0, err
    assert "skipped mission_battery: battery_v_0 is nan throughout" in out
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["mission_height.png", "mission_path.png"]


def test_load_mission_csv_reads_back_what_run_wrote(mission: _Mission) -> None:
    run = load_mission_csv(mission.path)
    task = mission.task
    assert run.num_targets == task.targets.count
    np.testing.assert_array_equal(run.targets_ned_m[-1], task.targets.position_ned_m)
    np.testing.assert_array_equal(run.drop_ne_m, task.drop_site_ne)
    assert run.targets_in_drop_zone() == int(task.in_drop_zone().sum()) == 2
    segments = run.mode_segments()
    assert segments[0][1] == 0.0 and segments[-1][2] == run.t_s[-1]
    assert all(a[2] == b[1] and a[0] != b[0] for a, b in itertools.pairwise(segments))


def _bad_files(tmp: Path, good: _Mission, capsys: pytest.CaptureFixture[str]) -> dict[str, tuple[Path, str]]:
    """name -> (path, what the one-line message must say)."""
    cases: dict[str, tuple[Path, str]] = {}
    header = ",".join(good.header)
    first = good.rows[0]

    def write(name: str, text: str | bytes, expect: str) -> None:
        p = tmp / name
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        cases[name] = (p, expect)

    cases["missing.csv"] = (tmp / "missing.csv", "no such file")
    (tmp / "dir.csv").mkdir()
    cases["dir.csv"] = (tmp / "dir.csv", "is a directory")
    write("empty.csv", "", "empty file")
    write("other.csv", "a,b\n1,2\n", "not a CSV of 'qrsim run --out'")
    write("binary.csv", b"\xff\xfe\x00\x81garbage\x00\n", "not")
    write("header_only.csv", header + "\n", "no data rows")
    write("short_row.csv", header + "\n" + ",".join(first[:-3]) + "\n", "line 2 has")
    bad_mode = list(first)
    bad_mode[good.col["mode_0"]] = "hover"
    write("bad_mode.csv", header + "\n" + ",".join(bad_mode) + "\n", "unknown mission mode 'hover'")
    bad_number = list(first)
    bad_number[good.col["px_0"]] = "north"
    write("bad_number.csv", header + "\n" + ",".join(bad_number) + "\n",
          "column px_0: 'north' is not a number")
    # a run of another scenario: the run columns without the mission's
    keep = tmp / "keep_spot.csv"
    rc, _, err = qrsim(capsys, "run", "keep_spot", "--steps", "3", "--policy", "hover", "--out", str(keep),
                       "--no-progress")
    assert rc == 0, err
    cases["keep_spot.csv"] = (keep, "without the mission columns")
    return cases


def test_a_bad_csv_exits_2_with_one_line_naming_it(mission: _Mission, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    cases = _bad_files(tmp_path, mission, capsys)
    for name, (path, expect) in cases.items():
        out_dir = tmp_path / f"out_{name}"
        rc, out, err = qrsim(capsys, "plot", str(path), "--out", str(out_dir))
        assert rc == 2, (name, out, err)
        assert out == "", name
        assert err.count("\n") == 1 and err.startswith("qrsim plot: "), (name, err)
        assert str(path) in err and expect in err, (name, err)
        assert "Traceback" not in err
        assert not out_dir.exists(), name  # nothing written
        with pytest.raises(MissionCsvError):
            load_mission_csv(path)
