"""The conversation viewer's reading of turn rows: moves and classes agree with what was recorded."""

from __future__ import annotations

import json

import pyarrow.compute as pc

from ray_knowsim.report.explain import conversation_view
from ray_knowsim.io.rundir import open_run


def test_derived_classes_match_recorded_counts_and_states(small_run):
    run = open_run(small_run.run_dir)
    sessions = run.sessions.read(["session_id", "simulator", "status"]).to_pylist()
    ids = [s["session_id"] for s in sessions if s["simulator"] == "structured" and s["status"] == "ok"][:8]
    rows = {r["session_id"]: r for r in run.sessions.rows_of(ids)}
    turns = run.turns.rows_of(ids)
    checked_turns = reasons = 0
    for sid in ids:
        view = conversation_view(rows[sid], [t for t in turns if t["session_id"] == sid])
        assert view.has_state and len(view.states) == rows[sid]["turns"] + 1
        assert view.states[0] == rows[sid]["initial_states"]
        for t in view.turns:
            assert t.fm_consistent, (sid, t.turn, t.recorded_fm, t.derived_fm)
            pre, post = view.states[t.turn - 1], view.states[t.turn]
            moved = {view.ids[k] for k in range(len(pre)) if post[k] != pre[k]}
            assert {m.iu_id for m in t.moved} == moved
            for m in t.ius:
                if m.mode:
                    assert m.reason, m
                    reasons += 1
                if m.mode == "effective":
                    assert m.post > m.pre
                if m.mode == "redundant":
                    assert m.pre == 3
            checked_turns += 1
    assert checked_turns >= 20 and reasons > 0


def test_baseline_and_bad_signals_do_not_break_the_view(small_run):
    run = open_run(small_run.run_dir)
    base = run.sessions.read(filter=pc.field("simulator") == "zero-shot-cot").slice(0, 1).to_pylist()[0]
    view = conversation_view(base, run.turns_of(base["session_id"]))
    assert not view.has_state and view.turns and "baseline" in view.note

    session = run.sessions.rows_of(["synthetic/synth_000/novice/model-a:adaptive/0"])[0]
    turn = dict(run.turns_of(session["session_id"])[0], signals_json="{not json")
    view = conversation_view(session, [turn])
    assert view.turns[0].signal_error and "unreadable" in view.turns[0].signal_error
    assert json.loads(json.dumps(view.turns[0].recorded_fm))  # still a plain dict
