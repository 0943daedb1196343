"""Node parameters as tables: one typed, described, range-checked struct per node, declared in one call.

The shape of generate_parameter_library, in plain Python: a node lists its parameters once, as a
``ParamTable`` of ``Param`` rows (name, default, description, range or choices, read_only); the type of
a parameter is the type of its default (bool, int, float or str)::

    PARAMETERS = ParamTable("referee", *SCENARIO_PARAMETERS,
                            Param("reset_timeout_s", 10.0, "how long ... [s]", lo=0.1, hi=600.0), ...)

    p = declare_parameters(node, PARAMETERS)   # every parameter, with its ParameterDescriptor
    p.reset_timeout_s                          # a float, validated; ``p`` is frozen

``ParamTable.validate(values)`` applies the same rules without rclpy (a front end that is no ROS node,
the tests): a float parameter takes an integer (converted), a value of another type is rejected, a
number outside ``[lo, hi]`` or a string not among ``choices`` is rejected. Every rejection is one
``ParameterError`` line naming the parameter, its value and what is allowed.

``declare_parameters(node, table)`` declares every row on the node with a ``ParameterDescriptor``
(description, integer or floating-point range, ``additional_constraints`` for choices, read_only;
dynamic typing for floats so that ``-p duration_s:=20`` is 20.0) and returns the validated struct. A
value rclpy rejects (wrong type, out of range) is reported with the table's message, not rclpy's.

``SCENARIO_PARAMETERS`` (scenario, seed, num_vehicles, mavlink, run_id) is the table every simulation
node starts with; ``scenario_from_parameters`` loads the scenario they name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import (
    SEED_FROM_FILE,
    SEED_HELP,
    Scenario,
    load_scenario,
    run_overrides,
)

if TYPE_CHECKING:
    from rcl_interfaces.msg import ParameterDescriptor
    from rclpy.node import Node

#: What each parameter type accepts, in the words of the error messages.
_KINDS: dict[type, str] = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


class ParameterError(ValueError):
    """A node parameter is invalid; the message names it, its value and what is allowed."""


@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter: its name, default (whose type is the parameter's type), description, the closed
    range ``[lo, hi]`` of a number, the ``choices`` of a string and whether it is read-only."""

    name: str
    default: bool | int | float | str
    description: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    read_only: bool = True

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise TypeError(f"parameter name {self.name!r} is not an identifier")
        if type(self.default) not in _KINDS:
            raise TypeError(f"parameter {self.name!r}: default {self.default!r} is not a bool, int, float "
                            "or str")
        if not self.description:
            raise TypeError(f"parameter {self.name!r} has no description")
        if (self.lo is None) != (self.hi is None):
            raise TypeError(f"parameter {self.name!r}: give both lo and hi, or neither")
        if self.lo is not None and self.type not in (int, float):
            raise TypeError(f"parameter {self.name!r}: a range needs a number parameter")
        if self.choices and self.type is not str:
            raise TypeError(f"parameter {self.name!r}: choices need a string parameter")
        object.__setattr__(self, "choices", tuple(self.choices))
        self.check(self.default)  # the table is wrong, not the user: fails at import

    @property
    def type(self) -> type:
        """bool, int, float or str: the type of the default, and of every value."""
        return type(self.default)

    def check(self, value: Any) -> bool | int | float | str:
        """The value, validated (an integer for a float parameter converted); raises ParameterError."""
        kind = self.type
        if kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ParameterError(f"parameter {self.name!r}={value!r} must be a number")
            value = float(value)
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ParameterError(f"parameter {self.name!r}={value!r} must be an integer")
        elif not isinstance(value, kind):
            raise ParameterError(f"parameter {self.name!r}={value!r} must be {_KINDS[kind]}")
        if self.lo is not None and self.hi is not None and not self.lo <= value <= self.hi:
            raise ParameterError(f"parameter {self.name!r}={value!r} outside [{self.lo}, {self.hi}]")
        if self.choices and value not in self.choices:
            raise ParameterError(f"parameter {self.name!r}={value!r} must be one of "
                                 f"{', '.join(self.choices)}")
        return value

    def allowed(self) -> str:
        """What the parameter takes, in words (for documentation): type and range or choices."""
        if self.choices:
            return "one of: " + ", ".join(self.choices)
        text = {bool: "bool", int: "int", float: "float", str: "string"}[self.type]
        return text if self.lo is None else f"{text} in [{self.lo}, {self.hi}]"


