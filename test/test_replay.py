"""Tests of ``qrsim replay`` (qrsim_ros/cli/replay.py): a CSV adapter over PelicanFleet (spec 2.1-2.7).

The CLI runs both in a subprocess (``python -m qrsim_ros.cli.replay`` from the repository root) and
in-process through ``main([...])``. Expected trajectories are computed here by stepping PelicanFleet
directly, which is legitimate because replay is only an adapter around it.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qrsim_ros.cli import CliError, replay
from qrsim_ros.core.common.frames import dcm_from_state, ned_to_body
from qrsim_ros.core.vehicles.pelican import (
    HOVER_THROTTLE,
    STATE_NAMES,
    PelicanFleet,
    PelicanParams,
    default_state_limits,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
HEADER = "k,t,px,py,pz,phi,theta,psi,u,v,w,p,q,r,thrust,ax,ay,az,valid"
CONTROLS = ("pitch", "roll", "throttle", "yaw_rate", "battery")
HOVER_ROW = (0.0, 0.0, HOVER_THROTTLE, 0.0, 12.0)
DEFAULT_AREA = [-1000, 1000, -1000, 1000, -1000, 0]


# --- helpers --------------------------------------------------------------------------------------

def write_inputs(path: Path, rows, header=CONTROLS) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for row in rows:
            w.writerow([c if isinstance(c, str) else repr(float(c)) for c in row])
    return path


def run_subprocess(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "qrsim_ros.cli.replay", *args],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False,
    )


def run_inprocess(capsys, *args: str) -> tuple[int, str, str]:
    rc = replay.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def read_output(path: Path) -> tuple[list[str], np.ndarray]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], np.array([[float(c) for c in row] for row in rows[1:]])


def expected_trajectory(controls, state0, dt_s=0.02, wind_ned=(0.0, 0.0, 0.0), area=DEFAULT_AREA):
    """Independent stepping of PelicanFleet: rows [k, t, X(13), a(3), valid]."""
    fleet = PelicanFleet(1, PelicanParams(dt_s=dt_s, state_limits=default_state_limits(area)))
    fleet.set_state(np.asarray(state0, float)[None, :])
    rows = [[0.0, 0.0, *fleet.state[0], 0.0, 0.0, 0.0, 1.0]]
    wind = np.asarray(wind_ned, float)[None, :]
    for k, u in enumerate(np.asarray(controls, float), start=1):
        wind_body = ned_to_body(dcm_from_state(fleet.state), wind) if wind.any() else None
        fleet.step(u[None, :], wind_body)
        rows.append([k, k * dt_s, *fleet.state[0], *fleet.accel_body[0], float(fleet.valid[0])])
    return np.array(rows)


# --- good runs ------------------------------------------------------------------------------------

def test_hover_subprocess(tmp_path: Path) -> None:
    n = 250
    inp = write_inputs(tmp_path / "in.csv", [HOVER_ROW] * n)
    out = tmp_path / "out.csv"
    res = run_subprocess("--inputs", str(inp), "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    assert res.stdout.count("\n") == 1 and f"{n} steps" in res.stdout and "valid" in res.stdout
    assert out.read_text().splitlines()[0] == HEADER
    header, data = read_output(out)
    assert data.shape == (n + 1, len(header))
    np.testing.assert_array_equal(data[:, 0], np.arange(n + 1))
    assert np.all(np.abs(data[:, 4] + 10.0) < 0.01)  # z stays at -10 m within 1 cm
    np.testing.assert_array_equal(data[:, -1], 1.0)
    x0 = [0, 0, -10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1.68 * 9.81]
    np.testing.assert_array_equal(data[0, 2:], [*x0, 0, 0, 0, 1])


def test_full_precision_matches_pelican_fleet_bit_for_bit(tmp_path: Path, capsys) -> None:
    n, dt_s = 300, 0.01
    k = np.arange(n)
    controls = np.column_stack(
        [
            0.2 * np.sin(0.05 * k),
            0.15 * np.cos(0.07 * k),
            HOVER_THROTTLE + 0.05 * np.sin(0.03 * k),
            0.8 * np.sin(0.02 * k),
            np.full(n, 11.0),
        ]
    )
    state0 = [1.0, -2.0, -30.0, 0.05, -0.03, 0.4, 0.5, 0.1, -0.2, 0.01, 0.02, -0.03]
    wind = (1.0, -0.5, 0.2)
    inp = write_inputs(tmp_path / "in.csv", controls)
    out = tmp_path / "out.csv"
    rc, _, err = run_inprocess(
        capsys, "--inputs", str(inp), "--out", str(out), "--dt", repr(dt_s),
        "--state0=" + ",".join(map(repr, state0)), "--wind=" + ",".join(map(repr, wind)),
    )
    assert (rc, err) == (0, "")
    header, data = read_output(out)
    assert ",".join(header) == HEADER
    expected = expected_trajectory(controls, state0, dt_s, wind)
    assert data.shape == expected.shape == (n + 1, 19)
    np.testing.assert_array_equal(data, expected)  # exact: repr() round-trips every double
    assert data[-1, 2:5].tolist() != [1.0, -2.0, -30.0]  # it did move


def test_ground_contact_invalidates_and_freezes(tmp_path: Path, capsys) -> None:
    n = 150
    rows = [(0.0, 0.0, 0.3, 0.0, 12.0)] * n
    inp = write_inputs(tmp_path / "in.csv", rows)
    out = tmp_path / "out.csv"
    rc, stdout, err = run_inprocess(capsys, "--inputs", str(inp), "--out", str(out), "--state0=0,0,-1,0,0,0")
    assert (rc, err) == (0, "")
    _, data = read_output(out)
    valid = data[:, -1]
    first_invalid = int(np.argmin(valid))
    assert 0 < first_invalid < n
    assert np.all(valid[:first_invalid] == 1) and np.all(valid[first_invalid:] == 0)
    assert data[first_invalid, 4] > 0.0  # frozen at the offending state: below the ground
    frozen = data[first_invalid:, 2:-1]
    np.testing.assert_array_equal(frozen, np.tile(frozen[0], (frozen.shape[0], 1)))
    assert f"INVALID from step {first_invalid}" in stdout and "pz=" in stdout
    np.testing.assert_array_equal(data, expected_trajectory(rows, [0, 0, -1, 0, 0, 0]))


def test_rate_limit_invalidates(tmp_path: Path, capsys) -> None:
    rows = [(0.0, 0.9, HOVER_THROTTLE, 0.0, 12.0)] * 25 + [(0.0, -0.9, HOVER_THROTTLE, 0.0, 12.0)] * 25
    inp = write_inputs(tmp_path / "in.csv", rows)
    out = tmp_path / "out.csv"
    rc, stdout, _ = run_inprocess(capsys, "--inputs", str(inp), "--out", str(out))
    assert rc == 0
    _, data = read_output(out)
    assert data[-1, -1] == 0 and abs(data[-1, 2 + STATE_NAMES.index("p")]) > 3.0
    assert "INVALID" in stdout and "p=" in stdout


@pytest.mark.parametrize(("wind", "axis", "sign"), [("2,0,0", 0, 1), ("=-2,0,0", 0, -1), ("0,2,0", 1, 1)])
def test_wind_drift_direction(tmp_path: Path, capsys, wind: str, axis: int, sign: int) -> None:
    inp = write_inputs(tmp_path / "in.csv", [HOVER_ROW] * 250)
    out = tmp_path / "out.csv"
    wind_args = ["--wind" + wind] if wind.startswith("=") else ["--wind", wind]
    rc, _, err = run_inprocess(capsys, "--inputs", str(inp), "--out", str(out), *wind_args)
    assert (rc, err) == (0, "")
    _, data = read_output(out)
    drift = data[-1, 2:4]
    assert sign * drift[axis] > 1.0  # a 2 m/s wind carries the hovering vehicle along
    assert abs(drift[1 - axis]) < 1e-6 * abs(drift[axis])


def test_time_column_ignored_and_any_column_order(tmp_path: Path, capsys) -> None:
    rows = [(0.01 * i, -0.01 * i, HOVER_THROTTLE + 0.001 * i, 0.02 * i, 10.5) for i in range(40)]
    outs = []
    for name, header, cells in [
        ("plain", CONTROLS, rows),
        ("with_t", ("t", *CONTROLS), [(f"12:00:{i:02d} not a number", *r) for i, r in enumerate(rows)]),
        ("shuffled", ("battery", "t", "yaw_rate", "pitch", "throttle", "roll"),
         [(r[4], repr(0.02 * i), r[3], r[0], r[2], r[1]) for i, r in enumerate(rows)]),
    ]:
        inp = write_inputs(tmp_path / f"{name}.csv", cells, header)
        out = tmp_path / f"{name}_out.csv"
        rc, _, err = run_inprocess(capsys, "--inputs", str(inp), "--out", str(out))
        assert (rc, err) == (0, ""), name
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]


def test_existing_output_replaced_on_success(tmp_path: Path, capsys) -> None:
    inp = write_inputs(tmp_path / "in.csv", [HOVER_ROW] * 3)
    out = tmp_path / "out.csv"
    out.write_text("old\n")
    rc, _, _ = run_inprocess(capsys, "--inputs", str(inp), "--out", str(out))
    assert rc == 0 and out.read_text().startswith(HEADER)
    assert sorted(os.listdir(tmp_path)) == ["in.csv", "out.csv"]  # no temporary file left


def test_subcommand_registration() -> None:
    parser = argparse.ArgumentParser(prog="qrsim")
    replay.build_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["replay", "--inputs", "a.csv", "--out", "b.csv"])
    assert args.func is replay.run
    assert (args.dt, args.state0, args.wind) == ("0.02", "0,0,-10,0,0,0", "0,0,0")


def test_help_documents_row_numbering(capsys) -> None:
    rc, out, _ = run_inprocess(capsys, "--help")
    assert rc == 0 and "1-based data row" in out and "--wind=-2,0,0" in out


def test_parse_controls_csv_is_usable_on_its_own() -> None:
    lines = ["throttle,pitch,roll,yaw_rate,battery\n", "0.5,0.1,0.2,0.3,11\n", "0.6,-0.1,-0.2,-0.3,12\n"]
    lines += ["\n", "\n"]  # trailing blank lines are fine
    u = replay.parse_controls_csv(lines, "mem.csv")
    np.testing.assert_array_equal(u, [[0.1, 0.2, 0.5, 0.3, 11.0], [-0.1, -0.2, 0.6, -0.3, 12.0]])
    with pytest.raises(CliError, match=r"^mem\.csv: row 2: expected 5 cells, got 0$"):
        replay.parse_controls_csv([lines[0], lines[1], "\n", lines[2]], "mem.csv")


def test_exact_error_message_and_row_numbering(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    rows = [HOVER_ROW] * 6 + [(0.0, 0.0, 1.5, 0.0, 12.0)] + [HOVER_ROW] * 3
    write_inputs(tmp_path / "IN.csv", rows)
    rc, out, err = run_inprocess(capsys, "--inputs", "IN.csv", "--out", "OUT.csv")
    assert rc == 2 and out == ""
    # row 7 = the 7th data row (file line 8)
    assert err == "qrsim replay: IN.csv: row 7, column throttle: value 1.5 outside [0.0, 1.0]\n"
    assert not (tmp_path / "OUT.csv").exists()


# --- bad inputs: exit 2, one stderr line, OUT untouched --------------------------------------------

GOOD = [HOVER_ROW] * 5


def _bad_rows(row: int, column: str, value: str):
    rows = [[repr(float(c)) for c in r] for r in GOOD]
    rows[row - 1][CONTROLS.index(column)] = value
    return CONTROLS, rows


# (case id, IN.csv content: (header, rows), raw text or None = no file, extra args, message fragments)
BASE = (CONTROLS, GOOD)
BAD_CASES = [
    ("missing_file", None, [], ["IN.csv", "cannot read"]),
    ("empty_file", "", [], ["IN.csv", "empty file"]),
    ("header_only", "pitch,roll,throttle,yaw_rate,battery\n", [], ["IN.csv", "no data rows"]),
    ("missing_column", (CONTROLS[:4], [r[:4] for r in GOOD]), [], ["IN.csv", "missing column battery"]),
    ("duplicate_column", ((*CONTROLS, "roll"), [(*r, 0.0) for r in GOOD]), [],
     ["IN.csv", "duplicate column 'roll'"]),
    ("unknown_column", ((*CONTROLS, "altitude"), [(*r, 1.0) for r in GOOD]), [],
     ["IN.csv", "unknown column 'altitude'"]),
    ("non_numeric", _bad_rows(3, "roll", "abc"), [], ["IN.csv", "row 3, column roll", "'abc'"]),
    ("empty_cell", _bad_rows(2, "yaw_rate", ""), [], ["IN.csv", "row 2, column yaw_rate", "empty"]),
    ("nan", _bad_rows(4, "pitch", "nan"), [], ["IN.csv", "row 4, column pitch", "not finite"]),
    ("inf", _bad_rows(5, "battery", "-inf"), [], ["IN.csv", "row 5, column battery", "not finite"]),
    ("throttle_high", _bad_rows(1, "throttle", "1.5"), [],
     ["IN.csv: row 1, column throttle: value 1.5 outside [0.0, 1.0]"]),
    ("battery_low", _bad_rows(5, "battery", "8.9"), [],
     ["IN.csv: row 5, column battery", "outside [9.0, 12.0]"]),
    ("pitch_high", _bad_rows(2, "pitch", "0.95"), [],
     ["IN.csv: row 2, column pitch", "outside [-0.9, 0.9]"]),
    ("short_row", (CONTROLS, [*GOOD[:2], GOOD[2][:4], *GOOD[3:]]), [], ["IN.csv: row 3", "expected 5 cells"]),
    ("state0_length", BASE, ["--state0=0,0,-10,0,0"], ["--state0", "6 or 12 or 13"]),
    ("state0_nan", BASE, ["--state0=0,0,nan,0,0,0"], ["--state0", "element 3", "not finite"]),
    ("state0_underground", BASE, ["--state0=0,0,5,0,0,0"], ["--state0: pz=5.0 outside [-1000.0, 0.0]"]),
    ("state0_rate", BASE, ["--state0=0,0,-5,0,0,0,0,0,0,4,0,0"], ["--state0: p=4.0 outside [-3.0, 3.0]"]),
    ("wind_length", BASE, ["--wind", "1,2"], ["--wind", "expected 3"]),
    ("wind_text", BASE, ["--wind", "1,north,0"], ["--wind", "element 2", "'north'"]),
    ("area_length", BASE, ["--area=-10,10,-10,10,-20"], ["--area", "expected 6"]),
    ("area_order", BASE, ["--area=-10,10,10,-10,-20,0"], ["--area", "ymin 10.0 must be < ymax -10.0"]),
    ("dt_zero", BASE, ["--dt", "0"], ["--dt", "must be > 0"]),
    ("dt_negative", BASE, ["--dt=-0.02"], ["--dt", "must be > 0"]),
    ("dt_nan", BASE, ["--dt", "nan"], ["--dt", "not finite"]),
    ("dt_inf", BASE, ["--dt", "inf"], ["--dt", "not finite"]),
    ("dt_text", BASE, ["--dt", "fast"], ["--dt", "not a number"]),
    ("negative_without_equals", BASE, ["--wind", "-2,0,0"], ["--wind", "'='"]),
]

def _prepare(tmp_path: Path, content) -> Path:
    inp = tmp_path / "IN.csv"
    if isinstance(content, str):
        inp.write_text(content)
    elif content is not None:
        write_inputs(inp, content[1], content[0])
    return inp


@pytest.mark.parametrize("mode", ["inprocess", "subprocess"])
@pytest.mark.parametrize(
    ("content", "extra", "fragments"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES]
)
def test_bad_input(tmp_path: Path, capsys, mode: str, content, extra: list[str], fragments: list[str]):
    inp = _prepare(tmp_path, content)
    # in-process: without and with an existing OUT; subprocess (slower to start): with one only
    for preexisting in (False, True) if mode == "inprocess" else (True,):
        out = tmp_path / "OUT.csv"
        if preexisting:
            out.write_text("precious\n")
        before = sorted(os.listdir(tmp_path))
        args = ["--inputs", str(inp), "--out", str(out), *extra]
        if mode == "subprocess":
            res = run_subprocess(*args)
            rc, stdout, stderr = res.returncode, res.stdout, res.stderr
        else:
            rc, stdout, stderr = run_inprocess(capsys, *args)
        assert rc == 2
        assert stdout == ""
        assert stderr.startswith("qrsim replay: ") and stderr.endswith("\n"), stderr
        assert stderr.count("\n") == 1, stderr  # exactly one line
        for fragment in fragments:
            assert fragment in stderr, (fragment, stderr)
        if preexisting:
            assert out.read_text() == "precious\n"
        else:
            assert not out.exists()
        assert sorted(os.listdir(tmp_path)) == before  # no temporary file left behind


def test_unwritable_output_directory(tmp_path: Path, capsys) -> None:
    inp = write_inputs(tmp_path / "in.csv", GOOD)
    rc, _, err = run_inprocess(capsys, "--inputs", str(inp), "--out", str(tmp_path / "missing" / "out.csv"))
    assert rc == 2 and "cannot write" in err and err.count("\n") == 1
