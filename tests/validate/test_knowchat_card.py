"""The KnowChat loader on the dataset card's layout (item scores Q1-Q10 / Q1-Q7, per-task sheets,
`questions` an integer index, a list or absent), the harmless variations a real export has, and
the errors that must still name file, sheet, row and column."""

from __future__ import annotations

import datetime as dt
import json

import openpyxl
import pandas as pd
import pytest

from ray_knowsim.validate.knowchat import KnowChatFormatError, load_knowchat

MWB, MJL = "math_strategy.xlsx", "math_strategy_conversations.jsonl"
EWB, EJL = "expertqa_strategy.xlsx", "expertqa_strategy_conversations.jsonl"
KEY = ["arm", "task", "prolific_id", "session"]


def edit(folder, name, fn):
    wb = openpyxl.load_workbook(folder / name)
    fn(wb)
    wb.save(folder / name)


def col(ws, header):
    return [c.value for c in ws[1]].index(header) + 1


def records(folder, name):
    return [json.loads(x) for x in (folder / name).read_text().splitlines() if x.strip()]


def write_records(folder, name, recs):
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in recs))


def fails(folder, *fragments, **kw):
    with pytest.raises(KnowChatFormatError) as exc:
        load_knowchat(folder, **kw)
    for f in fragments:
        assert f in str(exc.value), str(exc.value)
    return str(exc.value)


def frame(folder, **kw):
    return load_knowchat(folder, **kw).frame().set_index(KEY).sort_index()


def test_card_release_loads_every_session_as_planted(synthetic):
    data = load_knowchat(synthetic[0])
    df = data.frame()
    assert len(df) == len(data.conversations) == 2 * 2 * 3 * 3 * 3
    assert [(r.arm, r.task, r.sessions, len(r.participants)) for r in data.reports] == [
        ("strategy", "math", 27, 9), ("strategy", "expertqa", 27, 9), ("model", "math", 27, 9), ("model", "expertqa", 27, 9)
    ]
    assert set(df.level) == {"novice", "intermediate", "advanced"}
    # prescreening: 2, 5, 9 correct of 10 items -> the three levels at the default cuts
    assert set(df.prescreen_fraction) == {0.2, 0.5, 0.9}
    # tests of 7 items, pretest 1 correct, posttest 2..7 correct -> KG (post - 1) / 6
    math = df[df.task == "math"]
    assert set(math.kg.round(6)) == {round((p - 1) / 6, 6) for p in range(2, 8)}
    assert df[df.task == "expertqa"].kg.isna().all()
    # ExpertQA records refer to the question bank by row index; MathQA records carry no questions
    eqa = df[df.task == "expertqa"]
    assert all(len(ids) == 1 and ids[0].startswith("expertqa_") for ids in eqa.item_ids)
    assert all(ids == [] for ids in math.item_ids) and all(q == [] for q in math.question_ids)
    assert set(df.session) == {0, 1, 2}
    rep = data.reports[0]
    assert "summary" in rep.sheets and rep.prescreening == "items Q1..Q10 summed, max 10"
    assert "items Q1..Q7 summed, max 7" in rep.tests and "KG for 27 of 27" in rep.tests


def test_both_layouts_carry_the_same_planted_ratings(synthetic, synthetic_legacy):
    card = load_knowchat(synthetic[0]).frame()
    legacy = load_knowchat(synthetic_legacy[0]).frame()
    cells = ["arm", "task", "level", "condition"]
    for metric in ("dc", "co", "iq"):
        a = card.groupby(cells)[metric].apply(sorted)
        b = legacy.groupby(cells)[metric].apply(sorted)
        assert a.equals(b), metric
    # KG differs in scale (7 items vs score of 10) but not in order within a cell
    ka = card[card.task == "math"].groupby(cells).kg.mean().rank()
    kb = legacy[legacy.task == "math"].groupby(cells).kg.mean().rank()
    assert (ka == kb).all()


def test_harmless_variations_read_the_same(human_copy):
    before = frame(human_copy)

    def vary(wb):
        pre = wb["prescreening"]
        pre.cell(1, 1).value = "  Prolific_ID "  # case, underscore, whitespace
        pre.cell(1, 2).value = "q1"
        for r in range(2, pre.max_row + 1):  # numeric text and TRUE/FALSE item scores
            pre.cell(r, 3).value = str(pre.cell(r, 3).value)
            pre.cell(r, 4).value = bool(pre.cell(r, 4).value)
        for _ in range(3):
            pre.append([None, None, "  "])  # empty trailing rows
        main = wb["main"]
        for r in range(2, main.max_row + 1):
            main.cell(r, col(main, "timestamp")).value = dt.datetime(2026, 2, 3, 10, 0, r % 60)
            main.cell(r, col(main, "condition")).value = str(main.cell(r, col(main, "condition")).value)
        survey = wb["survey"]
        survey.cell(1, col(survey, "Delivery Calibration")).value = "DELIVERY-CALIBRATION"
        for r in range(2, survey.max_row + 1):
            c = survey.cell(r, col(survey, "Interaction Quality"))
            c.value = f" {c.value:g} "
        post = wb["posttest"]
        post.title = "Post-Test"

    edit(human_copy, MWB, vary)
    recs = records(human_copy, MJL)
    for k, r in enumerate(recs):
        r["condition"] = str(r["condition"])  # "0" instead of 0
        r["session"] = f"{r['session']}" if k % 2 else float(r["session"])
        r["Prolific ID"] = r.pop("prolific id")
    write_records(human_copy, MJL, recs)
    erecs = records(human_copy, EJL)
    for k, r in enumerate(erecs):
        r["questions"] = [r["questions"]] if k % 3 == 0 else str(r["questions"]) if k % 3 == 1 else r["questions"]
    write_records(human_copy, EJL, erecs)
    after = frame(human_copy)
    pd.testing.assert_frame_equal(before, after)


