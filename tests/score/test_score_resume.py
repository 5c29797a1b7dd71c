"""`score` interrupted mid-way resumes without redoing finished shards, and a run directory with two
score sets still builds its report (the primary set fills ``iq``)."""

from __future__ import annotations

import pytest

from ray_knowsim.backends.model_set import ModelSet
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.score.run_stage import score_run
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.score.store import RunScores, ScoreDir
from tests.doubles.finished_runs import digests, finished_run

pytestmark = pytest.mark.usefixtures("ray_local")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A small offline run of 3 shards (the real simulation loop, a structured and a baseline learner)."""
    cfg, out, outcome = finished_run(tmp_path_factory.mktemp("resume"),
                                     conditions=[{"strategy": "adaptive"}, {"simulator": "zero-shot"}],
                                     levels=["novice", "advanced"], engine={"shard_size": 6})
    assert outcome.n_failed == 0
    return cfg, out


class Interrupted:
    """The offline model until the score set has its first committed shard: then Ctrl-C arrives
    (in the middle of the next shard)."""

    def __init__(self, store: ScoreDir) -> None:
        self.inner = OfflineModel(name="sim")
        self.name = "sim"
        self.store = store

    async def generate(self, request):
        if self.store.markers():
            raise KeyboardInterrupt
        return await self.inner.generate(request)


def test_an_interrupted_score_pass_resumes_without_redoing_finished_shards(finished):
    cfg, out = finished
    n_shards = len(RunReader.open(out).index.live())
    assert n_shards >= 3
    simulation = digests(out, ("sessions", "turns", "commits"))
    store = ScoreDir(out, "second")
    with pytest.raises(KeyboardInterrupt):
        score_run(cfg, out, name="second", models=ModelSet({"sim": Interrupted(store)}, {}, []), shard_concurrency=1)
    assert len(store.markers()) == 1  # the first shard was committed before the interrupt
    first = digests(out, ("scores/second",))

    again = score_run(cfg, out, name="second")
    assert again.skipped_shards == 1 and again.scored_shards == n_shards - 1
    after = digests(out, ("scores/second",))
    assert {k: v for k, v in after.items() if k in first and k != "scores/second/judge.json"} == \
        {k: v for k, v in first.items() if k != "scores/second/judge.json"}  # the finished shard was not redone
    assert store.read().num_rows == RunReader.open(out).sessions.count_rows()  # every session once
    assert digests(out, ("sessions", "turns", "commits")) == simulation
    third = score_run(cfg, out, name="second")
    assert third.scored_shards == 0 and third.skipped_shards == n_shards


def test_the_report_builds_with_two_score_sets(finished, tmp_path):
    from ray_knowsim.report.build import build_report

    cfg, out = finished
    score_run(cfg, out, name="other")
    scores = RunScores.load(out)
    assert len(scores.sets) >= 2 and scores.primary in scores.sets
    result = build_report(out, tmp_path / "report")
    assert result.html_path.is_file() and result.markdown_path.is_file()
    assert "IQ" in result.markdown_path.read_text(encoding="utf-8")
