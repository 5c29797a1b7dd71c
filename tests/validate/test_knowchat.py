"""The KnowChat loader on the OLDER layout (score/max score columns, all seven sheets): it still loads as
planted, and malformed files fail naming the place. The card layout: test_knowchat_card.py."""

from __future__ import annotations

import json

import openpyxl
import pytest

from ray_knowsim.validate.conditions import LevelCuts, condition_label, math_kg
from ray_knowsim.validate.knowchat import KnowChatFormatError, load_knowchat
from ray_knowsim.validate.knowchat_files import discover

WB = "knowchat_strategy_math.xlsx"
JL = "knowchat_strategy_math.jsonl"


def edit(folder, sheet, fn, name=WB):
    wb = openpyxl.load_workbook(folder / name)
    fn(wb[sheet] if sheet else wb)
    wb.save(folder / name)


def col(ws, header):
    return [c.value for c in ws[1]].index(header) + 1


def set_cell(folder, sheet, header, row, value, name=WB):
    edit(folder, sheet, lambda ws: ws.cell(row=row, column=col(ws, header), value=value), name)


def jsonl(folder, name=JL):
    return [json.loads(line) for line in (folder / name).read_text().splitlines() if line.strip()]


def write_jsonl(folder, records, name=JL):
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def fails(folder, *fragments):
    with pytest.raises(KnowChatFormatError) as exc:
        load_knowchat(folder)
    for f in fragments:
        assert f in str(exc.value), str(exc.value)
    return str(exc.value)


def test_legacy_release_loads_as_planted(synthetic_legacy):
    data = load_knowchat(synthetic_legacy[0])
    df = data.frame()
    assert len(df) == len(data.conversations) == 2 * 2 * 3 * 3 * 3  # arms, tasks, levels, participants, sessions
    assert set(df.level) == {"novice", "intermediate", "advanced"}
    assert set(df[df.arm == "model"].condition) == {"GPT-5.4", "Gemini 3 Pro", "Claude Opus 4.7"}
    assert df[df.task == "expertqa"].kg.isna().all() and df[df.task == "math"].kg.notna().all()
    assert set(df[df.task == "math"].kg.round(4)) == {round(v, 4) for v in (1 / 8, 2 / 8, 4 / 8, 5 / 8, 7 / 8, 1.0)}
    assert df.dc.between(1, 7).all() and df.co.between(1, 7).all()
    assert all(len(ids) == 1 and ids[0].startswith(t) for ids, t in zip(df.item_ids, df.task))
    # planted human goodness is visible in the ratings: best condition has the best DC in every group
    planted = synthetic_legacy[1]["human_goodness"]
    for key, goodness in planted.items():
        arm, task, level, metric = key.split("|")
        if metric != "DC":
            continue
        cells = df[(df.arm == arm) & (df.task == task) & (df.level == level)]
        means = cells.groupby("condition_code").dc.mean()
        assert list(means.rank(method="dense")) == list(pd_rank(goodness))


def pd_rank(values):
    order = sorted(set(values))
    return [order.index(v) + 1.0 for v in values]


def test_condition_codes_and_kg_formula():
    assert [condition_label("strategy", c) for c in (0, 1, 2)] == ["Socratic", "Adaptive", "Comprehensive"]
    assert [condition_label("model", c) for c in (0, 1.0, "2")] == ["GPT-5.4", "Gemini 3 Pro", "Claude Opus 4.7"]
    assert condition_label("model", "claude opus 4.7") == "Claude Opus 4.7"
    with pytest.raises(ValueError, match="unknown strategy-arm condition code 3"):
        condition_label("strategy", 3)
    assert math_kg(2, 6, 10) == 0.5 and math_kg(4, 2, 10) == pytest.approx(-1 / 3) and math_kg(10, 10, 10) is None


