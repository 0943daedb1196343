"""DDS domains and the Fast DDS transport of a launched graph (plain Python: no rclpy).

Used by ``qrsim launch`` (``--domain-id N|auto``, ``--network``), by the launch files (through
``launch_plan``) and by the tests (``test/rosenv.py``), so all three check and choose domains the same way.

Ports (Fast DDS's default mapping, RTPS port base 7400, domain gain 250, participant gain 2): domain d's
discovery multicast port is 7400 + 250 d, and its first participant's discovery unicast port is
7410 + 250 d. Domain 232 is the last whose ports fit below 65536; from domain 101 up (ports >= 32650)
they fall in Linux's ephemeral range (32768-60999), where an unrelated outgoing socket can hold one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from qrsim_ros.core.common.limits import LIMITS

#: The valid ROS_DOMAIN_IDs (Fast DDS's default port mapping): the limits table's row.
DOMAIN_ID_MIN, DOMAIN_ID_MAX = int(LIMITS["domain_id"].lo), int(LIMITS["domain_id"].hi)
#: Domains from here up use ports in Linux's ephemeral range.
EPHEMERAL_DOMAIN_FROM = 101
#: Fast DDS's default port mapping (RTPS PB, DG, d1).
PORT_BASE, DOMAIN_GAIN, UNICAST_OFFSET = 7400, 250, 10
#: The Fast DDS profile that binds every transport to loopback (config/, installed to share/qrsim_ros/config).
LOCALHOST_PROFILE = "fastdds_localhost.xml"
#: The discovery range with the loopback profile: the middleware's own (the profile's) settings.
LOOPBACK_DISCOVERY_RANGE = "SYSTEM_DEFAULT"
#: What --network sets: discovery over the subnet.
NETWORK_DISCOVERY_RANGE = "SUBNET"
#: Fast DDS's built-in transports where our profile is not used (--network): UDP, no shared memory.
BUILTIN_TRANSPORTS = "UDPv4"
#: The help text of a domain option: the range and what 101 and up mean.
DOMAIN_RANGE_HELP = (f"{DOMAIN_ID_MIN}..{DOMAIN_ID_MAX}; {EPHEMERAL_DOMAIN_FROM} and up put Fast DDS's ports "
                     "in the Linux ephemeral range (32768-60999), where another program may hold them")


class DomainError(ValueError):
    """A bad ROS_DOMAIN_ID; the message names where it came from and what is allowed."""


def parse_domain_id(value: object, source: str) -> int:
    """``value`` (text or int) as a ROS_DOMAIN_ID in 0..232, or DomainError naming ``source``
    (e.g. ``"--domain-id"`` or ``"the environment's ROS_DOMAIN_ID"``)."""
    text = str(value).strip()
    try:
        domain = int(text)
    except ValueError:
        domain = None
    if domain is None or isinstance(value, bool) or not DOMAIN_ID_MIN <= domain <= DOMAIN_ID_MAX:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise DomainError(f"{source} {shown!r} is not a ROS_DOMAIN_ID: it must be an integer "
                          f"{DOMAIN_ID_MIN}..{DOMAIN_ID_MAX} (Fast DDS's port mapping)")
    return domain


def domain_id_from_environment(env: Mapping[str, str] | None = None) -> int:
    """The ROS_DOMAIN_ID of ``env`` (default os.environ), checked; 0 (ROS's default) when unset or empty."""
    text = (os.environ if env is None else env).get("ROS_DOMAIN_ID", "").strip()
    return parse_domain_id(text, "the environment's ROS_DOMAIN_ID") if text else 0


def discovery_port(domain_id: int) -> int:
    """UDP port of the first participant's discovery (metatraffic unicast) in ``domain_id``."""
    return PORT_BASE + DOMAIN_GAIN * domain_id + UNICAST_OFFSET


def domain_in_use(domain_id: int) -> bool:
    """Whether a DDS participant on this machine seems to use ``domain_id``: its discovery multicast
    port (every participant listening for multicast binds it, with address reuse) or its first
    participant's discovery unicast port cannot be bound. A wildcard bind without reuse collides with
    Fast DDS's sockets on 0.0.0.0 and, with the loopback profile, on 127.0.0.1."""
    for port in (PORT_BASE + DOMAIN_GAIN * domain_id, discovery_port(domain_id)):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("", port))
            except OSError:
                return True
    return False


def count_participants(domain_id: int, max_participants: int = 64) -> int:
    """How many DDS participants on this machine use ``domain_id`` now: participant i binds the
    discovery unicast port 7410 + 250 d + 2 i (i = 0, 1, ...: the first free one), so count the ports
    of the first ``max_participants`` that cannot be bound."""
    busy = 0
    for i in range(max_participants):
        port = discovery_port(domain_id) + 2 * i
        if port > 65535:
            break
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("", port))
            except OSError:
                busy += 1
    return busy


#: Domains this process handed out, each held by an abstract Unix socket until the process ends.
_RESERVED: dict[int, socket.socket] = {}


#: Domains in which this process runs a simulator graph (``claim_graph``), each held the same way.
_GRAPHS: dict[int, socket.socket] = {}


def _reserve(domain_id: int) -> bool:
    """Claim ``domain_id`` for this process among qrsim_ros processes on this machine (``_hold``).
    Between probing a domain and its graph's first participant binding the port, another suite choosing
    at the same moment would otherwise pick the same domain."""
    return _hold(_RESERVED, f"qrsim_ros.dds_domain.{domain_id}", domain_id)


