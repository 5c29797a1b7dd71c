"""The remaining time of a run, from the per-session pipeline (pure: no Ray, no clock of its own).

Sessions run side by side, each on its own clock, so finished sessions say little until the very
end (they all finish late, together): counting them gives no estimate for minutes and then a wild
one. The unit of work here is the model request: a session needs about ``turns x requests per
turn`` of them, and requests complete steadily from the first turn on. So

    remaining = (sessions to run x expected turns x requests per turn) - requests done
    ETA       = remaining / (requests per live session per second x sessions live now)

* expected turns: ``max_turns`` until enough sessions finished to measure it (a run that stops
  early — the rules' stop, a learner that ends it — has shorter sessions);
* requests per turn: measured once a turn is done, repairs included, as requests done / (turns
  done + half a turn per live session): the live sessions' requests of the turn they are in are
  counted, their turn not yet (without that half turn a run of many sessions in their first
  turns looks half again as long); before any turn, the roles of a structured turn (learner,
  tutor, extractor);
* the rate: per live session (each runs on its own clock), over the last :data:`WINDOW_S` seconds
  of observations (start-up, when no request completes, is not part of it), times the sessions
  live now — a run whose workers come up one by one speeds up as they do, and the estimate with it.

The caller feeds :meth:`EtaEstimator.observe` with its totals and its own clock, so a test feeds
synthetic completion times.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: seconds of observations the request rate is measured over (short enough to follow a run that
#: speeds up as its workers warm up)
WINDOW_S = 30.0
#: requests of one structured turn before any turn is done (learner, tutor, extractor)
REQUESTS_PER_TURN = 3.0
#: finished sessions (at least, and at least this share of the sessions to run) before their
#: mean length replaces max_turns
MIN_FINISHED, MIN_FINISHED_SHARE = 3, 0.1


@dataclass
class EtaEstimator:
    sessions: int  # sessions this invocation runs
    max_turns: int
    _samples: deque = field(default_factory=deque)  # (t, requests done, live sessions), requests increasing
    _last: tuple[int, int, int, int] = (0, 0, 0, 0)  # requests, turns, finished sessions, their turns
    _live: int = 0

    def observe(self, t: float, *, requests: int, turns: int, finished: int = 0, finished_turns: int = 0,
                live: int = 0) -> None:
        """Totals so far (of this invocation) at time ``t``: model requests answered, session
        turns done (by finished and live sessions), finished sessions and their turns, and the
        sessions running now."""
        self._last = (requests, turns, finished, finished_turns)
        self._live = live
        if requests <= 0:
            self._samples.clear()  # no request yet: start-up does not count towards the rate
            self._samples.append((t, 0, live))
            return
        if self._samples and requests < self._samples[-1][1]:
            self._samples.clear()  # a total that went down (a shard's snapshot replaced): measure afresh
        self._samples.append((t, requests, live))
        while len(self._samples) > 2 and t - self._samples[1][0] >= WINDOW_S:
            self._samples.popleft()

    def expected_turns(self) -> float:
        _, _, finished, finished_turns = self._last
        if finished >= max(MIN_FINISHED, MIN_FINISHED_SHARE * self.sessions) and finished_turns > 0:
            return finished_turns / finished
        return float(self.max_turns)

    def requests_per_turn(self) -> float:
        requests, turns, _, _ = self._last
        return requests / (turns + self._live / 2) if turns > 0 else REQUESTS_PER_TURN

    def remaining_requests(self) -> float:
        requests = self._last[0]
        return max(0.0, self.sessions * self.expected_turns() * self.requests_per_turn() - requests)

    def rate(self) -> float | None:
        """Requests per second now: per live session over the window, times the sessions live now
        (None before two observations with progress). Without live counts: the window's rate."""
        if len(self._samples) < 2:
            return None
        t0, r0, _ = self._samples[0]
        t1, r1, live_now = self._samples[-1]
        if t1 <= t0 or r1 <= r0:
            return None
        session_seconds = sum((b[0] - a[0]) * (a[2] + b[2]) / 2 for a, b in zip(self._samples, list(self._samples)[1:]))
        if session_seconds <= 0 or live_now <= 0:
            return (r1 - r0) / (t1 - t0)
        return (r1 - r0) / session_seconds * live_now

    def eta_s(self) -> float | None:
        """Seconds left, or None while no request rate is known."""
        if self._last[2] >= self.sessions and self.sessions > 0:
            return 0.0
        rate = self.rate()
        return None if rate is None else self.remaining_requests() / rate


__all__ = ["EtaEstimator", "REQUESTS_PER_TURN", "WINDOW_S"]