class ParamTable:
    """The parameters of one node, in declaration order, and the frozen struct of their values.

    ``ParamTable(name, *params)``; a table is iterable, so ``ParamTable("x", *OTHER, Param(...))``
    extends another one. ``struct`` is a frozen dataclass with one typed field per parameter.
    """

    def __init__(self, name: str, *params: Param) -> None:
        names = [p.name for p in params]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise TypeError(f"parameter table {name!r}: repeated {', '.join(repeated)}")
        self.name = name
        self.params: tuple[Param, ...] = params
        self._by_name = {p.name: p for p in params}
        class_name = "".join(w.capitalize() for w in name.split("_")) + "Parameters"
        self.struct: type = dataclasses.make_dataclass(
            class_name, [(p.name, p.type) for p in params], frozen=True)
        self.struct.__doc__ = f"The parameters of {name} (qrsim_ros.ros.parameters.ParamTable)."

    def __iter__(self) -> Iterator[Param]:
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)

    def __getitem__(self, name: str) -> Param:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __repr__(self) -> str:
        return f"ParamTable({self.name!r}, {', '.join(self.names)})"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def defaults(self) -> Any:
        """The struct of the default values."""
        return self.struct(**{p.name: p.default for p in self.params})

    def validate(self, values: Mapping[str, Any], *, ignore_unknown: bool = False) -> Any:
        """The struct of ``values`` (missing names: their defaults), every value checked by its row.

        Raises ParameterError on the first bad value, in table order, or on a name the table does not
        have (unless ``ignore_unknown``).
        """
        if not ignore_unknown:
            unknown = sorted(set(values) - set(self._by_name))
            if unknown:
                raise ParameterError(f"unknown parameter(s) of {self.name}: {', '.join(unknown)} "
                                     f"(known: {', '.join(self.names)})")
        return self.struct(**{p.name: p.check(values.get(p.name, p.default)) for p in self.params})


def limit_range(name: str) -> dict[str, float]:
    """``{"lo": ..., "hi": ...}`` of the limits table's row ``name`` (``core.common.limits.LIMITS``), for
    ``Param(..., **limit_range(name))``: the range the launchers check, so a value they accept is one
    the node accepts."""
    limit = LIMITS[name]
    return {"lo": limit.lo, "hi": limit.hi}


def limited(name: str, default: bool | int | float | str, description: str, **kwargs: Any) -> Param:
    """``Param(name, default, description)`` with the limits table's range of ``name``."""
    return Param(name, default, description, **limit_range(name), **kwargs)


def descriptor(param: Param) -> ParameterDescriptor:
    """The ROS ParameterDescriptor of a row: description, range or choices, read_only, and dynamic
    typing for a float (so that an integer value is accepted and converted)."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    desc = ParameterDescriptor(description=param.description, read_only=param.read_only)
    desc.dynamic_typing = param.type is float
    if param.lo is not None and param.hi is not None:
        if param.type is int:
            desc.integer_range = [IntegerRange(from_value=int(param.lo), to_value=int(param.hi), step=0)]
        else:
            desc.floating_point_range = [
                FloatingPointRange(from_value=float(param.lo), to_value=float(param.hi), step=0.0)]
    if param.choices:
        desc.additional_constraints = "one of: " + ", ".join(param.choices)
    return desc


def declare_parameters(node: Node, table: ParamTable) -> Any:
    """Declare every parameter of ``table`` on ``node`` (with its descriptor) and return the struct of
    their validated values (overrides from ``-p``/parameter files, else the defaults).

    Raises ParameterError, in the table's words, for the first bad value.
    """
    return table.struct(**{p.name: declare_param(node, p) for p in table})


def declare_param(node: Node, param: Param) -> Any:
    """Declare one row and return its validated value (``declare_parameters`` for one parameter)."""
    try:
        value = node.declare_parameter(param.name, param.default, descriptor(param)).value
    except Exception as exc:  # rclpy raises several types for a value its descriptor rejects
        # rclpy declared nothing: read the value as it was given, to reject it in the table's words
        from rcl_interfaces.msg import ParameterDescriptor

        given = node.declare_parameter(param.name, param.default,
                                       ParameterDescriptor(dynamic_typing=True)).value
        node.undeclare_parameter(param.name)  # (a read-only one could not be)
        param.check(given)
        raise ParameterError(f"parameter {param.name!r}: {exc}") from None
    return param.check(value)


# --- the scenario ------------------------------------------------------------------------------------

#: A run's identity (``ros.run_identity``): the launchers give every node of a run the same one.
RUN_ID = Param("run_id", "",
               "the run this node belongs to (launch_plan: one random hex string per launch); messages of "
               "another run's nodes are ignored and counted ('': no run, nothing is filtered)")

#: The parameters naming the scenario of every simulation node (``scenario_from_parameters``).
SCENARIO_PARAMETERS = ParamTable(
    "scenario",
    Param("scenario", "search_rescue_2c",
          "scenario name (config/<name>.yaml) or path to a scenario YAML file"),
    limited("seed", SEED_FROM_FILE, f"random seed ({SEED_HELP})"),
    limited("num_vehicles", 0, "number of vehicles (0: the scenario file's)"),
    Param("mavlink", False, "every agent vehicle a PX4 vehicle on MAVLink: true sets the scenario's "
          "mavlink.on (false: the file's; docs/MAVLINK.md)"),
    RUN_ID,
)


def scenario_from_parameters(values: Any) -> Scenario:
    """Load the scenario named by a struct with ``scenario``, ``seed``, ``num_vehicles`` and ``mavlink`` (a
    ``SCENARIO_PARAMETERS`` struct, or any table's that starts with it).

    ``seed`` -1 / ``num_vehicles`` 0 / ``mavlink`` false keep the file's values. Raises ParameterError on a
    bad scenario.
    """
    try:
        return load_scenario(values.scenario, run_overrides(values.seed, values.num_vehicles, values.mavlink))
    except (ScenarioError, ConfigError) as exc:
        raise ParameterError(f"parameter 'scenario'={values.scenario!r}: {exc}") from None