def test_level_cuts_are_configurable(synthetic_legacy):
    df = load_knowchat(synthetic_legacy[0], LevelCuts(novice_below=0.1, advanced_from=0.95)).frame()
    assert set(df.level) == {"intermediate"}
    assert LevelCuts.parse("0.3, 0.6") == LevelCuts(novice_below=0.3, advanced_from=0.6)
    with pytest.raises(ValueError):
        LevelCuts(novice_below=0.8, advanced_from=0.5)


def test_missing_sheet(legacy_copy):
    edit(legacy_copy, None, lambda wb: wb.remove(wb["survey"]))
    fails(legacy_copy, WB, "missing sheet", "'survey'")


def test_missing_column(legacy_copy):
    edit(legacy_copy, "prescreening", lambda ws: ws.delete_cols(col(ws, "max score")))
    fails(legacy_copy, WB, "sheet 'prescreening'", "missing column", "'max score'")


def test_non_numeric_score(legacy_copy):
    set_cell(legacy_copy, "pretest", "score", 3, "abc")
    fails(legacy_copy, WB, "sheet 'pretest'", "row 3", "column 'score'", "expected a number")


def test_non_numeric_rating_and_score_out_of_range(legacy_copy):
    set_cell(legacy_copy, "survey", "cognitive overload", 5, "high")
    fails(legacy_copy, "sheet 'survey'", "row 5", "'cognitive overload'")
    set_cell(legacy_copy, "survey", "cognitive overload", 5, 4)
    set_cell(legacy_copy, "prescreening", "score", 2, 11)
    fails(legacy_copy, "sheet 'prescreening'", "row 2", "outside 0..10")


def test_unknown_condition_code_in_main(legacy_copy):
    set_cell(legacy_copy, "main", "condition", 4, 7)
    fails(legacy_copy, "sheet 'main'", "row 4", "column 'condition'", "unknown strategy-arm condition code 7")


def test_unknown_condition_code_in_jsonl(legacy_copy):
    recs = jsonl(legacy_copy)
    recs[2]["condition"] = 5
    write_jsonl(legacy_copy, recs)
    fails(legacy_copy, JL, "line 3", "condition code 5")


def test_duplicate_participant(legacy_copy):
    def dup(ws):
        ws.append([c.value for c in ws[2]])

    edit(legacy_copy, "background", dup)  # background is not read beyond its ids: a repeated row is harmless
    edit(legacy_copy, "prescreening", dup)  # the same score twice: harmless too
    assert len(load_knowchat(legacy_copy).sessions) == 108

    def dup_other_score(ws):
        ws.append([ws.cell(2, 1).value, (ws.cell(2, 2).value + 1) % 10, 10])

    edit(legacy_copy, "prescreening", dup_other_score)
    fails(legacy_copy, WB, "sheet 'prescreening'", "duplicate participant", "different score", "first at row 2")


def test_duplicate_session_in_survey_and_jsonl(legacy_copy, tmp_path):
    edit(legacy_copy, "survey", lambda ws: ws.append([c.value for c in ws[3]]))
    fails(legacy_copy, "sheet 'survey'", "duplicate entry", "first at row 3")


def test_duplicate_conversation(legacy_copy):
    recs = jsonl(legacy_copy)
    write_jsonl(legacy_copy, recs + [recs[0]])
    fails(legacy_copy, JL, f"line {len(recs) + 1}", "duplicate session", "first at line 1")


def test_malformed_jsonl_lines(legacy_copy):
    text = (legacy_copy / JL).read_text().splitlines()
    (legacy_copy / JL).write_text("\n".join(text[:4] + ["{not json"] + text[4:]) + "\n")
    fails(legacy_copy, JL, "line 5", "not valid JSON")
    recs = [json.loads(x) for x in text]
    del recs[1]["messages"]
    write_jsonl(legacy_copy, recs)
    fails(legacy_copy, JL, "line 2", "messages")
    recs[1]["messages"] = [{"role": "teacher", "content": "hi"}]
    write_jsonl(legacy_copy, recs)
    fails(legacy_copy, JL, "line 2", "role")


