"""The ETA (run/eta.py) fed synthetic completion times: no clock, no timing."""

from __future__ import annotations

import pytest

from ray_knowsim.run.eta import WINDOW_S, EtaEstimator


def pipeline(sessions: int, turns: int, per_turn: int, concurrency: int, request_s: float, startup_s: float):
    """Observations of a run whose sessions run ``concurrency`` at a time, each turn taking
    ``per_turn`` requests of ``request_s``: (t, requests, turns, finished, finished_turns, live)
    every second, and the time it ends."""
    turn_s = per_turn * request_s
    session_s = turns * turn_s
    waves = -(-sessions // concurrency)
    end = startup_s + waves * session_s
    out = []
    t = 0.0
    while t < end:
        run_t = max(0.0, t - startup_s)
        done_waves = int(run_t // session_s)
        finished = min(sessions, done_waves * concurrency)
        live = min(concurrency, sessions - finished)
        into = run_t - done_waves * session_s
        live_requests = int(into / request_s)
        requests = finished * turns * per_turn + live * live_requests
        turns_done = finished * turns + live * (live_requests // per_turn)
        out.append((t, requests, turns_done, finished, finished * turns, live if run_t > 0 else 0))
        t += 1.0
    return out, end


def test_eta_is_known_within_the_first_minute_and_close_at_mid_run():
    # 168 sessions of 15 turns, 3 requests a turn, 16 at a time, 0.1 s a request, 30 s start-up:
    # no session finishes before 34.5 s; counting finished sessions gives nothing for a while
    observations, end = pipeline(168, 15, 3, 16, 0.1, 30.0)
    eta = EtaEstimator(sessions=168, max_turns=15)
    shown_at = None
    for t, requests, turns, finished, finished_turns, live in observations:
        eta.observe(t, requests=requests, turns=turns, finished=finished, finished_turns=finished_turns, live=live)
        if shown_at is None and eta.eta_s() is not None:
            shown_at = t
        if abs(t - (30.0 + end) / 2) < 0.5:
            actual = end - t
            assert eta.eta_s() == pytest.approx(actual, rel=0.5), (t, eta.eta_s(), actual)
            assert eta.eta_s() == pytest.approx(actual, rel=0.2)  # a steady pipeline: close
    assert shown_at is not None and shown_at <= 32.0  # a second or two after the first answers


def test_eta_ignores_start_up_and_uses_the_recent_rate():
    eta = EtaEstimator(sessions=100, max_turns=2)
    for t in range(0, 50):  # 50 s of start-up: nothing answered, no estimate
        eta.observe(float(t), requests=0, turns=0)
        assert eta.eta_s() is None
    eta.observe(50.0, requests=3, turns=1)  # measured from the last second nothing was answered
    assert eta.eta_s() == pytest.approx((600 - 3) / 3)  # 3 requests/s, 3 per turn: 600 needed
    eta.observe(51.0, requests=6, turns=2)
    assert eta.eta_s() == pytest.approx((600 - 6) / 3)
    # the rate slows down: after a window, only the recent rate counts
    r = 6
    for t in range(52, 52 + int(WINDOW_S) + 5):
        r += 1
        eta.observe(float(t), requests=r, turns=r // 3)
    assert eta.rate() == pytest.approx(1.0, rel=0.05)


def test_eta_learns_shorter_sessions_and_ends_at_zero():
    eta = EtaEstimator(sessions=10, max_turns=10)
    eta.observe(0.0, requests=0, turns=0)
    eta.observe(10.0, requests=60, turns=30, finished=5, finished_turns=30)  # 6 turns each, not 10
    assert eta.expected_turns() == pytest.approx(6.0) and eta.requests_per_turn() == pytest.approx(2.0)
    assert eta.eta_s() == pytest.approx((10 * 6 * 2 - 60) / 6.0)
    eta.observe(20.0, requests=120, turns=60, finished=10, finished_turns=60)
    assert eta.eta_s() == 0.0


def test_requests_of_turns_under_way_do_not_inflate_the_work():
    # 100 sessions of 3 requests a turn, in their first turns: 250 requests answered, 50 turns done,
    # 100 live; requests / turns (5) would promise two thirds more work than there is, the half
    # turn per live session gives 2.5
    eta = EtaEstimator(sessions=100, max_turns=10)
    eta.observe(0.0, requests=0, turns=0)
    eta.observe(10.0, requests=250, turns=50, live=100)
    assert eta.requests_per_turn() == pytest.approx(2.5)
    naive = EtaEstimator(sessions=100, max_turns=10)
    naive.observe(0.0, requests=0, turns=0)
    naive.observe(10.0, requests=250, turns=50)
    assert naive.requests_per_turn() == pytest.approx(5.0) and eta.eta_s() < 0.6 * naive.eta_s()


def test_a_run_that_speeds_up_as_its_workers_come_up():
    # live sessions rise 16 -> 64 over 20 s, each session answering 1 request/s: the rate now is
    # 64/s although the window's average is far lower
    eta = EtaEstimator(sessions=1000, max_turns=10)
    eta.observe(0.0, requests=0, turns=0, live=0)
    requests = 0.0
    for t in range(1, 21):
        live = 16 + (64 - 16) * t // 20
        requests += live
        eta.observe(float(t), requests=int(requests), turns=int(requests) // 3, live=live)
    assert eta.rate() == pytest.approx(64.0, rel=0.1)
