"""What a recording misses: the messages of a periodic stamped topic that never reached the bag.

A recorder that falls behind (an overloaded machine) loses messages in its subscriptions' queues without
being told. Most of the graph's topics are stamped with the tick they belong to and come at a fixed
period (IMU and altimeter every tick, GPS every 10 ticks, ...), so the gaps in their stamps are the
messages that did not arrive. ``StampGaps`` watches one topic: once its first ``PROBATION`` steps between
stamps were one and the same step it is periodic, and every missing multiple of that step between an
episode's first and last stamp is a message missing (a stamp going back starts a new episode; a repeated
stamp, a lockstep re-send, counts once). A topic whose steps differ (published on change, at a rate that
is not fixed, or already losing messages in its first steps) is not judged. No rclpy here.
"""

from __future__ import annotations

#: Steps between stamps that must all be equal before a topic is judged periodic.
PROBATION = 10


class StampGaps:
    """Missing messages of one topic from its stamps [ns] (module docstring)."""

    def __init__(self) -> None:
        self.step_ns: int | None = None  # the period, once judged periodic
        self.irregular = False
        self._steps: list[int] = []  # the first steps, during probation
        self._first = self._last = -1
        self._received = 0
        self._done_expected = self._done_received = 0

    def count(self, t_ns: int) -> None:
        """A message stamped ``t_ns`` arrived."""
        if self.irregular:
            return
        last = self._last
        if last >= 0 and t_ns == last:
            return
        if last >= 0 and t_ns < last:
            self._episode_end()
            last = -1
        if last >= 0:
            step = t_ns - last
            if self.step_ns is None:
                self._steps.append(step)
                if len(self._steps) == PROBATION:
                    if len(set(self._steps)) != 1:
                        self.irregular = True
                        return
                    self.step_ns = step
            elif step % self.step_ns:
                self.irregular = True
                return
        if self._first < 0:
            self._first = t_ns
        self._last = t_ns
        self._received += 1

    def _expected(self) -> int:
        if self.step_ns is None or self._received == 0:
            return self._received
        return max(self._received, (self._last - self._first) // self.step_ns + 1)

    def _episode_end(self) -> None:
        self._done_expected += self._expected()
        self._done_received += self._received
        self._first = self._last = -1
        self._received = 0

    def missing(self) -> tuple[int, int] | None:
        """(messages missing, messages expected) over every episode so far; None: not judged (not yet
        periodic, or irregular)."""
        if self.step_ns is None or self.irregular:
            return None
        expected = self._done_expected + self._expected()
        return expected - self._done_received - self._received, expected


def missing_summary(gaps: dict[str, StampGaps], worst: int = 3) -> str | None:
    """One clause naming what the periodic topics miss, the worst first; None when they miss nothing."""
    counts = {topic: m for topic, g in gaps.items() if (m := g.missing()) is not None and m[0] > 0}
    if not counts:
        return None
    total = sum(m[0] for m in counts.values())
    judged = sum(1 for g in gaps.values() if g.missing() is not None)
    ranked = sorted(counts.items(), key=lambda item: (-item[1][0], item[0]))
    named = ", ".join(f"{topic} {m[0]} of {m[1]}" for topic, m in ranked[:worst])
    more = f" and {len(ranked) - worst} more" if len(ranked) > worst else ""
    return (f"{total} messages are missing from {len(counts)} of the {judged} periodic stamped topics "
            f"({named}{more})")