def test_pandas_index_column_and_question_ids(human_copy):
    """A sheet written by pandas (index under an empty header) and a bank with its own ids."""
    before = frame(human_copy)

    def bank(wb):
        ws = wb["questions"]
        ws.insert_cols(1)
        for r in range(2, ws.max_row + 1):
            ws.cell(r, 1).value = r - 2  # pandas' index, header empty
        ws.insert_cols(2)
        ws.cell(1, 2).value = "question id"
        for r in range(2, ws.max_row + 1):
            ws.cell(r, 2).value = f"EQA-{r - 1:03d}"

    edit(human_copy, EWB, bank)
    # records still use the integer index: not ids of the bank, so matched by position
    assert frame(human_copy).item_ids.equals(before.item_ids)
    # records using the bank's ids are matched by id
    recs = records(human_copy, EJL)
    for r in recs:
        r["questions"] = [f"EQA-{r['questions'] + 1:03d}"]
    write_records(human_copy, EJL, recs)
    after = frame(human_copy)
    assert after.item_ids.equals(before.item_ids)
    mine = after.xs("strategy", level="arm").xs("expertqa", level="task")
    assert set(q for ids in mine.question_ids for q in ids) == {"EQA-001", "EQA-002", "EQA-003"}


def test_sheets_required_per_task(human_copy):
    edit(human_copy, EWB, lambda wb: wb.remove(wb["summary"]))  # summary: read or ignored
    load_knowchat(human_copy)
    edit(human_copy, EWB, lambda wb: wb.remove(wb["questions"]))
    fails(human_copy, EWB, "missing sheet(s) 'questions'", "the expertqa workbook needs")
    edit(human_copy, MWB, lambda wb: wb.remove(wb["pretest"]))
    fails(human_copy, MWB, "missing sheet(s) 'pretest'")


def test_item_score_errors_name_the_cell(human_copy):
    def bad(wb):
        wb["prescreening"].cell(4, 5).value = "abc"

    edit(human_copy, MWB, bad)
    fails(human_copy, MWB, "sheet 'prescreening'", "row 4", "column 'Q4'", "expected an item score")

    def two(wb):
        wb["prescreening"].cell(4, 5).value = 2

    edit(human_copy, MWB, two)
    fails(human_copy, MWB, "sheet 'prescreening'", "row 4", "column 'Q4'", "> 1", "number of item columns (10)")

    def negative(wb):
        wb["pretest"].cell(3, 4).value = -1

    edit(human_copy, MWB, lambda wb: setattr(wb["prescreening"].cell(4, 5), "value", 1))
    edit(human_copy, MWB, negative)
    fails(human_copy, MWB, "sheet 'pretest'", "row 3", "column 'Q2'", "negative")


def test_blank_items_count_zero_and_an_empty_row_is_an_error(human_copy):
    before = frame(human_copy)

    def blank_one(wb):
        ws = wb["prescreening"]
        for c in range(2, 12):
            if ws.cell(2, c).value == 0:
                ws.cell(2, c).value = None
                return

    edit(human_copy, MWB, blank_one)
    data = load_knowchat(human_copy)
    assert "1 blank item cell(s) counted as 0" in " ".join(data.reports[0].notes)
    pd.testing.assert_frame_equal(data.frame().set_index(KEY).sort_index(), before)

    def blank_row(wb):
        for c in range(2, 12):
            wb["prescreening"].cell(3, c).value = None

    edit(human_copy, MWB, blank_row)
    fails(human_copy, MWB, "sheet 'prescreening'", "row 3", "no item score in 'Q1'..'Q10'")


def test_explicit_max_column_and_a_total_that_is_the_sum(human_copy):
    before = frame(human_copy)

    def with_max(wb):
        ws = wb["prescreening"]
        ws.cell(1, 12).value = "Max"
        for r in range(2, ws.max_row + 1):
            ws.cell(r, 12).value = 20

    edit(human_copy, MWB, with_max)
    after = frame(human_copy)
    mine = (after.index.get_level_values("task") == "math") & (after.index.get_level_values("arm") == "strategy")
    assert (after.prescreen_fraction[mine] == before.prescreen_fraction[mine] / 2).all()

    def total_is_sum(wb):
        ws = wb["prescreening"]
        ws.cell(1, 12).value = "Total"
        for r in range(2, ws.max_row + 1):
            ws.cell(r, 12).value = sum(ws.cell(r, c).value for c in range(2, 12))

    edit(human_copy, MWB, total_is_sum)
    data = load_knowchat(human_copy)
    pd.testing.assert_frame_equal(data.frame().set_index(KEY).sort_index(), before)
    assert any("equals the item sum" in n for n in data.reports[0].notes)