def test_condition_disagreement_between_jsonl_and_main(legacy_copy):
    recs = jsonl(legacy_copy)
    recs[0]["condition"] = (recs[0]["condition"] + 1) % 3
    write_jsonl(legacy_copy, recs)
    fails(legacy_copy, JL, "line 1", "disagrees with", "sheet 'main'")


def test_session_without_conversation_and_conversation_without_session(legacy_copy):
    recs = jsonl(legacy_copy)
    write_jsonl(legacy_copy, recs[1:])
    fails(legacy_copy, "sheet 'main'", "has no conversation in " + JL)
    recs[0]["session"] = 99
    write_jsonl(legacy_copy, recs)
    fails(legacy_copy, JL, "line 1", "is not in sheet 'main'")


def test_unknown_question_and_missing_prescreening(legacy_copy):
    recs = jsonl(legacy_copy)
    recs[0]["questions"] = ["nope"]
    write_jsonl(legacy_copy, recs)
    fails(legacy_copy, JL, "line 1", "question 'nope'", "sheet 'questions'")
    recs[0]["questions"] = ["math-q1"]
    write_jsonl(legacy_copy, recs)
    edit(legacy_copy, "prescreening", lambda ws: ws.delete_rows(2))
    fails(legacy_copy, "sheet 'main'", "has no 'prescreening' row")


def test_math_session_needs_both_tests_with_one_max(legacy_copy):
    set_cell(legacy_copy, "posttest", "max score", 2, 12)
    fails(legacy_copy, "sheet 'posttest'", "row 2", "differs from the pretest")
    set_cell(legacy_copy, "posttest", "max score", 2, 10)
    edit(legacy_copy, "pretest", lambda ws: ws.delete_rows(2))
    fails(legacy_copy, WB, "has no 'pretest' row")


def test_ratings_may_live_in_main_and_blanks_are_missing(legacy_copy):
    before = load_knowchat(legacy_copy).frame().set_index(["arm", "task", "prolific_id", "session"]).sort_index()

    def move(wb):
        s, m = wb["survey"], wb["main"]
        c = col(s, "interaction quality")
        by_key = {(r[0].value, r[1].value): r[c - 1].value for r in s.iter_rows(min_row=2)}
        s.delete_cols(c)
        mc = m.max_column + 1
        m.cell(row=1, column=mc, value="Interaction_Quality")
        for r in range(2, m.max_row + 1):
            m.cell(row=r, column=mc, value=by_key[(m.cell(r, 1).value, m.cell(r, 2).value)])
        s.cell(row=2, column=col(s, "delivery calibration")).value = None  # cell(value=None) is a no-op

    edit(legacy_copy, None, move)
    after = load_knowchat(legacy_copy).frame().set_index(["arm", "task", "prolific_id", "session"]).sort_index()
    assert (after.iq == before.iq).all()
    assert after.dc.isna().sum() == 1 and before.dc.notna().all()


def test_rating_column_nowhere(legacy_copy):
    edit(legacy_copy, "survey", lambda ws: ws.delete_cols(col(ws, "cognitive overload")))
    fails(legacy_copy, WB, "'cognitive overload' is in neither sheet 'survey' nor sheet 'main'")


def test_file_pairing_and_names(legacy_copy):
    (legacy_copy / "knowchat_model_math.xlsx").unlink()
    fails(legacy_copy, "knowchat_model_math.jsonl", "no matching workbook")
    (legacy_copy / "knowchat_model_math.jsonl").rename(legacy_copy / "knowchat_math.jsonl")
    fails(legacy_copy, "knowchat_math.jsonl", "exactly one arm")
    (legacy_copy / "knowchat_math.jsonl").unlink()
    (legacy_copy / "notes.jsonl").write_text("not read\n")  # names neither an arm nor a task: ignored
    assert set(discover(legacy_copy)) == {("strategy", "math"), ("strategy", "expertqa"), ("model", "expertqa")}


def test_not_a_workbook(legacy_copy):
    (legacy_copy / WB).write_bytes(b"not a zip")
    fails(legacy_copy, WB, "not a readable XLSX")
