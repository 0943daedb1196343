"""The launch plan: which nodes a scenario needs, with their names, namespaces, remappings and parameters.

One plain-Python function, ``plan(...)``, computes the node set once; both the ROS 2 launch files
(``launch/<family>.launch.py``, through ``plan_from_launch_arguments``) and the embedded launcher
(``qrsim launch``, ``qrsim_ros.cli.launch``) turn its ``NodeSpec`` list into processes, so the two
start exactly the same graph. Nothing here imports rclpy or launch.

Scenario families and their config files (config/<name>.yaml):

- ``search_rescue`` + variant 2a..2d -> ``search_rescue_2a`` ... (default 2c); ``scene`` ->
  ``search_rescue_scene`` (the 3-D scene with lidar, fisheye and range finders, docs/SCENE.md)
- ``plume`` + variant 3a..3g -> ``plume_3a`` ... (default 3a)
- ``cats_mouse`` + variant 1a..1c -> ``cats_mouse_1a`` ... (default 1a)
- ``keep_spot`` (no variant) -> ``keep_spot``
- ``team_search`` (no variant) -> ``team_search`` (the team with radio, obstacles and range finders;
  ``--num-vehicles`` 1 to 50, docs/TEAMS.md)

Any other scenario file name (``goto_waypoint``, ``search_rescue_2b``) or a YAML path is accepted
too, without a variant. The variant may be written ``2c``, ``2C``, ``c`` or ``C``.

Node set: every scenario runs ``vehicle_dynamics``, ``wind_field``, ``imu``, ``gps``, ``altimeter``
and ``referee``; ``camera_detector`` for search and rescue, ``plume_field`` for plume mapping, one node
per registered sensor the scenario lists under ``vehicle.sensors`` (``core.sensors.registry``),
``comms`` when the scenario's radio is on (``comms.on``),
``flight_controller`` when any vehicle is flown through a controller (control mode other than
``attitude``), the autopilot when requested (``example_autopilot``: every task's baseline; retrieve:
``mission_autopilot``, the 17-mode mission), ``recorder`` when recording,
``rviz2`` when requested. Every node is in the root namespace and serves all vehicles (``uav1``...).
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qrsim_ros.core.common.limits import LIMITS, LOCKSTEP_WINDOW_TICKS, MAX_GRAPH_VEHICLES
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.sensors.registry import SENSORS
from qrsim_ros.core.vehicles.fleet_control import CONTROLLED_MODES

#: Scenario families with variants: family -> (variants, default variant).
FAMILY_VARIANTS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "search_rescue": (("2a", "2b", "2c", "2d", "scene"), "2c"),
    "plume": (("3a", "3b", "3c", "3d", "3e", "3f", "3g"), "3a"),
    "cats_mouse": (("1a", "1b", "1c"), "1a"),
    "keep_spot": ((), None),
    "retrieve": (("full", "simplified"), "simplified"),
    "team_search": ((), None),
}
#: The families that have a launch file (launch/<family>.launch.py).
LAUNCH_FAMILIES = ("search_rescue", "plume", "cats_mouse", "keep_spot", "retrieve", "team_search")
#: Task types (scenario ``task.type``) the built-in example autopilot flies: all of them, with the task's
#: baseline policy (search pattern, pursuit, random search; hover for the generic tasks), but retrieve.
AUTOPILOT_TASKS = ("keep_spot", "keep_spot_x10", "goto_waypoint", "keep_velocity", "cats_mouse",
                   "search_rescue", "plume")
#: Task types with an autopilot node of their own: retrieve's 17-mode mission (mission_autopilot).
MISSION_AUTOPILOTS = {"retrieve": "mission_autopilot"}
#: A mission autopilot reports its progress (/sim/tick_progress) and the lockstep window shrinks to this
#: many ticks, so the simulation waits for the mission's answer to every task step: its set points fly
#: at most one tick late, instead of several (a 5-tick window crashed a seed near a wall) or going stale
#: on a loaded machine. It costs the graph's pipelining: measured real-time factor 1.1-1.3 at
#: real_time_factor 0 with two such graphs on 2 cores.
MISSION_WINDOW_TICKS = 1
#: In a lockstep run with an autopilot these nodes' parameters make the autopilot a lockstep input (the
#: inputs of every task step awaited before it answers, its set point of every step awaited by the flight
#: controller; a mission's grasper commands by the referee): the run is the in-process one.
AUTOPILOT_LOCKSTEP_PARAMETERS = {"example_autopilot": "lockstep", "mission_autopilot": "lockstep",
                                 "flight_controller": "await_task_setpoints"}
MISSION_LOCKSTEP_PARAMETERS = {**AUTOPILOT_LOCKSTEP_PARAMETERS, "referee": "await_grasper_commands"}
#: Nodes every scenario runs.
CORE_NODES = ("vehicle_dynamics", "wind_field", "imu", "gps", "altimeter")
#: Nodes that subscribe to /sim/vehicle_status, the fleet's ground truth (vehicle_dynamics waits for them):
#: these and every registered sensor's node (``core.sensors.registry``).
#: (mission_autopilot reads the onboard failsafes there.)
GROUND_TRUTH_CONSUMERS = frozenset({"wind_field", "imu", "gps", "altimeter", "camera_detector", "plume_field",
                                    "comms", "referee", "flight_controller", "mavlink_bridge",
                                    "mission_autopilot"}) | frozenset(SENSORS)
#: Nodes whose time is their input's: every output is stamped with the time of the tick whose ground
#: truth it was computed from, so they run without use_sim_time and take no /clock (one callback per
#: tick fewer each; their /diagnostics are stamped with the last tick's time too).
TICK_CLOCKED = GROUND_TRUTH_CONSUMERS - {"flight_controller", "mavlink_bridge", "mission_autopilot"}
#: Nodes that report their progress by task step (the ticks before the next step they must answer), not
#: by ground-truth tick: the lockstep window keeps the clock within reach of their set points.
STEP_PACED = frozenset({"example_autopilot"})
PACKAGE = "qrsim_ros"





class PlanError(ValueError):
    """Bad launch arguments; the message names the argument, its value and what is allowed."""


@dataclass(frozen=True)
class NodeSpec:
    """One node to start: what ``launch_ros.actions.Node`` or a process needs.

    ``parameters`` maps parameter names to plain values (bool, int, float, str, lists of them);
    ``remappings`` are (from, to) pairs; ``arguments`` are extra command-line arguments (before
    ``--ros-args``). ``package`` is ``qrsim_ros`` except for third-party tools (rviz2).
    """

    executable: str
    name: str
    namespace: str = "/"
    parameters: Mapping[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    arguments: tuple[str, ...] = ()
    package: str = PACKAGE

    @property
    def fully_qualified_name(self) -> str:
        ns = self.namespace.rstrip("/")
        return f"{ns}/{self.name}" if ns else f"/{self.name}"

    @property
    def module(self) -> str | None:
        """The Python module of a qrsim_ros node (``qrsim_ros.nodes.<executable>``), else None."""
        return f"{PACKAGE}.nodes.{self.executable}" if self.package == PACKAGE else None

    def params_file_content(self) -> dict[str, Any]:
        """A ROS 2 parameter file's content for this node (keyed by its fully qualified name)."""
        return {self.fully_qualified_name: {"ros__parameters": dict(self.parameters)}}

    def ros_arguments(self, params_file: str | os.PathLike[str] | None = None) -> list[str]:
        """``--ros-args`` for a process: name, namespace, remappings and the parameter file.

        Without ``params_file`` the parameters are passed as ``-p name:=value`` (YAML values).
        """
        args = ["--ros-args", "-r", f"__node:={self.name}", "-r", f"__ns:={self.namespace}"]
        for src, dst in self.remappings:
            args += ["-r", f"{src}:={dst}"]
        if params_file is not None:
            args += ["--params-file", os.fspath(params_file)]
        else:
            for key, value in self.parameters.items():
                args += ["-p", f"{key}:={_yaml_scalar(value)}"]
        return args

    def launch_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``launch_ros.actions.Node`` for this node."""
        return {
            "package": self.package,
            "executable": self.executable,
            "name": self.name,
            "namespace": self.namespace,
            "parameters": [dict(self.parameters)],
            "remappings": [tuple(r) for r in self.remappings],
            "arguments": list(self.arguments),
            "output": "screen",
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "executable": self.executable, "name": self.name, "namespace": self.namespace,
            "parameters": dict(self.parameters), "remappings": [list(r) for r in self.remappings],
            "arguments": list(self.arguments), "package": self.package,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeSpec:
        return cls(
            executable=str(data["executable"]), name=str(data["name"]),
            namespace=str(data.get("namespace", "/")), parameters=dict(data.get("parameters", {})),
            remappings=tuple((str(a), str(b)) for a, b in data.get("remappings", ())),
            arguments=tuple(str(a) for a in data.get("arguments", ())),
            package=str(data.get("package", PACKAGE)),
        )


def _yaml_scalar(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=True, width=10**9).strip().removesuffix("...").strip()


# --- scenario names -----------------------------------------------------------------------------

def normalise_variant(family: str, variant: str) -> str:
    """``2C`` / ``c`` -> ``2c`` for search_rescue; PlanError if the family has no such variant."""
    variants, _ = FAMILY_VARIANTS[family]
    v = str(variant).strip().lower()
    if not variants:
        raise PlanError(f"variant={variant!r}: {family} has no variants")
    prefix = variants[0][:-1]
    if len(v) == 1 and v.isalpha() and len(variants[0]) == 2:  # 2c, 3a, 1b: the letter alone
        v = prefix + v
    if v not in variants:
        raise PlanError(f"variant={variant!r} is not a {family} variant; one of {', '.join(variants)}")
    return v


def config_name(scenario: str, variant: str | None = None) -> str:
    """The scenario file a family + variant selects (``search_rescue`` + ``2C`` -> ``search_rescue_2c``).

    A scenario that is not a family (a config name or a YAML path) is returned unchanged; it takes no
    variant.
    """
    scenario = str(scenario).strip()
    if not scenario:
        raise PlanError("scenario is empty; one of " + ", ".join(FAMILY_VARIANTS) + " or a config name")
    variant = None if variant is None or str(variant).strip() == "" else str(variant)
    if scenario in FAMILY_VARIANTS:
        _, default = FAMILY_VARIANTS[scenario]
        if variant is None:
            return f"{scenario}_{default}" if default else scenario
        return f"{scenario}_{normalise_variant(scenario, variant)}"
    if variant is not None:
        raise PlanError(f"variant={variant!r} given for scenario {scenario!r}, which is not a family with "
                        f"variants ({', '.join(f for f, (v, _) in FAMILY_VARIANTS.items() if v)})")
    return scenario


def default_bag_dir(config: str, now: float | None = None) -> str:
    """``bags/<config>_<YYYYmmdd_HHMMSS>`` under the current directory (absolute)."""
    stem = Path(config).stem
    stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(now))
    return os.path.abspath(os.path.join("bags", f"{stem}_{stamp}"))


#: The RViz configuration (rviz/<family>.rviz) of each task type: the generic tasks use keep_spot's.
RVIZ_FAMILY_OF_TASK = {"search_rescue": "search_rescue", "plume": "plume", "cats_mouse": "cats_mouse"}


def rviz_config(task_type: str = "keep_spot", config: str | None = None) -> str | None:
    """The RViz configuration shipped for a scenario: rviz/<config>.rviz if there is one for the config
    file's name (``search_rescue_scene``), else the task type's (rviz/<family>.rviz: search_rescue,
    plume, cats_mouse; keep_spot for the generic tasks), from the installed share directories
    (AMENT_PREFIX_PATH) first, else the source tree; None if there is none."""
    names = [f"{config}.rviz"] if config else []
    names.append(f"{RVIZ_FAMILY_OF_TASK.get(task_type, 'keep_spot')}.rviz")
    prefixes = [Path(prefix) / "share" / PACKAGE / "rviz"
                for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if prefix]
    prefixes.append(Path(__file__).resolve().parents[1] / "rviz")
    for name in names:
        for folder in prefixes:
            if (folder / name).is_file():
                return str(folder / name)
    return None


# --- the plan -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ResolvedScenario:
    """What ``plan`` resolved: the config (name or absolute path), its task type, seed and vehicles."""

    config: str
    task_type: str
    seed: int
    num_vehicles: int
    control_modes: tuple[str, ...]
    duration_s: float  # the episode length (task.duration_steps * task.dt_s) [s]
    sensors: tuple[str, ...] = ()  # registered sensors the scenario lists (vehicle.sensors)
    run_id: str = ""  # the run's identity, given to every node (``resolve_run_id``)
    comms: bool = False  # the scenario's radio is on (``comms.on``): the comms node runs
    mavlink: bool = False  # onboard autopilots on MAVLink (``mavlink.on``): mavlink_bridge flies them


#: What a given run identity may contain (it is printed, logged and compared, never parsed).
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: Words a ROS parameter (YAML) reads as a boolean or null, not as text.
_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"})
_HEX_FLOAT = re.compile(r"[-+]?0x[0-9a-f.]*p[-+]?[0-9]+")


def reads_as_non_string(text: str) -> bool:
    """True if ROS's parameter parser (rcl's YAML: ``-p name:=value``, a parameter file) would read
    ``text`` as a number, a boolean or null rather than as the string it is: an integer (any base),
    a float (``47460593096426e8``, ``inf``, ``nan``, a hex float) or a YAML word (``on``, ``no``).
    Over-strict on purpose (Python's own number syntax is wider): such a string fails a string
    parameter's type check in every node."""
    lowered = text.lower()
    if lowered in _YAML_WORDS or _HEX_FLOAT.fullmatch(lowered):
        return True
    try:
        float(text)
        return True
    except ValueError:
        pass
    try:
        int(text, 0)
        return True
    except ValueError:
        return False


def resolve_run_id(run_id: str | None = None) -> str:
    """The run's identity: ``run_id`` as given (1-64 characters of A-Z a-z 0-9 _ . -, not one a ROS
    parameter reads as a number or boolean: ``reads_as_non_string``), or, for None or '', a random
    64-bit hex string drawn once here for every node of the run (like seed 0), drawn again in the rare
    case it reads as a number (all digits, or digits around one ``e``: about 1 in 700 draws, which every
    node refused as "must be a string")."""
    if run_id is None or run_id == "":
        drawn = secrets.token_hex(8)
        while reads_as_non_string(drawn):
            drawn = secrets.token_hex(8)
        return drawn
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise PlanError(f"run_id={run_id!r} must be 1-64 characters of A-Z, a-z, 0-9, '_', '.', '-' "
                        "(or empty: a random one)")
    if reads_as_non_string(run_id):
        raise PlanError(f"run_id={run_id!r} would reach the nodes as a number or boolean, not as text: "
                        "give one with a letter that is not a lone 'e' (or empty: a random one)")
    return run_id


def resolve_scenario(scenario: str, variant: str | None = None, num_vehicles: int = 0,
                     seed: int = -1, run_id: str | None = None, mavlink: bool = False) -> ResolvedScenario:
    """Load and validate the scenario once; resolve the seed with the core's convention
    (``qrsim_ros.core.config.scenario.resolve_seed``: -1 the file's, 0 from the clock, drawn once here
    so that every node builds the same streams, 1..MAX_SEED as given) and the run identity
    (``resolve_run_id``: None draws one). ``mavlink``: set the scenario's ``mavlink.on`` (False: the
    file's)."""
    from qrsim_ros.core.config.loader import ScenarioError
    from qrsim_ros.core.config.scenario import (
        MAX_SEED,
        check_seed,
        load_scenario,
        resolve_seed,
        run_overrides,
    )
    from qrsim_ros.core.engine.memory import check_memory

    config = config_name(scenario, variant)
    run_id = resolve_run_id(run_id)
    _check_limit("num_vehicles", num_vehicles)
    try:
        check_seed(seed)
    except ConfigError as exc:
        raise PlanError(str(exc)) from None
    try:
        loaded = load_scenario(config, run_overrides(num_vehicles=num_vehicles, mavlink=mavlink))
    except (ScenarioError, ConfigError) as exc:
        raise PlanError(f"scenario {config!r}: {exc}") from None
    if loaded.num_vehicles > MAX_GRAPH_VEHICLES:  # a file's count: the nodes' num_vehicles range
        raise PlanError(f"scenario {config!r}: num_vehicles={loaded.num_vehicles} (from the scenario file) "
                        f"exceeds the node graph's maximum {MAX_GRAPH_VEHICLES} "
                        "(qrsim run / batch take up to "
                        f"{LIMITS['scenario_num_vehicles'].hi:g} in process)")
    try:  # the graph's nodes hold together about what one process would
        check_memory(loaded)
    except ConfigError as exc:
        raise PlanError(f"scenario {config!r}: {exc}") from None
    if config.endswith((".yaml", ".yml")) or os.sep in config:
        config = os.path.abspath(config)  # nodes may start elsewhere
    effective = resolve_seed(seed, loaded.seed)
    if effective > MAX_SEED:
        raise PlanError(f"seed={effective} (from the scenario file) exceeds the nodes' maximum {MAX_SEED}")
    return ResolvedScenario(
        config=config, task_type=loaded.task.type, seed=int(effective), num_vehicles=loaded.num_vehicles,
        control_modes=tuple(loaded.control_modes()),
        duration_s=loaded.task.duration_steps * loaded.task.dt_s,
        sensors=tuple(loaded.vehicle.sensors), run_id=run_id, comms=loaded.comms.on,
        mavlink=loaded.mavlink.on,
    )


def plan(scenario: str, variant: str | None = None, num_vehicles: int = 0, seed: int = -1,
         use_rviz: bool = False, record: bool | str | os.PathLike[str] = False, autopilot: bool = True,
         lockstep: bool | None = None, real_time_factor: float | None = None, duration_s: float = 0.0,
         node_parameters: Mapping[str, Mapping[str, Any]] | None = None,
         resolved: ResolvedScenario | None = None, mavlink: bool = False, foxglove: int | None = None,
         foxglove_address: str = "127.0.0.1") -> list[NodeSpec]:
    """The nodes of one scenario run, in start order.

    scenario/variant: a family and its variant, or a config name / YAML path (no variant).
    num_vehicles: 0 = the file's. seed: -1 = the file's, 0 = from the clock (drawn once here, so
    every node gets the same concrete seed). use_rviz: add rviz2. record: False, True (bag in
    ``default_bag_dir``) or the bag directory. autopilot: add the example autopilot (it flies the task's
    baseline). lockstep / real_time_factor: ``vehicle_dynamics`` parameters (None = its default).
    duration_s: simulated seconds the run should last (0 = until stopped): ``vehicle_dynamics``'s
    ``duration_s`` (it stops the clock there and exits with status 0). node_parameters: extra
    parameters per node name, applied last (e.g. ``{"vehicle_dynamics": {"lockstep_timeout_s": 5.0}}``).
    resolved: a ``resolve_scenario`` result to reuse (it must match scenario/variant/num_vehicles/seed/
    mavlink); its ``run_id`` (else a random one, ``resolve_run_id``) goes to every simulator node.
    mavlink: every agent vehicle a PX4 vehicle on MAVLink (the scenario's ``mavlink.on``; False: the
    file's): ``mavlink_bridge`` flies them in place of the flight controller, and no example autopilot.
    foxglove: the TCP port of a ``foxglove_bridge`` serving the graph on a Foxglove WebSocket (0: any
    free one; None: no bridge), bound to ``foxglove_address``.

    Raises PlanError naming the bad argument.
    """
    for name, value in (("use_rviz", use_rviz), ("autopilot", autopilot), ("mavlink", mavlink)):
        if not isinstance(value, bool):
            raise PlanError(f"{name}={value!r} must be true or false")
    if lockstep is not None and not isinstance(lockstep, bool):
        raise PlanError(f"lockstep={lockstep!r} must be true, false or unset")
    if real_time_factor is not None:
        _check_limit("real_time_factor", real_time_factor)
    _check_limit("duration_s", duration_s)
    if not isinstance(record, (bool, str, os.PathLike)) or (isinstance(record, str) and not record.strip()):
        raise PlanError(f"record={record!r} must be true, false or an output directory")
    if foxglove is not None:
        _check_limit("foxglove_port", foxglove)

    res = resolved or resolve_scenario(scenario, variant, num_vehicles, seed, mavlink=mavlink)
    if mavlink and not res.mavlink:
        raise PlanError("mavlink=true but the resolved scenario has mavlink.on false")
    common: dict[str, Any] = {
        "scenario": res.config, "seed": res.seed, "num_vehicles": res.num_vehicles, "use_sim_time": True,
        # one identity per run: the nodes ignore (and count) the messages of another run's nodes
        "run_id": res.run_id,
    }
    if mavlink:  # every node loads the scenario with mavlink.on (the file's own needs nothing)
        common["mavlink"] = True

    dynamics = dict(common)
    # The clock owner runs on wall time: it is the one that publishes /clock.
    dynamics["use_sim_time"] = False
    if lockstep is not None:
        dynamics["lockstep"] = lockstep
    if real_time_factor is not None:
        dynamics["real_time_factor"] = float(real_time_factor)
    if duration_s > 0:
        # The clock owner stops itself (exit status 0) after exactly this much simulated time.
        dynamics["duration_s"] = float(duration_s)

    specs = [NodeSpec("vehicle_dynamics", "vehicle_dynamics", parameters=dynamics)]
    specs += [NodeSpec(exe, exe, parameters=dict(common)) for exe in CORE_NODES[1:]]
    if res.task_type == "search_rescue":
        specs.append(NodeSpec("camera_detector", "camera_detector", parameters=dict(common)))
    if res.task_type == "plume":
        specs.append(NodeSpec("plume_field", "plume_field", parameters=dict(common)))
    specs += [NodeSpec(name, name, parameters=dict(common)) for name in res.sensors]  # registered sensors
    if res.comms:
        specs.append(NodeSpec("comms", "comms", parameters=dict(common)))
    specs.append(NodeSpec("referee", "referee", parameters=dict(common)))
    if res.mavlink:  # the flight controller with the onboard autopilots; MAVLink clients fly them
        specs.append(NodeSpec("mavlink_bridge", "mavlink_bridge", parameters=dict(common)))
        autopilot = False
    elif any(mode in CONTROLLED_MODES for mode in res.control_modes):
        specs.append(NodeSpec("flight_controller", "flight_controller", parameters=dict(common)))
    if autopilot and res.task_type in AUTOPILOT_TASKS:
        specs.append(NodeSpec("example_autopilot", "example_autopilot", parameters=dict(common)))
    if autopilot and res.task_type in MISSION_AUTOPILOTS:
        exe = MISSION_AUTOPILOTS[res.task_type]
        specs.append(NodeSpec(exe, exe, parameters=dict(common)))
    # Start gate: tick 0 waits until every planned consumer of ground truth is matched (discovery).
    dynamics["start_subscribers"] = sum(spec.executable in GROUND_TRUTH_CONSUMERS for spec in specs)
    # Lockstep window: the clock waits for each node that steps on the ground truth (all but the flight
    # controller, a lockstep input already) to report its progress (/sim/tick_progress); and for
    # example_autopilot, which reports the task steps it answered.
    dynamics["lockstep_consumers"] = sum(spec.executable in TICK_CLOCKED | STEP_PACED for spec in specs)
    missions = sum(spec.executable in MISSION_AUTOPILOTS.values() for spec in specs)
    if missions:
        dynamics["lockstep_consumers"] += missions
        dynamics["lockstep_window_ticks"] = MISSION_WINDOW_TICKS
    autopilots = {spec.executable for spec in specs} & {"example_autopilot", *MISSION_AUTOPILOTS.values()}
    if lockstep and autopilots:  # the autopilot as a lockstep input: as in process (docs/LAUNCH.md)
        keys = MISSION_LOCKSTEP_PARAMETERS if missions else AUTOPILOT_LOCKSTEP_PARAMETERS
        for spec in specs:
            key = keys.get(spec.executable)
            if key is not None:
                spec.parameters[key] = True
        if "example_autopilot" in autopilots:  # it reads /sim/vehicle_status then: tick 0 waits for it too
            dynamics["start_subscribers"] += 1
    for spec in specs:
        if spec.executable in TICK_CLOCKED:
            spec.parameters["use_sim_time"] = False
    if record is not False:
        bag = default_bag_dir(res.config) if record is True else os.path.abspath(os.fspath(record))
        specs.append(NodeSpec("recorder", "recorder", parameters={**common, "output_dir": bag}))
        # The recorder subscribes to every topic, the ground truth the start gate counts included:
        # counted, tick 0 waits for it too (the bag starts with the first tick, and its subscription
        # cannot stand in for a consumer that has not matched yet).
        dynamics["start_subscribers"] += 1
        if lockstep:  # a lockstep run's bag holds every tick: the clock waits for the recorder as well
            specs[-1].parameters["report_progress"] = True
            dynamics["lockstep_consumers"] += 1
    if foxglove is not None:  # not a ground-truth consumer: the clock never waits for it or its clients
        specs.append(NodeSpec("foxglove_bridge", "foxglove_bridge", parameters={
            "use_sim_time": True, "port": foxglove, "address": foxglove_address}))
    if use_rviz:
        cfg = rviz_config(res.task_type, Path(res.config).stem)
        specs.append(NodeSpec("rviz2", "rviz2", package="rviz2", parameters={"use_sim_time": True},
                              arguments=("-d", cfg) if cfg else ()))
    specs = _apply_node_parameters(specs, node_parameters)
    window = next(s.parameters.get("lockstep_window_ticks", LOCKSTEP_WINDOW_TICKS) for s in specs
                  if s.executable == "vehicle_dynamics")
    for spec in specs:  # the autopilot paces its reports by vehicle_dynamics' window (its docstring)
        if spec.executable in STEP_PACED:
            spec.parameters.setdefault("lockstep_window_ticks", window)
    battery_ticks = next((s.parameters.get("battery_every_n_ticks") for s in specs
                          if s.executable == "vehicle_dynamics"), None)
    for spec in specs:  # an autopilot awaits the battery messages on vehicle_dynamics' ticks
        if spec.executable in autopilots and battery_ticks is not None:
            spec.parameters.setdefault("battery_every_n_ticks", battery_ticks)
    return specs


def _apply_node_parameters(specs: list[NodeSpec],
                           extra: Mapping[str, Mapping[str, Any]] | None) -> list[NodeSpec]:
    if not extra:
        return specs
    names = [s.name for s in specs]
    unknown = [n for n in extra if n not in names]
    if unknown:
        raise PlanError(f"node parameters for {', '.join(map(repr, unknown))}: not in this plan "
                        f"(nodes: {', '.join(names)})")
    for node, values in extra.items():  # the nodes declare these ranges from the same table
        for key, value in values.items():
            if key in LIMITS:
                _check_limit(key, value, f"{node}:{key}")
    return [NodeSpec(s.executable, s.name, s.namespace, {**s.parameters, **extra.get(s.name, {})},
                     s.remappings, s.arguments, s.package) for s in specs]


def bag_dir(specs: Iterable[NodeSpec]) -> str | None:
    """The bag directory of a plan's recorder, if it records."""
    for s in specs:
        if s.executable == "recorder":
            return str(s.parameters.get("output_dir"))
    return None


def _check_limit(name: str, value: Any, label: str | None = None) -> None:
    """PlanError (one line) unless ``value`` is inside the limits table's row ``name``."""
    try:
        LIMITS[name].check(value, label)
    except ConfigError as exc:
        raise PlanError(str(exc)) from None
