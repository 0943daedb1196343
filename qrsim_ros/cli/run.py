"""``qrsim run``: fly one episode of a scenario in process with a policy; print the reward and outcome.

    qrsim run search_rescue_2a --seed 3 --policy search-pattern --out episode.csv
    qrsim run keep_spot --steps 100 --policy hover --set wind.on=true --set wind.w6_mps=2

SCENARIO is a name from config/ (``qrsim run --list``) or a YAML path. --seed S: every random stream
(the policy's included) derives from one seed: -1 (the default) takes the scenario file's seed, 0 draws
one from the clock (as QRSim; so does a file's seed 0), 1..2147483647 is used as given. The seed used is
printed, so any run can be repeated with --seed. --steps N ends the episode after N task steps (it sets
task.duration_steps, so terminal rewards are computed as at the end of a full episode).
--set KEY=VALUE overrides one scenario key (dotted path, YAML value; repeatable).

--mavlink: every agent vehicle is flown by its onboard autopilot and reached on MAVLink as PX4 SITL instance
i is (API link udp 14540+i, ground station 14550; docs/MAVLINK.md), the run paced at --real-time-factor
(default 1; 0: as fast as it goes); the policy's actions do not fly those vehicles. E.g.
``qrsim run px4_sitl --mavlink --set num_vehicles=3``, then MAVSDK, pymavlink, MAVROS or a ground station.

--policy: hover | random | search-pattern | pursuit | random-search | team-search | team-formation |
guarded-NAME | auto (the task's baseline: search-pattern, pursuit, random-search for plume, team-search for
a team with a radio and a take-off base (team_search), else hover; the default) | MODULE:FUNC | file.py:FUNC
(FUNC(view) returning the policy, or a policy function of the view; see qrsim_ros/policies/base.py).

Output: a progress bar on stderr (redrawn in place on a terminal, a line per 10 % otherwise), then the
total reward, the outcome (time_limit, invalid_vehicle or all_persons_found), persons found (search and
rescue), simulated and wall time and the real-time factor on stdout. --out FILE.csv writes one row per
task step: step, t [s], reward, cumulative reward, then per vehicle i: px_i, py_i, pz_i (true NED
position, m), valid_i (0/1); floats in full precision; the file is replaced atomically.
A retrieve scenario's file has more columns after these (``qrsim plot RUN.csv`` draws them as
ireland_2016's Figures 8-10; docs/PLOTS.md): per vehicle i: mode_i (the mission mode the referee was
told, ``core.mission.modes.MODES``), zcmd_i (the guidance's height command, the z NED [m] the mode flies
to, read from the policy's ``MissionGuidance.height_command_z_ned_m``: hover, search, transport or grasp
height, the entry point's z in identify / reacquire_target, -R_Q (the floor) in land, idle and
emergency_land; nan with a policy other than ``mission``), battery_v_i (terminal voltage [V], nan with
the battery off), holding_i (the grasper holds a target, 0/1); per target j: tx_j, ty_j, tz_j (centre,
NED m), phase_j (resting, tethered or free); then the episode's constants on every row: landing_x,
landing_y, drop_x, drop_y (NED m), drop_radius_m, battery_full_v and battery_low_v (the guidance's
V_max and low-battery threshold V_th [V]). Other scenarios' files are unchanged.
Bad scenario names, overrides or policy names exit with status 2 and one line on stderr; a policy that
fails during the episode exits with status 1.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TextIO

import yaml

from qrsim_ros.cli import CliError, check_output_path, finish_parser, report, write_csv_atomic
from qrsim_ros.cli.commands import HELP_LINES
from qrsim_ros.cli.subcommand import Subcommand
from qrsim_ros.core.common.ticks import BASE_DT_S as TICK_S
from qrsim_ros.core.common.validation import ConfigError, shorten
from qrsim_ros.core.config.loader import load_yaml
from qrsim_ros.core.config.scenario import (
    SEED_FROM_FILE,
    Scenario,
    available_scenarios,
    check_seed,
    load_scenario,
    resolve_seed,
)
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.mission.guidance import MissionGuidance
from qrsim_ros.core.tasks.retrieve import RetrieveTask
from qrsim_ros.core.vehicles.pelican import STATE_DOWN, STATE_EAST, STATE_NORTH
from qrsim_ros.core.world.targets import PHASES
from qrsim_ros.policies import PolicyError, PolicyFactory, is_team, make_factory, policy_names
from qrsim_ros.policies.base import AutopilotView, instantiate
from qrsim_ros.policies.episode import EpisodeResult, run_episode
from qrsim_ros.policies.mission import Mission

if TYPE_CHECKING:
    from qrsim_ros.mavlink.simulator import SimulatorMavlink

PROG = "qrsim run"


# --- shared with ``qrsim batch`` --------------------------------------------------------------------

def parse_overrides(items: Sequence[str] | None) -> dict[str, Any]:
    """``["a.b=1", "c=[1, 2]"]`` -> ``{"a": {"b": 1}, "c": [1, 2]}`` (YAML 1.2 values)."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise CliError(f"--set {item!r}: expected KEY=VALUE with a dotted key, e.g. wind.on=true")
        try:
            value = load_yaml(text) if text.strip() else None
        except yaml.YAMLError as exc:
            raise CliError(f"--set {shorten(item)}: the value is not valid YAML: "
                           f"{getattr(exc, 'problem', exc)}") from None
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise CliError(f"--set {item!r}: {part!r} was already given a value")
            node = child
        node[parts[-1]] = value
    return out