def claim_graph(domain_id: int) -> bool:
    """Claim ``domain_id`` for a simulator graph this process launches: False if another process on this
    machine holds that claim (its graph runs in the domain). Unlike listening to DDS discovery, which
    under load can take longer than any wait, this answers at once for graphs on this machine. Held until
    the process ends; a process's later runs (one after another) find it theirs."""
    return domain_id in _GRAPHS or _hold(_GRAPHS, f"qrsim_ros.graph.{domain_id}", domain_id)


def _hold(held: dict[int, socket.socket], name: str, domain_id: int) -> bool:
    """Bind the abstract Unix socket ``name`` and keep it in ``held`` (Linux; gone with the process,
    nothing to clean): False if this or another process holds it."""
    if domain_id in held:
        return False
    if not sys.platform.startswith("linux"):
        return True
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.bind(f"\0{name}")
    except OSError as exc:
        s.close()
        if exc.errno == errno.EADDRINUSE:
            return False
        raise
    held[domain_id] = s
    return True


def release(domain_id: int) -> None:
    """Give back a domain ``free_domain`` handed out (processes that end release theirs anyway)."""
    s = _RESERVED.pop(domain_id, None)
    if s is not None:
        with contextlib.suppress(OSError):
            s.close()


def free_domain(start: int | None = None, exclude: Iterable[int] = ()) -> int:
    """A ROS_DOMAIN_ID that no DDS participant on this machine uses now and no other qrsim_ros process
    has claimed; claimed for this process until it ends (or ``release``).

    Domains 1..100 first (ports below the ephemeral range), then 101..232. The search starts at
    ``start`` (default: from the pid), so processes choosing at once probe different domains first.
    """
    skip = set(exclude)
    low = list(range(1, EPHEMERAL_DOMAIN_FROM))
    high = list(range(EPHEMERAL_DOMAIN_FROM, DOMAIN_ID_MAX + 1))
    offset = os.getpid() if start is None else start
    for block in (low, high):
        k = offset % len(block)
        for domain in block[k:] + block[:k]:
            if domain in skip or domain_in_use(domain):
                continue
            if _reserve(domain):
                return domain
    raise DomainError(f"no free ROS_DOMAIN_ID in 1..{DOMAIN_ID_MAX}: every one is used by a DDS participant "
                      "or claimed by another qrsim_ros process on this machine")


def localhost_profile() -> Path | None:
    """The installed (or source tree's) Fast DDS loopback profile, or None if it is missing."""
    here = Path(__file__).resolve()
    dirs = [here.parents[1] / "config"]  # source tree (also through colcon's symlinks)
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            dirs.append(Path(prefix) / "share" / "qrsim_ros" / "config")
    dirs.append(Path(sys.prefix) / "share" / "qrsim_ros" / "config")  # pip install
    for d in dirs:
        if (d / LOCALHOST_PROFILE).is_file():
            return d / LOCALHOST_PROFILE
    return None


def dds_environment(env: Mapping[str, str], domain_id: int | None = None, *,
                    network: bool = False) -> dict[str, str]:
    """``env`` with a graph's DDS settings: ROS_DOMAIN_ID (when given), and either

    - loopback only (the default): FASTDDS_DEFAULT_PROFILES_FILE the loopback profile and
      ROS_AUTOMATIC_DISCOVERY_RANGE SYSTEM_DEFAULT (the profile decides), unless the user set a profile
      of their own (then only the range defaults to LOCALHOST), or
    - with ``network``: ROS_AUTOMATIC_DISCOVERY_RANGE SUBNET and Fast DDS's built-in UDPv4 transport on
      every interface (a profile or FASTDDS_BUILTIN_TRANSPORTS the user set is kept; our profile,
      inherited, is dropped).

    Neither uses Fast DDS's shared-memory transport: a port whose listener missed its liveness check on
    a loaded machine is replaced under it, and what was sent to it is lost for good (config/
    fastdds_localhost.xml says more).
    """
    out = dict(env)
    if domain_id is not None:
        out["ROS_DOMAIN_ID"] = str(domain_id)
    if network:
        out["ROS_AUTOMATIC_DISCOVERY_RANGE"] = NETWORK_DISCOVERY_RANGE
        if Path(out.get("FASTDDS_DEFAULT_PROFILES_FILE", "")).name == LOCALHOST_PROFILE:
            del out["FASTDDS_DEFAULT_PROFILES_FILE"]  # ours (inherited): not what --network asks for
        if not out.get("FASTDDS_DEFAULT_PROFILES_FILE"):
            out.setdefault("FASTDDS_BUILTIN_TRANSPORTS", BUILTIN_TRANSPORTS)
        return out
    if out.get("FASTDDS_DEFAULT_PROFILES_FILE"):  # the user's own Fast DDS profile decides
        out.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        return out
    profile = localhost_profile()
    if profile is None:  # a broken install: at least discovery stays on this machine
        out.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        out.setdefault("FASTDDS_BUILTIN_TRANSPORTS", BUILTIN_TRANSPORTS)
        return out
    out["FASTDDS_DEFAULT_PROFILES_FILE"] = str(profile)
    # The profile limits discovery and every socket to this machine. rmw_fastrtps's LOCALHOST range
    # would add a UDP transport of its own on every interface (measured: one socket on 0.0.0.0 and one
    # on the external address per participant), so the range is left to the profile.
    out["ROS_AUTOMATIC_DISCOVERY_RANGE"] = LOOPBACK_DISCOVERY_RANGE
    return out
