"""The audit over the authors' recorded conversations (a real tutor's replies, a real extractor's
labels): the flags per kind are the ones read and judged in docs/audit.md, so a change to the
checks that moves them has to be read again."""

from __future__ import annotations

import json
from collections import Counter

from ray_knowsim.audit.checks import audit_session
from ray_knowsim.audit.records import record_facts
from ray_knowsim.schema.graph import parse_graph


def test_flags_on_the_recorded_conversations(shared_ref):
    graphs = json.loads((shared_ref / "iu_cache/math.json").read_text())
    flags = []
    for f in sorted((shared_ref / "examples").glob("*.json")):
        for record in json.loads(f.read_text()):
            facts = record_facts(record, parse_graph(graphs[record["problem_id"]], record["problem_id"]), f"{f.stem}/{record['problem_id']}")
            assert facts.turns and (facts.structured == (record.get("simulation_method") == "structured"))
            flags += audit_session(facts)
    assert Counter(x.kind for x in flags) == {"extractor_unsupported_label": 29, "extractor_ignores_covered": 6, "learner_reveals_answer": 2}
    assert all(x.evidence and x.why for x in flags)
    # the baseline learner computes the answer itself: flagged by the rule, judged no simulator error (docs/audit.md)
    assert {x.session_id for x in flags if x.kind == "learner_reveals_answer"} == {"mathqa_baseline_zero-shot-cot_novice/math_004"}
