"""Every request a set of demo sessions sends is byte for byte the recorded one.

The renderers cache what is static per graph, item and template and fill compiled templates
(issue 30); this is the proof that none of it changes a prompt, a request field or an HTTP body.
The fixture and how to regenerate it (only for an intended wording or field change):
``tests/doubles/golden_requests.py``.
"""

from __future__ import annotations

import pytest

from tests.doubles.golden_requests import GOLDEN, generate


def _check() -> None:
    want = GOLDEN.read_text(encoding="utf-8").splitlines()
    got = generate()
    assert len(got) == len(want), f"{len(got)} requests rendered, {len(want)} recorded"
    changed = [(w, g) for w, g in zip(want, got) if w != g]
    if changed:
        pytest.fail(f"{len(changed)} of {len(want)} requests changed; first: recorded {changed[0][0]!r}, now {changed[0][1]!r}")


def test_every_request_is_byte_identical_to_the_golden_record():
    _check()


def test_a_second_pass_served_from_warm_caches_is_identical_too():
    """The first pass filled every per-graph, per-item and per-template cache; what they serve
    must be exactly what a cold render gives."""
    _check()
