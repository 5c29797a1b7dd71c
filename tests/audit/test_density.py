"""Planted errors at the density real ones have: one kind per session, one or two plants on
non-consecutive turns of 6, in paraphrase (tests/doubles/audit_sessions.py), and as many clean sessions.
Pure Python, no Ray: seconds. The floors are the measured rates (docs/audit.md); the learner's
claims and uses of unaware IUs in other words are below the issue's 90 % goal and say so."""

from __future__ import annotations

from collections import Counter

import pytest

from ray_knowsim.audit.checks import audit_session
from tests.doubles.audit_sessions import KINDS, corpus

#: kind -> the share of planted sessions that must be flagged (measured on 8 sessions per item and kind)
FLOOR = {
    "learner_claims_unaware": 0.5,  # measured 13/24: gists carry few of an IU's words (not at the 90 % goal)
    "learner_uses_unaware": 0.6,  # measured 16/24: a step two IUs share (2w + 3) is not told apart (not at goal)
    "learner_reveals_answer": 0.95,  # 24/24, answers 152, 7/18, 1 and 3
    "learner_stop_contradicts_state": 0.95,  # 32/32
    "extractor_unsupported_label": 0.9,  # 31/32
    "extractor_ignores_covered": 0.9,  # 31/32
    "extractor_constant_labels": 0.9,  # 31/32
}


@pytest.fixture(scope="module")
def audited():
    return [(p, audit_session(p.facts)) for p in corpus(8)]


def test_clean_sessions_are_flagged_at_most_5_percent(audited):
    clean = [(p, f) for p, f in audited if not p.kind]
    flagged = [p.facts.session_id for p, f in clean if f]
    assert len(clean) == 56 and len(flagged) <= 0.05 * len(clean), flagged  # measured 1/56 (1 of 336 turns)


@pytest.mark.parametrize("kind", list(KINDS))
def test_planted_kind_is_found_at_its_measured_rate(audited, kind):
    planted = [(p, f) for p, f in audited if p.kind == kind]
    hits = [p for p, f in planted if any(x.kind in KINDS[kind] for x in f)]
    turns = sum(len(p.turns) for p, _ in planted)
    turn_hits = sum(any(x.kind in KINDS[kind] and x.turn == t for x in f) for p, f in planted for t in p.turns)
    assert len(planted) >= 20 and len(hits) >= FLOOR[kind] * len(planted), (len(hits), len(planted))
    assert turn_hits >= (FLOOR[kind] - 0.1) * turns, (turn_hits, turns)
    assert all(x.evidence and x.why for _, f in planted for x in f)


def test_plants_are_sparse(audited):
    per = Counter(len(p.turns) for p, _ in audited if p.kind)
    assert set(per) <= {1, 2} and all(b - a >= 2 for p, _ in audited for a, b in zip(p.turns, p.turns[1:]))
