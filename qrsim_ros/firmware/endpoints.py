"""The firmware interfaces' listening sockets: one per vehicle, opened together or not at all."""

from __future__ import annotations

import socket


def bound_sockets(kind: int, addresses: list[tuple[str, int]], what: str) -> list[socket.socket]:
    """One non-blocking socket of ``kind`` (``socket.SOCK_DGRAM`` or ``SOCK_STREAM``, then listening) bound
    to each of ``addresses``; else OSError naming ``what`` and the address, with none left open."""
    socks: list[socket.socket] = []
    address = addresses[0] if addresses else ("", 0)
    try:
        for address in addresses:
            s = socket.socket(socket.AF_INET, kind)
            socks.append(s)
            if kind == socket.SOCK_STREAM:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(address)
            if kind == socket.SOCK_STREAM:
                s.listen(1)
            s.setblocking(False)
    except OSError as exc:
        for s in socks:
            s.close()
        raise OSError(exc.errno, f"{what}: cannot bind {address[0]}:{address[1]}: {exc.strerror}") from None
    return socks
