"""One MAVLink 2 link over UDP, as a PX4 SITL instance opens them: bound to a local port, sending to a
remote one (e.g. 14580+i -> 14540+i, the offboard/API link; 18570+i -> 14550, a ground station).

What a link sends is packed into datagrams of up to ``MAX_SEND_BYTES`` (``send`` queues, ``flush`` sends),
as PX4's mavlink module fills its UDP packets: a tick's telemetry to one peer is a datagram or two, not a
system call per message. Each datagram received is parsed on its own (a truncated one never joins the
next), by pymavlink with robust parsing: bad CRCs, bad prefixes and truncated packets are counted and
dropped, never raised. At most ``max_datagrams`` are read per poll and the rest of what waits is read
and dropped (counted), so that a flood costs bounded time and memory per tick.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass, field
from typing import Any

from pymavlink.dialects.v20 import common as mavlink

#: Datagrams handled per poll (a tick); at 50 polls per second, 10 kHz is 200 a poll.
MAX_DATAGRAMS_PER_POLL = 64
#: What is read and dropped beyond that per poll at the most (the socket's own buffer bounds the rest).
MAX_DROPPED_PER_POLL = 4096
_MAX_DATAGRAM_BYTES = 2048
#: The largest datagram sent [bytes]: within Ethernet's 1500-byte MTU with the IP and UDP headers, and
#: within what MAVSDK and pymavlink read at once.
MAX_SEND_BYTES = 1400


@dataclass
class LinkCounters:
    """What a link received and what it dropped, by reason."""

    datagrams: int = 0
    messages: int = 0
    bad_crc: int = 0
    bad_data: int = 0
    truncated: int = 0
    flood_dropped: int = 0
    send_errors: int = 0
    sent: int = 0  # messages
    datagrams_sent: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)


class MavlinkLink:
    """A UDP endpoint at ``local`` (host, port) speaking MAVLink 2 as system ``system_id``, component
    ``component_id``, to ``remote`` (host, port)."""

    def __init__(self, local: tuple[str, int], remote: tuple[str, int], system_id: int,
                 component_id: int = mavlink.MAV_COMP_ID_AUTOPILOT1,
                 max_datagrams: int = MAX_DATAGRAMS_PER_POLL) -> None:
        self.local, self.remote = local, remote
        self.max_datagrams = int(max_datagrams)
        self.counters = LinkCounters()
        self.mav = mavlink.MAVLink(None, srcSystem=int(system_id), srcComponent=int(component_id))
        self.mav.robust_parsing = True
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind(local)
        except OSError as exc:
            self.sock.close()
            where = f"{local[0]}:{local[1]}"
            raise OSError(exc.errno, f"MAVLink: cannot bind UDP {where}: {exc.strerror}") from None
        self.sock.setblocking(False)
        self._pending = bytearray()

    def poll(self) -> list[Any]:
        """The messages of the datagrams waiting now (at most ``max_datagrams``; the rest dropped)."""
        out: list[Any] = []
        for _ in range(self.max_datagrams):
            data = self._read()
            if data is None:
                return out
            out += self._parse(data)
        for _ in range(MAX_DROPPED_PER_POLL):
            if self._read() is None:
                break
            self.counters.flood_dropped += 1
        return out

    def send(self, msg: Any) -> None:
        """Pack ``msg`` (a pymavlink message) as this link's system and queue it for ``remote`` (sent by
        ``flush``, or as soon as a datagram is full)."""
        data = msg.pack(self.mav)
        if len(self._pending) + len(data) > MAX_SEND_BYTES:
            self.flush()
        self._pending += data
        self.counters.sent += 1

    def flush(self) -> None:
        """Send what is queued, one datagram."""
        if not self._pending:
            return
        data, self._pending = bytes(self._pending), bytearray()
        try:
            self.sock.sendto(data, self.remote)
            self.counters.datagrams_sent += 1
        except OSError as exc:  # nobody listening yet (ECONNREFUSED from an earlier send) or a full buffer
            if exc.errno not in (errno.ECONNREFUSED, errno.EAGAIN, errno.ENOBUFS, errno.EWOULDBLOCK):
                raise
            self.counters.send_errors += 1

    def close(self) -> None:
        self.sock.close()

    def _read(self) -> bytes | None:
        try:
            data, _addr = self.sock.recvfrom(_MAX_DATAGRAM_BYTES)
        except (BlockingIOError, InterruptedError):
            return None
        except ConnectionRefusedError:  # an ICMP answer to an earlier send: nothing to read
            return b""
        self.counters.datagrams += 1
        return data

    def _parse(self, data: bytes) -> list[Any]:
        c = self.counters
        msgs = self.mav.parse_buffer(data) or []
        if self.mav.buf_len() > 0:  # the datagram ended inside a packet
            c.truncated += 1
            self._reset_parser()
        good = []
        for m in msgs:
            if m.get_type() == "BAD_DATA":
                reason = str(getattr(m, "reason", "bad data"))
                if "CRC" in reason.upper():
                    c.bad_crc += 1
                else:
                    c.bad_data += 1
                c.by_reason[reason] = c.by_reason.get(reason, 0) + 1
                continue
            good.append(m)
        c.messages += len(good)
        return good

    def _reset_parser(self) -> None:
        self.mav.buf = bytearray()
        self.mav.buf_index = 0
        self.mav.expected_length = mavlink.HEADER_LEN_V1 + 2
        self.mav.have_prefix_error = False