def merge_overrides(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge of two override mappings (``extra`` wins)."""
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge_overrides(out[k], v)
        else:
            out[k] = v
    return out


def scenario_overrides(sets: Sequence[str] | None, steps: int | None) -> dict[str, Any]:
    """Overrides from --set and --steps (which sets task.duration_steps)."""
    overrides = parse_overrides(sets)
    if steps is not None:
        if steps < 1:
            raise CliError(f"--steps must be >= 1, got {steps}")
        overrides = merge_overrides(overrides, {"task": {"duration_steps": int(steps)}})
    return overrides


def input_files(scenario: Scenario, policy: str) -> list[tuple[str, str]]:
    """The files a run reads, as ``check_output_path`` takes them: the scenario file and a user
    policy's Python file (``--policy path.py:factory``)."""
    files = [("scenario", scenario.source)]
    module = policy.rsplit(":", 1)[0]
    if module.endswith(".py"):
        files.append(("--policy", module))
    return files


def load_checked(scenario: str, overrides: Mapping[str, Any], policy: str) -> tuple[Scenario, PolicyFactory]:
    """Load and validate the scenario (its YAML read once) and resolve the policy for its task, before
    anything runs; CliError names what is wrong."""
    try:
        sc = load_scenario(scenario, overrides)
    except ConfigError as exc:
        raise CliError(" ".join(str(exc).splitlines())) from None
    try:
        factory = make_factory(policy, sc.task.type, team=is_team(sc))
    except PolicyError as exc:
        raise CliError(str(exc)) from None
    return sc, factory


def list_scenarios(args: argparse.Namespace) -> bool:
    """``--list``: print the available scenarios, one a line; whether it was given (the subcommand is
    then done)."""
    if args.list:
        print("\n".join(available_scenarios()))
    return bool(args.list)


def require_scenario(args: argparse.Namespace, prog: str) -> None:
    """CliError unless the SCENARIO argument was given."""
    if args.scenario is None:
        raise CliError(f"the SCENARIO argument is required ({prog} --list shows them)")


def seed_argument(value: int) -> int:
    """``--seed``, validated by the core's convention (``check_seed``): -1, 0 or 1..2147483647."""
    try:
        return check_seed(value, "--seed")
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def fmt_float(x: float) -> str:
    """Shortest exact representation of a float (parses back bit for bit)."""
    return repr(float(x))


def _clock_text(seconds: float) -> str:
    minutes, secs = divmod(round(max(0.0, seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def eta_text(done: int, total: int, elapsed_s: float) -> str:
    """``ETA M:SS`` (the mean time per item so far times the items left), ``ETA --:--`` before the
    first item, ``took M:SS`` at the end."""
    if done >= total:
        return f"took {_clock_text(elapsed_s)}"
    if done <= 0:
        return "ETA --:--"
    return f"ETA {_clock_text(elapsed_s / done * (total - done))}"


class ProgressBar:
    """A dependency-free progress indicator on ``stream``: redrawn with ``\\r`` on a terminal, otherwise
    one line per ``line_fraction`` of the total. ``eta``: each update shows ``eta_text``."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None, enabled: bool = True,
                 line_fraction: float = 0.1, width: int = 30, eta: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = max(1, int(total))
        self.eta = eta
        self.clock = clock
        self.start = clock()
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = width
        self.every = max(1, round(self.total * line_fraction))
        self._last_draw = 0.0
        self._drawn = False

    def update(self, done: int, note: str = "") -> None:
        if not self.enabled:
            return
        if self.eta:
            note = f"{eta_text(done, self.total, self.clock() - self.start)} {note}".rstrip()
        if self.tty:
            now = time.monotonic()
            if done < self.total and now - self._last_draw < 0.1:
                return
            self._last_draw = now
            filled = round(self.width * done / self.total)
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total} {note}\x1b[K")
            self._drawn = True
        elif done % self.every == 0 or done == self.total:
            self.stream.write(f"{self.label}: {done}/{self.total} ({100 * done // self.total}%) {note}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments shared by run and batch: SCENARIO, --policy, --steps, --set, --list."""
    p.add_argument("scenario", nargs="?", metavar="SCENARIO", help="scenario name (config/NAME.yaml) or path")
    p.add_argument("--policy", default="auto", metavar="POLICY",
                   help=f"{' | '.join(policy_names())} | MODULE:FUNC | file.py:FUNC (default auto)")
    p.add_argument("--steps", type=int, default=None, metavar="N",
                   help="episode length in task steps (sets task.duration_steps)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                   help="override a scenario key, e.g. --set wind.on=true (repeatable)")
    p.add_argument("--list", action="store_true", help="list the available scenarios and exit")


# --- run ---------------------------------------------------------------------------------------------

def _add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_common_arguments(p)
    p.add_argument("--seed", type=int, default=SEED_FROM_FILE, metavar="S",
                   help="the seed of every random stream (-1: the scenario file's, the default; "
                   "0: from the clock; 1..2147483647: that seed)")
    p.add_argument("--out", default=None, metavar="FILE.csv", help="write one row per task step")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--mavlink", action="store_true",
                   help="every agent vehicle a PX4 vehicle on MAVLink (sets mavlink.on; docs/MAVLINK.md), "
                   "paced at --real-time-factor")
    p.add_argument("--real-time-factor", type=float, default=None, metavar="F",
                   help="with --mavlink: simulated seconds per wall second (default 1; 0: unpaced)")
    p.add_argument("--firmware", choices=["ardupilot", "px4"], default=None,
                   help="the physics end of a firmware's simulator interface: ardupilot (its JSON SITL "
                   "interface, UDP 9002+10i) or px4 (its simulator MAVLink interface, TCP 4560+i); the "
                   "rotor airframe flown by motor commands, one tick per frame (docs/FIRMWARE.md)")
    return finish_parser(p, run, PROG)


#: ``qrsim run``: ``build_parser`` registers it on the ``qrsim`` parser, ``main`` runs it standalone.
COMMAND = Subcommand(PROG, HELP_LINES["run"], __doc__, _add_arguments)
build_parser, main = COMMAND.build_parser, COMMAND.main


def episode_header(num_vehicles: int) -> list[str]:
    cols = ["step", "t", "reward", "cumulative_reward"]
    for i in range(num_vehicles):
        cols += [f"px_{i}", f"py_{i}", f"pz_{i}", f"valid_{i}"]
    return cols


def retrieve_header(num_vehicles: int, num_targets: int) -> list[str]:
    """The columns ``--out`` adds after ``episode_header``'s in a retrieve scenario (module docstring)."""
    cols: list[str] = []
    for i in range(num_vehicles):
        cols += [f"mode_{i}", f"zcmd_{i}", f"battery_v_{i}", f"holding_{i}"]
    for j in range(num_targets):
        cols += [f"tx_{j}", f"ty_{j}", f"tz_{j}", f"phase_{j}"]
    return cols + list(RETRIEVE_CONSTANTS)


#: The retrieve episode's constants repeated on every row (the mission figures draw them).
RETRIEVE_CONSTANTS = ("landing_x", "landing_y", "drop_x", "drop_y", "drop_radius_m", "battery_full_v",
                      "battery_low_v")


class MissionColumns:
    """The retrieve columns of ``--out`` (``retrieve_header``), one row part per task step. ``wrap``
    makes a policy factory that hands the built policy over, so a ``--policy mission`` run reports its
    guidance's height command (``MissionGuidance.height_command_z_ned_m``); any other policy: NaN."""

    def __init__(self, sim: Simulator) -> None:
        task = sim.task
        if not isinstance(task, RetrieveTask):
            raise TypeError("MissionColumns needs a retrieve scenario")
        self.task = task
        self.n = sim.num_vehicles
        self.guidance: dict[int, MissionGuidance] = {}

    def header(self) -> list[str]:
        return retrieve_header(self.n, self.task.targets.count)

    def wrap(self, factory: PolicyFactory) -> PolicyFactory:
        def built(view: AutopilotView) -> Any:
            policy = instantiate(factory, view)
            if isinstance(policy, Mission):
                self.guidance = dict(zip(policy.rows, policy.guidance, strict=True))
            return policy
        return built

    def row(self, s: Simulator) -> list[str]:
        task, volts = self.task, s.battery.voltage_v
        row: list[str] = []
        for i in range(self.n):
            g = self.guidance.get(i)
            zcmd = g.height_command_z_ned_m() if g is not None else float("nan")
            row += [task.mode[i], fmt_float(zcmd), fmt_float(volts[i]), "1" if task.holding(i) else "0"]
        targets = task.targets
        for j in range(targets.count):
            p = targets.position_ned_m[j]
            row += [fmt_float(p[0]), fmt_float(p[1]), fmt_float(p[2]), PHASES[int(targets.phase[j])]]
        g0 = task.retrieve.guidance
        return row + [fmt_float(v) for v in (*task.landing_site_ne, *task.drop_site_ne,
                                             task.retrieve.drop_radius_m, g0.full_battery_v,
                                             g0.low_battery_v)]


def summary_lines(scenario: str, policy: str, result: EpisodeResult) -> list[str]:
    lines = [
        f"scenario {scenario}, policy {policy}, seed {result.seed}",
        f"outcome: {result.outcome} after {result.steps} steps",
        f"reward: {result.total_reward:.6g}",
    ]
    if result.persons_total is not None:
        lines.append(f"persons found: {result.persons_found}/{result.persons_total}")
    if result.vehicles_lost:
        lines.append(f"vehicles lost: {result.vehicles_lost}")
    if result.messages_sent is not None:
        lines.append(f"messages sent: {result.messages_sent}")
    rtf = result.sim_time_s / result.wall_s if result.wall_s > 0 else float("inf")
    lines.append(f"time: {result.sim_time_s:.2f} s simulated in {result.wall_s:.2f} s wall "
                 f"(real-time factor {rtf:.1f}x)")
    return lines


def run(args: argparse.Namespace) -> int:
    """Validate, fly the episode, print the summary, write --out. 0 on success, 2 bad input, 1 failure."""
    if list_scenarios(args):
        return 0
    try:
        require_scenario(args, PROG)
        requested = seed_argument(args.seed)
        overrides = scenario_overrides(args.sets, args.steps)
        if args.real_time_factor is not None and not args.mavlink:
            raise CliError("--real-time-factor paces a --mavlink run; without --mavlink the run is unpaced")
        if args.mavlink:
            overrides = merge_overrides(overrides, {"mavlink": {"on": True}})
        if args.firmware is not None and args.mavlink:
            raise CliError("--firmware and --mavlink exclude each other: the firmware is the autopilot")
        scenario, factory = load_checked(args.scenario, overrides, args.policy)
        if args.firmware is not None:  # motors by the firmware, one 20 ms tick per frame, as long as before
            task = scenario.task
            frames = round(task.dt_s * task.duration_steps / TICK_S)
            overrides = merge_overrides(overrides, {
                "vehicle": {"airframe": "rotor", "control": "motors"},
                "task": {"dt_s": TICK_S, "duration_steps": frames}})
            scenario, factory = load_checked(args.scenario, overrides, args.policy)
        if args.out is not None:
            check_output_path(args.out, input_files(scenario, args.policy))
        # the concrete seed (a clock seed drawn here, once): the Simulator is built from it and starts
        # at the episode reset(seed=...) would give, and the printed seed repeats the run
        seed = resolve_seed(requested, scenario.seed)
        sim = Simulator(replace(scenario, seed=seed))
        link = open_mavlink(sim, args) if args.mavlink else None
        if args.firmware is not None:
            return serve_firmware(sim, args.firmware)
    except (CliError, ConfigError) as exc:
        return report(PROG, exc)
    try:
        return _fly(sim, args, factory)
    finally:
        if link is not None:
            link.close()


def open_mavlink(sim: Simulator, args: argparse.Namespace) -> SimulatorMavlink:
    """``sim``'s vehicles on MAVLink (``--mavlink``), their endpoints printed on stderr."""
    from qrsim_ros.mavlink.simulator import SimulatorMavlink  # pymavlink only for a MAVLink run

    factor = 1.0 if args.real_time_factor is None else args.real_time_factor
    if not (math.isfinite(factor) and factor >= 0):
        raise CliError(f"--real-time-factor must be >= 0 (0: unpaced), got {args.real_time_factor!r}")
    try:
        link = SimulatorMavlink(sim, real_time_factor=factor)
    except OSError as exc:
        raise CliError(f"--mavlink: cannot open the MAVLink ports (another simulator or PX4 SITL running?): "
                       f"{exc.strerror or exc}") from None
    ports = link.ports
    for i, vehicle in enumerate(sim.onboard_vehicles):
        print(f"{PROG}: vehicle {int(vehicle)}: MAVLink system {i + 1}, API udp {ports.bind_host}:"
              f"{ports.api_local + i} -> {ports.host}:{ports.api_remote + i}, ground station udp "
              f"{ports.bind_host}:{ports.gcs_local + i} -> {ports.host}:{ports.gcs_remote}", file=sys.stderr)
    return link


def serve_firmware(sim: Simulator, firmware: str) -> int:
    """``--firmware``: answer the firmware's frames until the episode ends (or Ctrl-C)."""
    from qrsim_ros.firmware import ardupilot_json, px4_hil

    try:
        server = ardupilot_json.ArduPilotJson(sim) if firmware == "ardupilot" else px4_hil.Px4Hil(sim)
    except (OSError, ValueError) as exc:
        raise CliError(f"--firmware {firmware}: {exc}") from None
    for i in range(sim.num_vehicles):
        if firmware == "ardupilot":
            where = (f"ArduPilot JSON physics on udp 127.0.0.1:{ardupilot_json.BASE_PORT + 10 * i} "
                     f"(sim_vehicle.py -v ArduCopter --model JSON -I {i})")
        else:
            where = (f"PX4 simulator interface on tcp 127.0.0.1:{px4_hil.BASE_PORT + i} "
                     f"(PX4 SITL instance {i}, e.g. PX4_SIM_MODEL=none make px4_sitl)")
        print(f"{PROG}: vehicle {i}: {where}", file=sys.stderr)
    try:
        while not sim.done:
            server.serve_once(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    print(f"frames: {[c['steps'] for c in server.counters]}, simulated {sim.time:.2f} s, outcome "
          f"{sim.done_reason or 'stopped'}")
    return 0


def _fly(sim: Simulator, args: argparse.Namespace, factory: PolicyFactory) -> int:
    """Fly the episode (``run``'s second half): the rows, the summary, --out."""
    n = sim.num_vehicles
    rows: list[list[str]] = []
    header = episode_header(n)
    mission = MissionColumns(sim) if args.out is not None and isinstance(sim.task, RetrieveTask) else None
    if mission is not None:
        header += mission.header()
        factory = mission.wrap(factory)
    cumulative = [0.0]
    bar = ProgressBar(sim.scenario.task.duration_steps, PROG, enabled=not args.no_progress)

    def on_step(s: Simulator, reward: float) -> None:
        cumulative[0] += reward
        if args.out is not None:
            x, valid = s.true_state(), s.valid
            row = [str(s.step_count), fmt_float(s.time), fmt_float(reward), fmt_float(cumulative[0])]
            for i in range(n):
                row += [fmt_float(x[i, column]) for column in (STATE_NORTH, STATE_EAST, STATE_DOWN)]
                row.append("1" if valid[i] else "0")
            if mission is not None:
                row += mission.row(s)
            rows.append(row)
        bar.update(s.step_count, f"reward {cumulative[0]:.4g}")

    try:
        result = run_episode(sim, args.policy, factory=factory, on_step=on_step)
    except PolicyError as exc:
        bar.close()
        return report(PROG, exc, 1)
    bar.close()
    if args.out is not None:
        try:
            write_csv_atomic(args.out, header, rows)
        except CliError as exc:
            return report(PROG, exc, 1)
    for line in summary_lines(sim.scenario.name, args.policy, result):
        print(line)
    if args.out is not None:
        print(f"episode: {len(rows)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
