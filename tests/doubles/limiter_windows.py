"""What a limiter's grant times must satisfy: the most grants in any window, and the token bucket's
bound over every window."""

from __future__ import annotations


def max_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    best, j = 0, 0
    for i in range(len(times)):
        while times[i] - times[j] >= window:
            j += 1
        best = max(best, i - j + 1)
    return best


def assert_bucket_bound(times: list[float], capacity: float, rate: float, slack_s: float = 0.0) -> None:
    """Every window [t_i, t_j] holds at most capacity + rate * (t_j - t_i + slack) grants."""
    times = sorted(times)
    for i in range(len(times)):
        for j in range(i, len(times)):
            allowed = capacity + rate * (times[j] - times[i] + slack_s) + 1e-9
            assert j - i + 1 <= allowed, (i, j, times[i], times[j])
