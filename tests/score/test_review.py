"""The LLM review of the simulator, without Ray: its prompt (the same whatever model answers; the
offline facts travel out of band), its schema and parser (broken JSON is a named failure that
loses nothing), the offline double, and its agreement with the audit on hand-made cases."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from ray_knowsim.audit.checks import AuditFlag
from ray_knowsim.demo import demo_graphs, demo_items
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.llm.parse.review import parse_review
from ray_knowsim.schema.chat import ChatResponse, Usage
from ray_knowsim.schema.review import REVIEW_KINDS, SimulatorReview
from ray_knowsim.score.judges import JUDGES
from ray_knowsim.score.review import agreement_table
from ray_knowsim.score.stage import judge_transcripts
from ray_knowsim.score.transcripts import Transcript
from ray_knowsim.sim.types import RoleSettings

ITEM = demo_items("math")[0]
GRAPH = demo_graphs("math")[ITEM.id]
IDS = [n.id for n in GRAPH.nodes]
CLAIM = "I already understand area of a rectangle, so that part is clear to me."
REPLY = "Good question. " + GRAPH.nodes[0].description


def transcript(sid: str = "s1", claim: bool = True, bad_label: bool = True) -> Transcript:
    """One structured exchange: the learner (every IU unaware) may claim IU3; the extractor may
    label IU9, which the reply never touches, well_explained (IU1, which it explains, is right)."""
    labelled = {"IU1", "IU9"} if bad_label else {"IU1"}
    signals = json.dumps([{"id": i, "teaching_quality": "well_explained" if i in labelled else "not_mentioned",
                           "user_attempt_type": "none"} for i in IDS])
    user = (CLAIM + " " if claim else "") + "What is a variable?"
    return Transcript(sid, "math", ITEM.id, "novice", "structured", 7, ITEM, [["user", user], ["assistant", REPLY]],
                      graph_json=json.dumps(GRAPH.to_json_dict()), initial_states=tuple([0] * len(IDS)),
                      turn_states=(tuple([0] * len(IDS)),), turn_signals=(signals,))


JUDGE = JUDGES.get("simulator_review")


def test_the_prompt_carries_the_record_and_nothing_for_the_double():
    req = JUDGE.request(transcript(), seed=1, request_id="s1#2:judge")
    system, user = req.messages[0]["content"], req.messages[1]["content"]
    for kind in REVIEW_KINDS:
        assert kind in system
    assert "helped_tutor" in system and "hurt_tutor" in system and "minor" in system
    assert "Student's record before it: IU1 unaware" in user and "Labeler's marks: IU1 well_explained (student: none)" in user
    assert f"Student: {CLAIM}" in user and f"Tutor: {REPLY}" in user and GRAPH.nodes[2].description in user
    assert req.schema_name == "SimulatorReview" and req.prompt_version == "simulator_review@v1" and req.role == "judge"
    text = system + user
    assert "offline" not in text.lower() and "request_id" not in text  # the double's facts are out of band
    assert req.offline_facts["exchanges"][0]["states"]["IU3"] == "unaware"


def test_the_offline_double_answers_deterministically_and_finds_the_planted_errors():
    req = JUDGE.request(transcript(), seed=1, request_id="s1#2:judge")
    a, b = OfflineModel().respond(req), OfflineModel().respond(req)
    assert a.text == b.text
    parsed = JUDGE.parse(a.text, transcript())
    assert parsed.ok and not parsed.warnings
    found = {(f.kind, f.iu, f.severity) for f in parsed.value.findings}
    assert found == {("learner_claims_unaware", "IU3", "helped_tutor"), ("extractor_unsupported_label", "IU9", "helped_tutor")}
    clean = JUDGE.parse(OfflineModel().respond(JUDGE.request(transcript(claim=False, bad_label=False), seed=1, request_id="x")).text,
                        transcript(claim=False, bad_label=False))
    assert clean.ok and clean.value.findings == []


def finding(**kw):
    return {"turn": 1, "party": "learner", "kind": "learner_claims_unaware", "iu": "IU3", "severity": "helped_tutor",
            "evidence": CLAIM, **kw}


@pytest.mark.parametrize("text, error, fragment", [
    ('{"findings": [{"turn": 1, "party": "learner", ', "judge_invalid_json", ""),
    ("", "judge_empty", ""),
    (json.dumps({"findings": [finding(kind="tutor_was_rude")]}), "judge_invalid_output", "findings.0.kind"),
    (json.dumps({"findings": [finding(severity="awful")]}), "judge_invalid_output", "findings.0.severity"),
    (json.dumps({"findings": [finding(turn=4)]}), "judge_invalid_output", "turn 4, but the conversation has 1"),
])
def test_broken_or_off_schema_answers_are_named_failures(text, error, fragment):
    got = parse_review(text, [(CLAIM, REPLY)])
    assert not got.ok and got.error == error and fragment in got.detail


def test_evidence_that_is_not_quoted_is_kept_and_said():
    text = json.dumps({"findings": [finding(evidence="the student said it knew areas")], "summary": ""})
    got = parse_review(text, [(CLAIM, REPLY)])
    assert got.ok and got.warnings == ("finding 1 (learner_claims_unaware, turn 1): its evidence is not words of that exchange",)
    values = JUDGE.values(got.value, transcript())
    assert values["review_findings"][0]["quoted"] is False
    ok = JUDGE.values(parse_review(json.dumps({"findings": [finding(evidence="  i ALREADY understand area of a rectangle ")]}),
                                   [(CLAIM, REPLY)]).value, transcript())
    assert ok["review_findings"][0]["quoted"] is True and ok["review_helped_tutor"] == 1


class Broken:
    """Answers the review with broken JSON for the sessions named, else as the offline model."""

    def __init__(self, broken: set[str]) -> None:
        self.inner, self.broken = OfflineModel(), broken

    async def generate(self, request):  # noqa: ANN001, ANN201
        if request.request_id.split("#")[0] in self.broken:
            return ChatResponse(text='{"findings": [', usage=Usage(100, 5), finish_reason="stop")
        return await self.inner.generate(request)


def test_a_broken_review_loses_nothing_and_names_the_failure():
    settings = RoleSettings(model="rev", temperature=0.0, max_tokens=4096, attempts=2, repair_temperature=0.2)
    rows = asyncio.run(judge_transcripts([transcript("s1"), transcript("s2")], Broken({"s2"}), name="review", model_key="rev",
                                         judges=["simulator_review"], settings=settings))
    good, bad = rows
    assert good.judge_error is None and json.loads(good.extra_json)["review_n_findings"] == 2
    assert bad.judge_error.startswith("simulator_review: judge_invalid_json") and bad.extra_json is None
    assert bad.judge_calls == 2 and bad.tokens_judge == 2 * 105  # asked again within its attempts, and counted


def flag(sid: str, kind: str) -> AuditFlag:
    party = "learner" if kind.startswith("learner") else "extractor"
    return AuditFlag(session_id=sid, turn=1, kind=kind, party=party, iu="IU1", evidence="x", why="y")


def test_agreement_with_the_audit_by_hand():
    ids = ["s1", "s2", "s3", "s4", "s5"]
    flags = [flag("s1", "learner_claims_unaware"), flag("s2", "learner_claims_unaware"), flag("s3", "extractor_unsupported_label"),
             flag("s9", "learner_claims_unaware")]  # s9 was not reviewed: not compared
    findings = {"s1": [{"kind": "learner_claims_unaware"}], "s3": [{"kind": "learner_claims_unaware"}, {"kind": "extractor_unsupported_label"}],
                "s4": [{"kind": "learner_incoherent"}], "s5": []}
    t = agreement_table(ids, flags, findings, score_set="review", not_compared=1).set_index("kind")
    claims = t.loc["learner_claims_unaware"]
    # audit: s1 s2 flagged; review: s1 s3. 3 of 5 agree; p_e = (2*2 + 3*3) / 25 = 13/25 -> kappa (3/5 - 13/25) / (12/25) = 1/6
    assert (claims.n_sessions, claims.n_audit, claims.n_review, claims.n_both) == (5, 2, 2, 1)
    assert claims.agreement == pytest.approx(0.6) and claims.kappa == pytest.approx(1 / 6)
    assert (claims.review_tpr, claims.review_tnr) == (pytest.approx(0.5), pytest.approx(2 / 3))
    unsupported = t.loc["extractor_unsupported_label"]
    assert (unsupported.n_audit, unsupported.n_review, unsupported.kappa) == (1, 1, 1.0)
    only_review = t.loc["learner_incoherent"]
    assert not only_review.shared and only_review.n_review == 1 and math.isnan(only_review.kappa)
    anyone = t.loc["any"]  # audit: s1 s2 s3; review (shared kinds): s1 s3
    assert (anyone.n_audit, anyone.n_review, anyone.n_both, anyone.review_tpr, anyone.review_tnr) == (3, 2, 2, pytest.approx(2 / 3), 1.0)
    assert t.loc["any_learner"].n_audit == 2 and t.loc["any_extractor"].n_review == 1
    assert (t["n_not_compared"] == 1).all()


def test_the_schema_is_the_decoding_schema():
    schema = SimulatorReview.json_schema()
    assert "findings" in schema["properties"] and schema["properties"]["findings"]["type"] == "array"


def test_every_audit_kind_is_a_review_kind_of_the_same_party():
    from ray_knowsim.audit.checks import FLAG_KINDS

    assert {k: p for k, (p, _) in FLAG_KINDS.items()} == {k: REVIEW_KINDS[k][0] for k in FLAG_KINDS}


def test_the_review_over_the_real_http_path():
    """The same request through the OpenAI-compatible client to the offline model served on a socket
    (its facts as the body extension): the answer, its parse and its token counts arrive intact."""
    from ray_knowsim.llm.http.client import OpenAICompatibleModel
    from ray_knowsim.llm.http.config import HTTPModelConfig
    from ray_knowsim.llm.offline.server import serve_model_in_thread

    t = transcript()
    req = JUDGE.request(t, seed=1, request_id="s1#2:judge")
    direct = OfflineModel().respond(req)

    async def ask(base_url: str):
        model = OpenAICompatibleModel(HTTPModelConfig(base_url=base_url, model="offline", offline_server=True, max_attempts=1))
        try:
            return await model.generate(req)
        finally:
            await model.aclose()

    with serve_model_in_thread(OfflineModel()) as server:
        got = asyncio.run(ask(server.base_url))
    assert got.error is None and got.text == direct.text and got.usage.prompt_tokens == direct.usage.prompt_tokens
    assert JUDGE.parse(got.text, t).ok
