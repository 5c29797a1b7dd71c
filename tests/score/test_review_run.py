"""The LLM review of the simulator as a score set of a real run with planted simulator errors
(tests/plugins/faulty_simulator.py in front of the offline model): resumable (an interrupted
review continues without redoing finished sessions), costed like every judge, and its agreement
with the deterministic audit computed from the two sides' own records."""

from __future__ import annotations

import json
from collections import defaultdict

import pandas as pd
import pytest

from ray_knowsim.audit.run import audit_run
from ray_knowsim.cli.main import main
from ray_knowsim.backends.model_set import ModelSet
from ray_knowsim.config import parse_run_config
from ray_knowsim.run.fan_out import run
from ray_knowsim.score.run_stage import score_run
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.score.store import ScoreDir
from tests.doubles.planted import PLUGIN, planted_sessions
from tests.doubles.run_config import small_config
from tests.doubles.finished_runs import digests

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]  # two Ray-backed runs as a module fixture: the full suite
PRICE = {"input": 1.0, "output": 2.0}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """12 sessions (4 math items x 3 levels, adaptive tutor, 3 turns) in 3 shards; the learner claims
    unaware IUs and the extractor labels unmentioned IUs well_explained in half of their answers."""
    root = tmp_path_factory.mktemp("review")
    log = root / "log"
    models = {"sim": {"backend": "offline"}, "reviewer": {"backend": "offline", "price": PRICE},
              "bad_user_sim": {"backend": "faulty", "plant": ["learner_claims_unaware"], "share": 0.5, "log": str(log)},
              "bad_extractor": {"backend": "faulty", "plant": ["extractor_labels_unmentioned"], "share": 0.5, "log": str(log)}}
    roles = {"user_sim": "bad_user_sim", "extractor": "bad_extractor", "judge": "sim", "assistant": {"model": "sim"}}
    cfg = parse_run_config(small_config(plugins=[PLUGIN], models=models, roles=roles, max_turns=3,
                                        conditions=[{"strategy": "adaptive"}],
                                        engine={"shard_size": 4, "shard_fn": "ray_knowsim.sim.shard:run_shard"}))
    out = root / "run"
    outcome = run(cfg, output=out, quiet=True)
    assert outcome.n_failed == 0
    return cfg, out, planted_sessions(log)


class Interrupted:
    """The offline model until the review's first shard is committed: then Ctrl-C arrives."""

    def __init__(self, store: ScoreDir) -> None:
        self.inner, self.name, self.store = OfflineModel(name="reviewer"), "reviewer", store

    async def generate(self, request):  # noqa: ANN001, ANN201
        if self.store.markers():
            raise KeyboardInterrupt
        return await self.inner.generate(request)


def findings_of(store: ScoreDir) -> dict[str, list[dict]]:
    table = store.read().to_pandas()
    return {r.session_id: json.loads(r.extra_json)["review_findings"] for r in table.itertuples() if r.extra_json}


def test_review_is_resumable_costed_and_leaves_the_run_alone(planted):
    cfg, out, _ = planted
    n_shards = len(RunReader.open(out).index.live())
    assert n_shards == 3
    simulation = digests(out, ("sessions", "turns", "commits"))
    store = ScoreDir(out, "review")
    with pytest.raises(KeyboardInterrupt):
        score_run(cfg, out, judge="reviewer", name="review", judges=["simulator_review"],
                  models=ModelSet({"reviewer": Interrupted(store)}, {}, []), shard_concurrency=1)
    assert len(store.markers()) == 1
    first = digests(out, ("scores/review",))
    again = score_run(cfg, out, judge="reviewer", name="review", judges=["simulator_review"], shard_concurrency=1)
    assert (again.skipped_shards, again.scored_shards, again.n_errors) == (1, n_shards - 1, 0)
    after = digests(out, ("scores/review",))
    assert {k: v for k, v in first.items() if k != "scores/review/judge.json"} == \
        {k: v for k, v in after.items() if k in first and k != "scores/review/judge.json"}  # the finished shard was not redone
    rows = store.read().to_pandas()
    assert len(rows) == 12 and rows.session_id.is_unique and rows.judge_error.isna().all()
    assert (rows.judge_calls >= 1).all() and (rows.tokens_judge > 0).all()
    assert rows.judge_cost_usd.tolist() == pytest.approx(
        ((rows.prompt_tokens_judge * PRICE["input"] + rows.completion_tokens_judge * PRICE["output"]) / 1e6).tolist())
    assert json.loads(rows.judge_prompt_versions[0]) == {"simulator_review": "v1"}
    assert digests(out, ("sessions", "turns", "commits")) == simulation
    # the spend journal holds the review's spend like any judge's
    assert list((out / "spend").glob("score-review.*.jsonl"))
    # a third pass has nothing to do
    assert score_run(cfg, out, judge="reviewer", name="review", judges=["simulator_review"]).scored_shards == 0


