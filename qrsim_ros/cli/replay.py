"""``qrsim replay``: run logged Pelican controls through the identified model and write the trajectory.

Validates the model against your own logs (spec sections 2.1-2.7): every row of IN.csv is one step of
dt seconds with the controls held, integrated by ``PelicanFleet`` (Heun RK2, no dynamic noise), and
OUT.csv gets the true state after each step.

IN.csv: a header row naming the columns pitch, roll, throttle, yaw_rate, battery (SI units: rad,
rad, 0..1, rad/s, V; any order; an optional t column is ignored; any other column is an error),
then one row per step. Controls must be within the Pelican limits (pitch/roll +/-0.9 rad, throttle
0..1, yaw_rate +/-4.5 rad/s, battery 9..12 V).

OUT.csv: header k,t,px,py,pz,phi,theta,psi,u,v,w,p,q,r,thrust,ax,ay,az,valid. Row k=0 is the
initial state (a = 0, valid 1), row k the state after step k (t = k*dt [s]). Position NED [m], ZYX
Euler angles [rad], body FRD velocity [m/s] and rates [rad/s], thrust [N], a = body acceleration
minus gravity [m/s^2] (QRSim's accelerometer input, spec 2.3), valid 0/1. Floats are printed with
full double precision (they parse back bit-for-bit).

A vehicle that leaves the state limits of the default Pelican configuration (spec 2.7: the flight
area, attitude +/-pi, yaw +/-10 pi, body speeds +/-15 m/s, body rates +/-3 rad/s) -- e.g. touches
the ground at pz = 0 -- becomes invalid and its state stays frozen for the rest of the log, as in
QRSim. That is a result, not an error: the exit status is still 0.

Errors: in messages "row R" is the 1-based data row of IN.csv (row 1 = the first row after the
header = step k=1 of OUT.csv; file line = R + 1). Any bad input exits with status 2 and one line on
stderr; every row is validated before integrating and OUT.csv is written to a temporary file that
replaces it only on success, so an existing OUT.csv is never half-written or lost.
Values starting with '-' must be attached with '=', e.g. --wind=-2,0,0.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from qrsim_ros.cli import CliError, check_output_path, one_line_errors, report, write_csv_atomic
from qrsim_ros.cli.commands import HELP_LINES
from qrsim_ros.cli.subcommand import Subcommand
from qrsim_ros.core.common.frames import Array, dcm_from_state, ned_to_body
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.vehicles.pelican import (
    CONTROL_LIMITS,
    CONTROL_NAMES,
    STATE_NAMES,
    STATE_POSITION_NED,
    PelicanFleet,
    PelicanInputError,
    PelicanParams,
    default_state_limits,
    expand_state,
)

PROG = "qrsim replay"
#: Ignored input column (a log's time stamps; the step is --dt).
TIME_COLUMN = "t"
OUTPUT_HEADER = ("k", "t", *STATE_NAMES, "ax", "ay", "az", "valid")
DEFAULT_STATE0 = "0,0,-10,0,0,0"  # hover at 10 m, velocities and rates 0, thrust m*g
DEFAULT_AREA = "-1000,1000,-1000,1000,-1000,0"  # NED; ground at z = 0
DEFAULT_WIND = "0,0,0"


# --- parsing ------------------------------------------------------------------------------------

def finite_number(cell: str, where: str, label: str = "value ") -> float:
    """``cell`` as a finite float; else a CliError ``WHERE: LABEL'cell' is not a number`` or ``WHERE: value
    V is not finite`` (``where`` names the option and element, or the file, row and column)."""
    try:
        v = float(cell)
    except ValueError:
        raise CliError(f"{where}: {label}{cell!r} is not a number") from None
    if not math.isfinite(v):
        raise CliError(f"{where}: value {v!r} is not finite")
    return v


def parse_number_list(text: str, option: str, sizes: Sequence[int]) -> Array:
    """Parse a comma-separated list of finite floats with one of ``sizes`` elements (``option`` names it)."""
    cells = [c.strip() for c in str(text).split(",")]
    allowed = " or ".join(str(s) for s in sizes)
    if len(cells) not in sizes:
        raise CliError(
            f"{option}: expected {allowed} comma-separated numbers, got {len(cells)}: {text!r}"
        )
    return np.array([finite_number(cell, f"{option}: element {i}", "")
                     for i, cell in enumerate(cells, start=1)])


def parse_dt(text: str) -> float:
    """The integration step [s] from ``--dt``: a finite number > 0."""
    dt_s = parse_number_list(text, "--dt", (1,))[0]
    if not dt_s > 0.0:
        raise CliError(f"--dt: value {float(dt_s)!r} must be > 0")
    return float(dt_s)


def parse_area(text: str) -> Array:
    """Flight area ``xmin,xmax,ymin,ymax,zmin,zmax`` (NED, m) from ``--area``; each min < max."""
    area = parse_number_list(text, "--area", (6,))
    for axis, (lo, hi) in zip("xyz", area.reshape(3, 2), strict=True):
        if not lo < hi:
            raise CliError(f"--area: {axis}min {float(lo)!r} must be < {axis}max {float(hi)!r}")
    return area


def parse_controls_csv(lines: Iterable[str], source: str) -> Array:
    """Parse IN.csv text (an iterable of lines, e.g. an open file) into SI controls (N, 5).

    Columns are returned in ``CONTROL_NAMES`` order. ``source`` (the file name) starts every error
    message; rows are numbered 1.. from the first data row (see the module doc). Trailing blank
    lines are ignored, any other blank row is an error. Raises CliError on the first problem.
    """
    reader = csv.reader(lines)
    try:
        rows = list(reader)
    except csv.Error as exc:
        raise CliError(f"{source}: line {reader.line_num}: not valid CSV: {exc}") from None
    if not rows:
        raise CliError(f"{source}: empty file (expected a header row {','.join(CONTROL_NAMES)})")
    header, data = [name.strip() for name in rows[0]], rows[1:]
    while data and not any(cell.strip() for cell in data[-1]):
        data.pop()  # trailing blank lines only

    column_of: dict[str, int] = {}
    for j, name in enumerate(header):
        if name in column_of:
            raise CliError(
                f"{source}: header: duplicate column {name!r} (columns {column_of[name] + 1} and {j + 1})"
            )
        if name not in CONTROL_NAMES and name != TIME_COLUMN:
            raise CliError(
                f"{source}: header: unknown column {name!r} in column {j + 1} "
                f"(expected {', '.join(CONTROL_NAMES)} and optionally {TIME_COLUMN})"
            )
        column_of[name] = j
    missing = [name for name in CONTROL_NAMES if name not in column_of]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise CliError(f"{source}: header: missing column{plural} {', '.join(missing)}")
    if not data:
        raise CliError(f"{source}: no data rows after the header")

    # file column -> (index into CONTROL_NAMES, limits); checked in file order so the first bad cell wins
    checks = [(j, CONTROL_NAMES.index(name)) for j, name in enumerate(header) if name in CONTROL_NAMES]
    controls = np.empty((len(data), len(CONTROL_NAMES)))
    for r, row in enumerate(data, start=1):
        if len(row) != len(header):
            raise CliError(f"{source}: row {r}: expected {len(header)} cells, got {len(row)}")
        for j, c in checks:
            where = f"{source}: row {r}, column {CONTROL_NAMES[c]}"
            cell = row[j].strip()
            if not cell:
                raise CliError(f"{where}: empty value")
            v = finite_number(cell, where)
            lo, hi = (float(b) for b in CONTROL_LIMITS[c])
            if not lo <= v <= hi:
                raise CliError(f"{where}: value {v!r} outside [{lo!r}, {hi!r}]")
            controls[r - 1, c] = v
    return controls


def read_controls_csv(path: str) -> Array:
    """Read and validate IN.csv (see :func:`parse_controls_csv`); file errors become CliError."""
    try:
        # utf-8-sig: spreadsheets often prepend a byte-order mark to the header
        with open(path, newline="", encoding="utf-8-sig") as f:
            return parse_controls_csv(f, path)
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


# --- the replay -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplayResult:
    """Trajectory of a replay: K = steps + 1 rows, row 0 the initial state."""

    dt_s: float
    states: Array  # (K, 13) true states X (spec 2.1)
    accel_body: Array  # (K, 3) RK2-averaged a [m/s^2] (0 in row 0)
    valid: Array  # (K,) bool
    invalid_step: int | None  # first step k at which the vehicle was invalid, None if always valid
    invalid_reason: str  # PelicanFleet.invalid_reason ('' if valid)


def make_fleet(state0: Array, dt_s: float = BASE_DT_S, area_ned: Array | None = None) -> PelicanFleet:
    """One noiseless Pelican with the default-configuration state limits of ``area_ned``, set to ``state0``.

    state0 has 6, 12 or 13 elements (spec 2.7 setX); a bad one raises CliError naming --state0.
    """
    area = parse_area(DEFAULT_AREA) if area_ned is None else np.asarray(area_ned, float)
    params = PelicanParams(dt_s=dt_s, state_limits=default_state_limits(area))
    # the dynamic noise is zero; a fixed generator keeps the run independent of OS entropy anyway
    fleet = PelicanFleet(1, params, noise_rngs=[np.random.default_rng(0)])
    try:
        x0 = expand_state(np.asarray(state0, float).reshape(1, -1), params.mass_kg)[0]
        # checked here too only for a plain message; set_state below is the authority on limits
        # (zip stops at the 12 limit rows: thrust is never checked, spec 2.7)
        for name, value, (lo, hi) in zip(STATE_NAMES, x0, params.state_limits, strict=False):
            if not lo <= value <= hi:
                bounds = f"[{float(lo)!r}, {float(hi)!r}]"
                raise CliError(f"--state0: {name}={float(value)!r} outside {bounds}")
        fleet.set_state(x0[None, :])
    except PelicanInputError as exc:
        raise CliError(f"--state0: {str(exc).removeprefix('vehicle 0: ')}") from None
    return fleet


def replay(fleet: PelicanFleet, controls: Array, wind_ned_mps: Array | None = None) -> ReplayResult:
    """Step the (single-vehicle) fleet once per row of ``controls`` (N, 5) and record the trajectory.

    ``wind_ned_mps``: constant air velocity in NED [m/s]; before each step it is rotated into the body
    frame with the current attitude (QRSim evaluates the wind once per step at the old state, spec 2.7).
    """
    n = controls.shape[0]
    states = np.empty((n + 1, 13))
    accel = np.zeros((n + 1, 3))
    valid = np.empty(n + 1, bool)
    states[0], valid[0] = fleet.state[0], fleet.valid[0]
    wind_ned = None if wind_ned_mps is None or not np.any(wind_ned_mps) else np.asarray(wind_ned_mps, float)
    invalid_step = None
    for k in range(1, n + 1):
        wind_body = None if wind_ned is None else ned_to_body(dcm_from_state(fleet.state), wind_ned[None, :])
        fleet.step(controls[k - 1 : k], wind_body)
        states[k], accel[k], valid[k] = fleet.state[0], fleet.accel_body[0], fleet.valid[0]
        if invalid_step is None and not valid[k]:
            invalid_step = k
    return ReplayResult(fleet.params.dt_s, states, accel, valid, invalid_step, fleet.invalid_reason[0])


def write_output_csv(path: str, result: ReplayResult) -> None:
    """Write OUT.csv atomically (``write_csv_atomic``: a temporary file, then ``os.replace``)."""
    # repr() of a Python float is the shortest string that parses back to the same double
    rows = ([str(k), repr(k * result.dt_s)]
            + [repr(float(v)) for v in result.states[k]]
            + [repr(float(v)) for v in result.accel_body[k]]
            + ["1" if result.valid[k] else "0"]
            for k in range(result.states.shape[0]))
    write_csv_atomic(path, OUTPUT_HEADER, rows)


def summary_line(result: ReplayResult, out_path: str) -> str:
    """One-line stdout summary: steps, final NED position, validity."""
    steps = result.states.shape[0] - 1
    px, py, pz = result.states[-1, STATE_POSITION_NED]
    if result.invalid_step is None:
        status = "valid throughout"
    else:
        t_s = result.invalid_step * result.dt_s
        status = f"INVALID from step {result.invalid_step} (t = {t_s:g} s): {result.invalid_reason or '?'}"
    return (
        f"{PROG}: {steps} steps of {result.dt_s:g} s ({steps * result.dt_s:g} s) -> {out_path}; "
        f"final position NED [{px:.3f}, {py:.3f}, {pz:.3f}] m; {status}"
    )


# --- command line -----------------------------------------------------------------------------------

def _add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--inputs", required=True, metavar="IN.csv", help="controls log (see above)")
    p.add_argument(
        "--out", required=True, metavar="OUT.csv", help="trajectory to write (replaced atomically)"
    )
    p.add_argument(
        "--state0", default=DEFAULT_STATE0, metavar="X0",
        help="initial state px,py,pz,phi,theta,psi[,u,v,w,p,q,r[,thrust]] (NED m, rad, m/s, rad/s, N); "
        "6 or 12 values get thrust m*g (default %(default)s: hover at 10 m)",
    )
    p.add_argument(
        "--dt", default=repr(BASE_DT_S), metavar="DT", help="step [s], finite and > 0 (default %(default)s)"
    )
    p.add_argument(
        "--wind", default=DEFAULT_WIND, metavar="WN,WE,WD",
        help="constant wind (air velocity) in NED [m/s], e.g. --wind=2,0,0 blows towards north "
        "(default %(default)s)",
    )
    p.add_argument(
        "--area", default=DEFAULT_AREA, metavar="XMIN,XMAX,YMIN,YMAX,ZMIN,ZMAX",
        help="flight area in NED [m]; leaving it invalidates the vehicle "
        "(default %(default)s, ground at z = 0)",
    )
    p.set_defaults(func=run)
    # instance attribute: overrides the method for this parser only (also when it is a subparser)
    return one_line_errors(p, PROG, dash_hint="attach values starting with '-' with '=', e.g. --wind=-2,0,0")


#: ``qrsim replay``: ``build_parser`` registers it on the ``qrsim`` parser, ``main`` runs it standalone.
COMMAND = Subcommand(PROG, HELP_LINES["replay"], __doc__, _add_arguments)
build_parser, main = COMMAND.build_parser, COMMAND.main


def run(args: argparse.Namespace) -> int:
    """Validate everything, replay, write OUT.csv, print a summary. Returns 0, or 2 on bad input."""
    try:
        dt_s = parse_dt(args.dt)
        wind_ned = parse_number_list(args.wind, "--wind", (3,))
        area = parse_area(args.area)
        state0 = parse_number_list(args.state0, "--state0", (6, 12, 13))
        fleet = make_fleet(state0, dt_s, area)
        check_output_path(args.out, [("--inputs", args.inputs)])  # never over the log it reads
        controls = read_controls_csv(args.inputs)  # every row validated before any integration
        try:
            result = replay(fleet, controls, wind_ned)
        except PelicanInputError as exc:  # not expected after the checks above; still a clean error
            raise CliError(f"{args.inputs}: {exc}") from None
        write_output_csv(args.out, result)
    except CliError as exc:
        return report(PROG, exc)
    print(summary_line(result, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
