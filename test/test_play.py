"""``qrsim play``: a bag served on the Foxglove WebSocket (qrsim_ros/bag/play.py, cli/play.py). The served
channels and messages against a real Foxglove client are checked in test_foxglove_graph (graph tier);
here: what the player reads from a bag written with rosbags, its pace, and its one-line refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qrsim_ros.bag.foxglove_endpoint import FoxgloveEndpoint
from qrsim_ros.bag.play import BagPlayer, PlayError


def _write_bag(path: Path, seconds: float, hz: float) -> dict[str, list[bytes]]:
    """An MCAP bag of /a (std_msgs/String) and /b (std_msgs/UInt32) at ``hz`` for ``seconds``;
    returns each topic's serialised messages in order."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    from qrsim_ros.bag.types import typestore

    ts = typestore()
    out: dict[str, list[bytes]] = {"/a": [], "/b": []}
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {"/a": writer.add_connection("/a", "std_msgs/msg/String", typestore=ts),
                 "/b": writer.add_connection("/b", "std_msgs/msg/UInt32", typestore=ts)}
        for k in range(round(seconds * hz)):
            t_ns = 5_000_000_000 + round(k * 1e9 / hz)
            for topic, msgtype, value in (("/a", "std_msgs/msg/String", f"m{k}"),
                                          ("/b", "std_msgs/msg/UInt32", k)):
                raw = bytes(ts.serialize_cdr(ts.types[msgtype](data=value), msgtype))
                writer.write(conns[topic], t_ns, raw)
                out[topic].append(raw)
    return out


class _Sink:
    """The endpoint's side the player uses, recording what it was given (no server)."""

    def __init__(self) -> None:
        self.channels: dict[str, tuple[str, str]] = {}
        self.logged: list[tuple[str, bytes, int]] = []
        self.times: list[int] = []

    def add_channel(self, topic: str, msgtype: str, definition: str) -> None:
        self.channels[topic] = (msgtype, definition)

    def log(self, topic: str, data: bytes, log_time_ns: int) -> None:
        self.logged.append((topic, data, log_time_ns))

    def time(self, t_ns: int) -> None:
        self.times.append(t_ns)


def test_the_player_serves_every_message_of_the_bag_in_order_with_its_definition(tmp_path: Path) -> None:
    written = _write_bag(tmp_path / "bag", seconds=1.0, hz=20)
    player = BagPlayer(tmp_path / "bag")
    sink = _Sink()
    try:
        stats = player.play(sink, rate=0, stop=lambda: False)  # type: ignore[arg-type]
    finally:
        player.close()
    assert sink.channels["/a"][0] == "std_msgs/msg/String" and "string data" in sink.channels["/a"][1]
    assert sink.channels["/b"][0] == "std_msgs/msg/UInt32" and "uint32 data" in sink.channels["/b"][1]
    for topic in ("/a", "/b"):
        assert [raw for t, raw, _ in sink.logged if t == topic] == written[topic]
    stamps = [t_ns for _, _, t_ns in sink.logged]
    assert stamps == sorted(stamps) and stamps[0] == 5_000_000_000 and sink.times == stamps
    assert stats.messages == 40 and stats.bag_s == pytest.approx(0.95)


def test_the_player_keeps_the_bags_pace_times_the_rate_and_stops_when_asked(tmp_path: Path) -> None:
    _write_bag(tmp_path / "bag", seconds=1.0, hz=20)
    player = BagPlayer(tmp_path / "bag")
    try:
        stats = player.play(_Sink(), rate=2.0, stop=lambda: False)  # type: ignore[arg-type]
        # never ahead of the bag's clock at twice its pace (0.95 s of bag)
        assert stats.wall_s >= 0.95 / 2.0 and stats.messages == 40
        sink = _Sink()
        stats = player.play(sink, rate=1.0, stop=lambda: len(sink.logged) >= 10)  # type: ignore[arg-type]
        assert stats.messages == 10
        player_excluding = BagPlayer(tmp_path / "bag", re.compile("^/b$"))
        assert list(player_excluding.definitions) == ["/a"]
        player_excluding.close()
    finally:
        player.close()


def test_an_endpoint_serves_on_a_free_port_and_a_taken_port_is_refused() -> None:
    lines: list[str] = []
    first = FoxgloveEndpoint("127.0.0.1", 0, 16, lines.append, lines.append)
    try:
        assert first.port > 0 and first.url == f"ws://127.0.0.1:{first.port}"
        from qrsim_ros.bag.foxglove_endpoint import EndpointError

        with pytest.raises(EndpointError, match=f"cannot serve on 127.0.0.1:{first.port}"):
            FoxgloveEndpoint("127.0.0.1", first.port, 16, lines.append, lines.append)
    finally:
        first.stop()


@pytest.mark.parametrize(("argv", "message"), [
    (["{missing}"], r"qrsim play: .*missing: not a rosbag2 bag \(no metadata.yaml\)"),
    (["{bag}", "--rate", "nan"], r"qrsim play: --rate nan: must be a finite number >= 0"),
    (["{bag}", "--rate", "-1"], r"qrsim play: --rate -1.0: must be a finite number >= 0"),
    (["{bag}", "--foxglove", "70000"], r"qrsim play: --foxglove=70000 must be"),
    (["{bag}", "--exclude", "("], r"qrsim play: --exclude '\(': not a regular expression"),
    (["{bag}", "--message-backlog", "0"], r"qrsim play: --message-backlog 0: must be at least 1"),
    (["{bag}", "--rate"], r"qrsim play: argument --rate: expected one argument"),
])
def test_bad_input_is_refused_in_one_line(tmp_path: Path, argv: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from qrsim_ros.cli.play import main

    _write_bag(tmp_path / "bag", seconds=0.1, hz=20)
    assert main([a.format(bag=tmp_path / "bag", missing=tmp_path / "missing") for a in argv]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.match(message, lines[0]), err


def test_a_bag_without_a_metadata_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notabag").mkdir()
    with pytest.raises(PlayError, match="not a rosbag2 bag"):
        BagPlayer(tmp_path / "notabag")
