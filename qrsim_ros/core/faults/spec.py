"""One fault of the scenario's ``faults:`` list: what breaks, on which vehicles, when and for how long.

An item is a mapping (as YAML gives it) with the keys

    kind: rotor_degradation        # one of kinds.KINDS
    vehicles: [0, 2]               # vehicle indices, one index, or "all" (default "all")
    trigger: {at_time_s: 12.0}     # triggers.parse_trigger
    duration_s: 5.0                # seconds; omitted or null: permanent
    repeat: false                  # fire again after it ended (condition / periodic probabilistic only)
    id: left_rotor                 # optional name; default "<kind>.<index in the list>"
    rotor: 1                       # ... and the kind's own parameters (kinds.py), flat in the item
    factor: 0.5

Every error is one ConfigError naming the key path, e.g. ``faults[3].rotor``. The ``id`` names the fault
in ``/sim/faults`` and ``clear``, and names its random stream (``fault.<id>``): a fault with an explicit
id keeps its draws whatever else the list holds; a default id keeps them as long as the faults before it
stay (appending a fault changes no other fault's draws).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from qrsim_ros.core.common.validation import (
    SHORT_VALUE_CHARS,
    ConfigError,
    finite,
    flag,
    set_frozen_field,
    shorten,
)
from qrsim_ros.core.faults.kinds import DEFAULT_NUM_ROTORS, KINDS, Context, integer
from qrsim_ros.core.faults.triggers import Trigger, check_repeat, parse_trigger, trigger_dict

#: The keys every fault has (the rest of an item are its kind's parameters).
COMMON_KEYS = ("kind", "vehicles", "trigger", "duration_s", "repeat", "id")
_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")

Vehicles = Literal["all"] | tuple[int, ...]


@dataclass(frozen=True)
class FaultSpec:
    """A validated fault (see the module docstring). ``params``: the kind's parameters with defaults
    filled in (read-only mapping); ``vehicles``: "all" or a tuple of distinct indices >= 0 (checked
    against the fleet size by ``from_dict(num_vehicles=)`` and by the schedule); ``duration_s`` [s] or
    None (permanent)."""

    id: str
    kind: str
    params: Mapping[str, Any]
    vehicles: Vehicles
    trigger: Trigger
    duration_s: float | None = None
    repeat: bool = False

    def __post_init__(self) -> None:
        _check_id("fault.id", self.id)
        if self.kind not in KINDS:
            raise ConfigError(f"fault.kind={shorten(self.kind)} is unknown (one of {', '.join(KINDS)})")
        set_frozen_field(self, "params", KINDS[self.kind].check_params("fault", dict(self.params),
                                                                             Context(num_rotors=None)))
        set_frozen_field(self, "vehicles", _vehicles("fault.vehicles", self.vehicles, None))
        set_frozen_field(self, "duration_s", _duration("fault.duration_s", self.duration_s))
        set_frozen_field(self, "repeat", flag("fault.repeat", self.repeat))
        check_repeat("fault", self.trigger, self.repeat)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled with its parameters as a plain dict (the read-only mapping is not picklable), so a
        scenario with faults ships to batch workers."""
        return (FaultSpec, (self.id, self.kind, dict(self.params), self.vehicles, self.trigger,
                            self.duration_s, self.repeat))

    @classmethod
    def from_dict(cls, item: object, where: str = "fault", *, num_vehicles: int | None = None,
                  num_rotors: int = DEFAULT_NUM_ROTORS, default_id: str | None = None,
                  default_trigger: Trigger | None = None) -> FaultSpec:
        """Parse one ``faults:`` item; errors name ``<where>.<key>`` (``where`` e.g. "faults[3]").

        ``num_vehicles``: check the vehicle indices against the fleet (None: only >= 0); ``num_rotors``:
        the rotor indices' range; ``default_id``: the id when the item has none (default
        "<kind>.<where>"); ``default_trigger``: the trigger when the item has none (None: it is required;
        the run-time injection passes "now")."""
        if not isinstance(item, Mapping):
            raise ConfigError(f"{where}={shorten(item)} must be a mapping with kind, vehicles, trigger, ...")
        if "kind" not in item:
            raise ConfigError(f"{where}.kind: missing (one of {', '.join(KINDS)})")
        kind_name = item["kind"]
        if not isinstance(kind_name, str) or kind_name not in KINDS:
            raise ConfigError(f"{where}.kind={shorten(kind_name)} is unknown (one of {', '.join(KINDS)})")
        kind = KINDS[kind_name]
        for key in item:
            if key not in COMMON_KEYS and key not in kind.params:
                allowed = ", ".join((*COMMON_KEYS, *kind.params))
                name = key if isinstance(key, str) and len(key) <= SHORT_VALUE_CHARS else shorten(key)
                raise ConfigError(f"{where}.{name}: unknown key for {kind_name} (allowed: {allowed})")
        params = kind.check_params(where, {k: v for k, v in item.items() if k in kind.params},
                                   Context(num_rotors=int(num_rotors)))
        fault_id = item.get("id", default_id if default_id is not None else f"{kind_name}.{where}")
        _check_id(f"{where}.id", fault_id)
        vehicles = _vehicles(f"{where}.vehicles", item.get("vehicles", "all"), num_vehicles)
        if "trigger" in item:
            trigger = parse_trigger(f"{where}.trigger", item["trigger"])
        elif default_trigger is not None:
            trigger = default_trigger
        else:
            raise ConfigError(f"{where}.trigger: missing (one of at_time_s, at_step, probabilistic, "
                              "condition)")
        duration = _duration(f"{where}.duration_s", item.get("duration_s"))
        repeat = flag(f"{where}.repeat", item.get("repeat", False))
        check_repeat(where, trigger, repeat)
        return cls(fault_id, kind_name, params, vehicles, trigger, duration, repeat)

    def vehicle_indices(self, num_vehicles: int, where: str = "fault") -> tuple[int, ...]:
        """The vehicles the fault applies to in a fleet of ``num_vehicles``; ConfigError naming
        ``<where>.vehicles[j]`` for an index out of range."""
        return _resolve(f"{where}.vehicles", self.vehicles, num_vehicles)

    def as_dict(self) -> dict[str, Any]:
        """The scenario mapping of this fault (``from_dict`` of it gives an equal spec)."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind,
                               "vehicles": self.vehicles if self.vehicles == "all" else list(self.vehicles),
                               "trigger": trigger_dict(self.trigger), "duration_s": self.duration_s,
                               "repeat": self.repeat}
        out.update({k: list(v) if isinstance(v, tuple) else v for k, v in self.params.items()})
        return out


def parse_faults(items: object, *, num_vehicles: int | None = None, num_rotors: int = DEFAULT_NUM_ROTORS,
                 where: str = "faults") -> tuple[FaultSpec, ...]:
    """The scenario's ``faults:`` list (None or [] for none); errors name ``faults[i].<key>``; ids must
    be unique."""
    if items is None:
        return ()
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise ConfigError(f"{where}={shorten(items)} must be a list of faults")
    specs: list[FaultSpec] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        spec = FaultSpec.from_dict(item, f"{where}[{i}]", num_vehicles=num_vehicles, num_rotors=num_rotors,
                                   default_id=f"{item.get('kind') if isinstance(item, Mapping) else ''}.{i}")
        if spec.id in seen:
            raise ConfigError(f"{where}[{i}].id={spec.id!r} is already the id of {where}[{seen[spec.id]}]")
        seen[spec.id] = i
        specs.append(spec)
    return tuple(specs)


def _check_id(name: str, value: object) -> None:
    if not isinstance(value, str) or not _ID.match(value):
        raise ConfigError(f"{name}={shorten(value)} must be 1-64 characters of letters, digits, "
                          "'_', '.', '-'")


def _duration(name: str, value: object) -> float | None:
    if value is None:
        return None
    d = finite(name, value)
    if d <= 0:
        raise ConfigError(f"{name}={shorten(value)} must be > 0 (or omitted / null: permanent)")
    return d


def _vehicles(name: str, value: object, num_vehicles: int | None) -> Vehicles:
    if value == "all":
        return "all"
    if isinstance(value, (str, bytes, Mapping)):
        raise ConfigError(f"{name}={shorten(value)} must be \"all\", a vehicle index or a list of them")
    rows = list(value) if isinstance(value, Sequence) else [value]
    if not rows:
        raise ConfigError(f"{name}=[] must list at least one vehicle (or be \"all\")")
    hi = None if num_vehicles is None else int(num_vehicles) - 1
    out = tuple(integer(f"{name}[{j}]", v, 0, hi) for j, v in enumerate(rows))
    if len(set(out)) != len(out):
        raise ConfigError(f"{name}={list(out)} lists a vehicle twice")
    return out


def _resolve(name: str, vehicles: Vehicles, num_vehicles: int) -> tuple[int, ...]:
    if vehicles == "all":
        return tuple(range(int(num_vehicles)))
    return _vehicles(name, vehicles, num_vehicles)  # type: ignore[return-value]