def test_review_agreement_with_the_audit_on_the_planted_run(planted, capsys):
    cfg, out, plants = planted
    assert plants["learner_claims_unaware"] and plants["extractor_labels_unmentioned"]
    assert main(["score", str(out), "--judge", "reviewer", "--judges", "simulator_review", "--json"]) == 0  # the set: "review"
    printed = json.loads(capsys.readouterr().out)
    findings = findings_of(ScoreDir(out, "review"))
    # the review finds the planted learner claims (evidence quoted from the transcript)
    claimed = {s for s, fs in findings.items() if any(f["kind"] in ("learner_claims_unaware", "learner_uses_unaware") for f in fs)}
    assert len(claimed & plants["learner_claims_unaware"]) >= 0.9 * len(plants["learner_claims_unaware"])
    assert all(f["quoted"] for fs in findings.values() for f in fs)
    # the agreement table against the two sides' own records, kind by kind
    table = pd.read_parquet(out / "tables" / "review_agreement.parquet").set_index("kind")
    audit = audit_run(RunReader.open(out))
    flagged: dict[str, set[str]] = defaultdict(set)
    for f in audit.flags:
        flagged[f.kind].add(f.session_id)
    ids = set(findings)
    for kind in ("learner_claims_unaware", "learner_uses_unaware", "extractor_unsupported_label", "extractor_ignores_covered"):
        row = table.loc[kind]
        by_review = {s for s, fs in findings.items() if any(f["kind"] == kind for f in fs)}
        assert (row.n_sessions, row.n_audit, row.n_review, row.n_both) == (12, len(flagged[kind] & ids), len(by_review),
                                                                          len(flagged[kind] & by_review)), kind
        agree = sum((s in flagged[kind]) == (s in by_review) for s in ids) / 12
        assert row.agreement == pytest.approx(agree)
    assert printed["review_agreement"]["any"]["sessions"] == 12
    # the report's audit section shows it
    from ray_knowsim.report.build import build_report

    md = build_report(out, out / "report").markdown_path.read_text()
    section = md[md.index("### LLM review vs the audit"):]
    claims = table.loc["learner_claims_unaware"]
    assert f"| review | learner\\_claims\\_unaware | 12 | {claims.n_audit} | {claims.n_review} | {claims.n_both} |" in section, section[:800]


def test_the_viewer_shows_a_conversations_review_findings(planted):
    import html
    import re
    import threading

    from ray_knowsim.view.data import Files
    from ray_knowsim.view.routes import ViewState
    from ray_knowsim.view.server import serve
    from tests.doubles.viewer_http import get

    cfg, out, _ = planted
    if not ScoreDir(out, "review").markers():
        score_run(cfg, out, judge="reviewer", name="review", judges=["simulator_review"])
    findings = findings_of(ScoreDir(out, "review"))
    ready, started, stop = [], threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(ViewState(Files([out.parent])), "127.0.0.1", 0,
                                                  lambda url: (ready.append(url), started.set()), stop), daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        base = ready[0]
        _, _, index = get(base)
        run_path = re.search(r'href="(/run/[0-9a-f]+)"', index).group(1)
        _, _, body = get(base + run_path.lstrip("/"))
        links = {html.unescape(sid): html.unescape(link) for link, sid in re.findall(r'class="audit-link" href="([^"]+)">([^<]+)<', body)}
        sid = next(s for s in links if findings.get(s))
        status, _, page = get(base + links[sid].lstrip("/"))
        assert status == 200 and 'id="review-findings"' in page and "LLM review (review)" in page
        assert findings[sid][0]["evidence"] in html.unescape(page)
    finally:
        stop.set()
        thread.join(10)