def test_question_reference_out_of_range(human_copy):
    recs = records(human_copy, EJL)
    recs[4]["questions"] = 3  # the bank has rows 0..2
    write_records(human_copy, EJL, recs)
    fails(human_copy, EJL, "line 5", "question '3'", "not a row index 0..2 of sheet 'questions'")
    recs[4]["questions"] = [0, "x"]
    write_records(human_copy, EJL, recs)
    fails(human_copy, EJL, "line 5", "question 'x'")


def test_per_session_prescreening_and_survey_keyed_by_condition(human_copy):
    before = frame(human_copy)

    def per_session(wb):
        # prescreening repeated per session (same scores): harmless
        ws = wb["prescreening"]
        rows = [[c.value for c in r] for r in ws.iter_rows(min_row=2)]
        for row in rows:
            ws.append(row)
        # survey without a session column: rows found by (participant, condition)
        main = wb["main"]
        cond = {(main.cell(r, col(main, "prolific id")).value, main.cell(r, col(main, "session")).value): main.cell(r, col(main, "condition")).value
                for r in range(2, main.max_row + 1)}
        sv = wb["survey"]
        for r in range(2, sv.max_row + 1):
            sv.cell(r, 2).value = cond[(sv.cell(r, 1).value, sv.cell(r, 2).value)]
        sv.cell(1, 2).value = "condition"

    edit(human_copy, MWB, per_session)
    pd.testing.assert_frame_equal(frame(human_copy), before)


def test_record_errors_name_line_and_field(human_copy):
    recs = records(human_copy, MJL)
    recs[2]["condition"] = 3
    write_records(human_copy, MJL, recs)
    fails(human_copy, MJL, "line 3", "field 'condition'", "unknown strategy-arm condition code 3")
    recs[2]["condition"] = 1
    recs[2]["messages"][1]["role"] = "teacher"
    write_records(human_copy, MJL, recs)
    fails(human_copy, MJL, "line 3", "messages", "unknown role 'teacher'")
    recs[2]["messages"][1]["role"] = "assistant"
    del recs[5]["prolific id"]
    write_records(human_copy, MJL, recs)
    fails(human_copy, MJL, "line 6", "field 'prolific id' is missing")


def test_multi_item_ratings_are_averaged_and_extra_rows_reported(human_copy):
    before = frame(human_copy)

    def split(wb):
        sv = wb["survey"]
        c = col(sv, "Cognitive Overload")
        sv.cell(1, c).value = "Cognitive Overload 1"
        sv.cell(1, sv.max_column + 1).value = "cognitive_overload_2"
        last = sv.max_column
        for r in range(2, sv.max_row + 1):
            sv.cell(r, last).value = sv.cell(r, c).value  # same value twice: the mean is unchanged
        sv.append(["someone-who-left", 0, 4, 4, 4, 4])  # a survey row without a conversation

    edit(human_copy, MWB, split)
    data = load_knowchat(human_copy)
    pd.testing.assert_frame_equal(data.frame().set_index(KEY).sort_index(), before)
    rep = data.reports[0]
    assert rep.ratings["CO"].startswith("'survey' mean of columns 'Cognitive Overload 1', 'cognitive_overload_2'")
    assert any("'survey': 1 row(s) match no conversation" in n for n in rep.notes)


def test_question_positions_counted_from_one_are_recognised(human_copy):
    before = frame(human_copy)
    recs = records(human_copy, EJL)
    for r in recs:
        r["questions"] += 1  # 1..3 for a bank of 3 rows
    write_records(human_copy, EJL, recs)
    data = load_knowchat(human_copy)
    after = data.frame().set_index(KEY).sort_index()
    assert after.item_ids.equals(before.item_ids)
    assert any("counted from 1" in n for n in data.reports[1].notes)


def test_session_ids_as_text(human_copy):
    """Sessions named by an id (e.g. Prolific's session id) rather than a number, in one file only."""
    def rename(s):
        return f"sess-{s}"

    recs = records(human_copy, MJL)
    for r in recs:
        r["session"] = rename(r["session"])
    write_records(human_copy, MJL, recs)

    def sheets(wb):
        for name in ("main", "survey", "pretest", "posttest"):
            ws = wb[name]
            c = col(ws, "session")
            for r in range(2, ws.max_row + 1):
                ws.cell(r, c).value = rename(ws.cell(r, c).value)

    edit(human_copy, MWB, sheets)
    data = load_knowchat(human_copy)
    df = data.frame()
    assert len(df) == 108 and set(map(type, df.session)) == {str}
    assert set(df[(df.arm == "strategy") & (df.task == "math")].session) == {"sess-0", "sess-1", "sess-2"}
    assert {c.session for c in data.conversations} == set(df.session)
