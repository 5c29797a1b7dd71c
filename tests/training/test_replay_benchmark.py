"""The reward is the benchmark: a recorded demo run's tutor turns, replayed through the training
environment, give the run's states, signals, turn rows and metrics exactly; the per-turn gains
add up to the session's KG; the same seed and tutor turns give the same episode."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ray_knowsim.training import EnvironmentConfig, TrainingEnvironment
from ray_knowsim.training.replay import replay
from tests.doubles.run_config import rows

DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
#: the demo config cut to 2 items x 1 level x 2 strategies x 1 trial, 5 turns
SMALL = ["tasks.0.limit=1", "tasks.1.limit=1", "levels=[novice]", "trials=1", "max_turns=5",
         "conditions=[{strategy: adaptive}, {strategy: socratic}]"]


@pytest.fixture(scope="module", params=["virtual", "stop"])
def recorded(request, ray_local, tmp_path_factory):
    """(overrides, sessions, turns) of a finished demo run on the offline model."""
    from ray_knowsim.config import load_run_config
    from ray_knowsim.run.fan_out import run

    out = tmp_path_factory.mktemp(f"demo-{request.param}")
    overrides = SMALL + [f"early_stop={request.param}", f"output_dir={out}"]
    run(load_run_config(DEMO, overrides=overrides), output=out, quiet=True, config_file=str(DEMO))
    return request.param, overrides, rows(out, "sessions", scores=False), rows(out, "turns")


def _plain(value):
    return value.tolist() if hasattr(value, "tolist") else value


def _environment(mode: str, overrides: list[str]) -> TrainingEnvironment:
    return TrainingEnvironment.from_config(EnvironmentConfig(run_config=str(DEMO), overrides=overrides, early_stop=mode))


def _replayed(mode, overrides, sessions, turns):
    async def go():
        env = _environment(mode, overrides)
        out = {}
        for _, s in sessions.iterrows():
            mine = turns[turns.session_id == s.session_id].sort_values("turn")
            observations = await replay(env, s.to_dict(), list(mine.assistant_message))
            out[s.session_id] = (observations, env.episode(observations[0].episode_id))
        return out

    return asyncio.run(go())


def test_replay_gives_the_runs_states_signals_and_metrics(recorded):
    mode, overrides, sessions, turns = recorded
    assert len(sessions) == 4 and (sessions.status == "ok").all()
    replayed = _replayed(mode, overrides, sessions, turns)
    for _, s in sessions.iterrows():
        observations, live = replayed[s.session_id]
        mine = turns[turns.session_id == s.session_id].sort_values("turn").reset_index(drop=True)
        assert len(observations) == len(mine) + 1 and observations[-1].done
        assert [o.done for o in observations] == [False] * len(mine) + [True]
        labels = list(s.iu_labels)
        for t, (obs, row) in enumerate(zip(observations[1:], mine.itertuples()), start=1):
            assert obs.turn == t
            assert [obs.metadata.states[label] for label in labels] == [
                ("unaware", "struggling", "partial_understanding", "knows_well")[v] for v in row.states]
            assert [obs.metadata.carries[label] for label in labels] == list(row.carries)
            assert obs.metadata.signals == json.loads(row.signals_json)
            assert obs.rewards.turn.gain == row.absorbed_gain
            assert obs.rewards.turn.overload == row.overload
            assert obs.rewards.turn.redundant == row.fm_redundant
        # the environment's turn rows are the run's, column for column
        for mine_row, row in zip(live.turn_rows, mine.to_dict("records")):
            got = mine_row.model_dump()
            shared = [k for k in row if k in got and k != "run_id"]
            assert shared and {k: got[k] for k in shared} == {k: _plain(row[k]) for k in shared}
        # per-turn gains add up to the episode's KG, which is the run's
        total = 0.0
        for obs in observations[1:]:
            total += obs.reward
        metrics = observations[-1].rewards.episode.metrics
        assert total == metrics["kg"] == s.kg
        for name in ("kg", "nkg", "dc", "ic", "co", "po", "engagement", "kg_es", "dc_es", "co_es"):
            assert metrics[name] == pytest.approx(s[name], abs=0, rel=0), name
        assert observations[-1].metadata.stop_reason == s.stop_reason
    if mode == "virtual":
        assert (sessions.turns == 5).all()


def test_same_seed_and_turns_give_the_same_episode(recorded):
    mode, overrides, sessions, turns = recorded
    s = sessions.iloc[0]
    mine = list(turns[turns.session_id == s.session_id].sort_values("turn").assistant_message)

    def dumps():
        async def go():
            env = _environment(mode, overrides)
            a = await replay(env, s.to_dict(), mine, episode_id="a")
            b = await replay(env, s.to_dict(), mine, episode_id="b")  # the same environment, another episode
            return a, b

        a, b = asyncio.run(go())
        strip = lambda obs: [o.model_dump(exclude={"episode_id": True, "metadata": {"episode_id"}}) for o in obs]
        return strip(a), strip(b)

    first, second = dumps()
    assert first == second
    assert dumps()[0] == first  # and a fresh environment gives it again
