"""The team's progress messages on the radio: a compact JSON payload per broadcast (siegemund_2011 section
5.1: position and status sent over the WLAN), and what a vehicle makes of the positions it heard."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from qrsim_ros.policies.base import Array
from qrsim_ros.policies.team_search.params import MAX_EXTRAPOLATION_S, STALE_POSITION_S

#: Message format version (``"m"`` in the payload).
MESSAGE_VERSION = 1


class VehicleState(StrEnum):
    """What a vehicle of the team does, as its messages say (the value is the wire's ``"s"``)."""

    SEARCHING = "S"
    RENDEZVOUS = "R"  # its lanes flown, waiting at the band boundary for lanes to take over
    FOLLOWING = "F"  # a follower of the leader-follower formation
    RETURNING = "H"  # flying home (energy, recall or the onboard failsafe)
    LANDING = "L"  # landing where it is (battery nearly empty)
    DONE = "D"  # nothing left: home


#: States of a vehicle that no longer searches (its lanes are released).
GONE_STATES = frozenset({VehicleState.RETURNING, VehicleState.LANDING, VehicleState.DONE})


@dataclass
class ProgressMessage:
    """One progress message (see ``encode_progress``). sender: the vehicle index; time_s: when sent;
    position_ne_m / velocity_ne_mps / height_m (above ground); state: a ``VehicleState``; lanes_done /
    gone / claimed: lane indices, vehicle indices, lane indices; found_ne_m: persons confirmed (K, 2);
    heard_age_s: per vehicle, whole seconds since the sender last heard of it (directly or by gossip; -1
    never, capped at 9999); target_ne_m: the candidate person the sender is on its way down to or
    hovering over (None: none), holding: whether it hovers there (module docstring, "claims")."""

    sender: int
    time_s: float
    position_ne_m: tuple[float, float]
    velocity_ne_mps: tuple[float, float]
    height_m: float
    state: VehicleState
    lanes_done: frozenset[int]
    gone: frozenset[int]
    claimed: frozenset[int]
    found_ne_m: tuple[tuple[float, float], ...]
    heard_age_s: tuple[int, ...] = ()
    target_ne_m: tuple[float, float] | None = None
    holding: bool = False


def _mask(items: frozenset[int] | set[int]) -> str:
    v = 0
    for i in items:
        v |= 1 << int(i)
    return format(v, "x")


def _unmask(text: str, limit: int) -> frozenset[int]:
    if not isinstance(text, str) or len(text) > (limit + 3) // 4 + 1:
        raise ValueError("bad bit mask")
    v = int(text, 16)
    if v < 0 or v.bit_length() > limit:
        raise ValueError("bit mask out of range")
    return frozenset(i for i in range(v.bit_length()) if v >> i & 1)


def encode_progress(p: ProgressMessage) -> bytes:
    """The compact JSON payload: ``{"m":1,"i":sender,"t":time_s,"p":[n,e],"v":[vn,ve],"h":height,"s":state,
    "d":hex mask of lanes done,"g":hex mask of vehicles gone,"c":hex mask of lanes claimed,
    "f":[[n,e],...],"a":[ages],"k":[] or [n,e,holding 0/1]}`` (positions rounded to 0.1 m, speeds to
    0.01 m/s, time to 1 ms)."""
    msg = {"m": MESSAGE_VERSION, "i": int(p.sender), "t": round(float(p.time_s), 3),
           "p": [round(float(c), 1) for c in p.position_ne_m],
           "v": [round(float(c), 2) for c in p.velocity_ne_mps], "h": round(float(p.height_m), 1),
           "s": VehicleState(p.state).value,
           "d": _mask(p.lanes_done), "g": _mask(p.gone), "c": _mask(p.claimed),
           "f": [[round(float(a), 1), round(float(b), 1)] for a, b in p.found_ne_m],
           "a": [int(a) for a in p.heard_age_s],
           "k": [] if p.target_ne_m is None else
                [round(float(p.target_ne_m[0]), 1), round(float(p.target_ne_m[1]), 1), int(p.holding)]}
    return json.dumps(msg, separators=(",", ":")).encode()


def decode_progress(payload: bytes, num_vehicles: int, num_lanes: int) -> ProgressMessage:
    """``encode_progress``'s inverse; ValueError for anything malformed (not JSON, wrong version, a field
    missing, of the wrong type, out of range or not finite)."""
    try:
        msg = json.loads(bytes(payload).decode())
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"not a JSON progress message: {exc}") from None
    if not isinstance(msg, dict) or msg.get("m") != MESSAGE_VERSION:
        raise ValueError("not a progress message of version 1")
    try:
        sender = msg["i"]
        if isinstance(sender, bool) or not isinstance(sender, int) or not 0 <= sender < num_vehicles:
            raise ValueError(f"sender {sender!r} out of range")
        t, h = float(msg["t"]), float(msg["h"])
        pos = tuple(float(c) for c in msg["p"])
        vel = tuple(float(c) for c in msg["v"])
        found = tuple((float(a), float(b)) for a, b in msg["f"])
        ages = tuple(msg["a"])
        if len(ages) != num_vehicles or not all(
                isinstance(a, int) and not isinstance(a, bool) and -1 <= a <= 9999 for a in ages):
            raise ValueError("bad heard ages")
        if len(pos) != 2 or len(vel) != 2 or not isinstance(msg["s"], str):
            raise ValueError("bad position, velocity or state")
        state = VehicleState(msg["s"])  # ValueError for an unknown one
        claim = msg["k"]
        if not isinstance(claim, list) or len(claim) not in (0, 3) or (claim and claim[2] not in (0, 1)) or \
                any(isinstance(c, bool) for c in claim):
            raise ValueError("bad claim")
        target = (float(claim[0]), float(claim[1])) if claim else None
        values = (t, h, *pos, *vel, *(c for f in found for c in f), *(target or ()))
        if not all(math.isfinite(c) for c in values):
            raise ValueError("a value is not finite")
        return ProgressMessage(sender, t, pos, vel, h, state, _unmask(msg["d"], num_lanes),  # type: ignore[arg-type]
                        _unmask(msg["g"], num_vehicles), _unmask(msg["c"], num_lanes), found, ages,
                        target, bool(claim and claim[2]))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed progress message: {type(exc).__name__} {exc}") from None


def recent(heard: dict[int, ProgressMessage], now_s: float) -> list[tuple[int, ProgressMessage]]:
    """The vehicles heard within ``STALE_POSITION_S`` and their last messages (``heard``: vehicle -> its last
    message)."""
    return [(v, m) for v, m in heard.items() if now_s - m.time_s <= STALE_POSITION_S]


def extrapolated_ne(m: ProgressMessage, now_s: float) -> Array:
    """Where the sender of progress message ``m`` is at ``now_s`` (NE, m): its broadcast position moved
    along its broadcast velocity for the message's age (at most ``MAX_EXTRAPOLATION_S``)."""
    age = min(MAX_EXTRAPOLATION_S, max(0.0, now_s - m.time_s))
    return np.asarray(m.position_ne_m) + age * np.asarray(m.velocity_ne_mps)
