"""--layout FILE: sheet/column/field renames and condition codes without code changes; bad layout
files fail naming the key; the built-in layout is the card's."""

from __future__ import annotations

import json

import openpyxl
import pandas as pd
import pytest

from ray_knowsim.validate.knowchat import KnowChatFormatError, load_knowchat
from ray_knowsim.validate.layout import DEFAULT_LAYOUT_FILE, LayoutError, default_layout, load_layout

KEY = ["arm", "task", "prolific_id", "session"]


def frame(folder, layout=None):
    return load_knowchat(folder, layout=layout).frame().set_index(KEY).sort_index()


def test_builtin_layout_is_the_card(tmp_path):
    lay = default_layout()
    assert lay.name == "knowchat-card" and DEFAULT_LAYOUT_FILE.is_file()
    assert lay.sheets["pretest"].tasks == ["math"] and lay.sheets["questions"].tasks == ["expertqa"]
    assert lay.sheets["summary"].tasks == []
    assert {t for k in ("background", "prescreening", "main", "survey") for t in lay.sheets[k].tasks} == {"math", "expertqa"}
    assert lay.condition("strategy", 0) == "Socratic" and lay.condition("model", "2") == "Claude Opus 4.7"
    assert lay.condition("model", 1.0) == "Gemini 3 Pro" and lay.condition("strategy", "adaptive") == "Adaptive"
    with pytest.raises(ValueError, match="unknown strategy-arm condition code 3"):
        lay.condition("strategy", 3)
    with pytest.raises(ValueError):
        lay.condition("strategy", True)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_layout(empty).sheets == lay.sheets  # an empty file changes nothing


def test_renames_and_codes_from_a_layout_file(human_copy, tmp_path):
    before = frame(human_copy)
    # the release differs: sheet 'main' is 'Conversations', 'prolific id' is 'participant_code'
    # everywhere, the survey names DC 'calibration', strategy codes run 1..3 in another order
    recode = {0: "S", 1: "A", 2: "C"}
    for wbp in human_copy.glob("*.xlsx"):
        wb = openpyxl.load_workbook(wbp)
        wb["main"].title = "Conversations"
        for ws in wb.worksheets:
            for cell in ws[1]:
                if cell.value == "prolific id":
                    cell.value = "participant_code"
                if cell.value == "Delivery Calibration":
                    cell.value = "calibration"
            if "strategy" in wbp.name and ws.title == "Conversations":
                c = [x.value for x in ws[1]].index("condition") + 1
                for r in range(2, ws.max_row + 1):
                    ws.cell(r, c).value = recode[ws.cell(r, c).value]
        wb.save(wbp)
    for jp in human_copy.glob("*strategy*.jsonl"):
        recs = [json.loads(x) for x in jp.read_text().splitlines()]
        for r in recs:
            r["participant_code"] = r.pop("prolific id")
            r["condition"] = recode[r["condition"]]
        jp.write_text("".join(json.dumps(r) + "\n" for r in recs))
    for jp in human_copy.glob("*model*.jsonl"):
        recs = [json.loads(x) for x in jp.read_text().splitlines()]
        for r in recs:
            r["participant_code"] = r.pop("prolific id")
        jp.write_text("".join(json.dumps(r) + "\n" for r in recs))

    with pytest.raises(KnowChatFormatError, match=r"missing sheet\(s\) 'main'"):
        load_knowchat(human_copy)
    layout_file = tmp_path / "release.yaml"
    layout_file.write_text(
        "name: release-v2\n"
        "records: {prolific_id: participant code}\n"
        "columns: {prolific_id: [participant code]}\n"
        "sheets:\n  main: {names: [conversations]}\n  survey: {columns: {dc: calibration}}\n"
        "conditions:\n  strategy: {S: Socratic, A: Adaptive, C: Comprehensive}\n"
    )
    layout = load_layout(layout_file)
    assert layout.name == "release-v2" and layout.sheets["main"].tasks == ["math", "expertqa"]  # merged over the card
    pd.testing.assert_frame_equal(frame(human_copy, layout), before)

    # a mismatch is still named: a code the layout does not know
    jp = human_copy / "math_strategy_conversations.jsonl"
    recs = [json.loads(x) for x in jp.read_text().splitlines()]
    recs[3]["condition"] = 0
    jp.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(KnowChatFormatError, match=r"math_strategy_conversations.jsonl, line 4, field 'condition': unknown strategy-arm condition code 0 .*S \(Socratic\)"):
        load_knowchat(human_copy, layout=layout)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("colums: {}\n", "colums"),
        ("sheets: {mian: {names: [main]}}\n", "unknown mian"),
        ("columns: {prolific_id: []}\n", "at least one name"),
        ("conditions: {strategy: {0: Socratic, 1: Socratic, 2: Comprehensive}}\n", "both mean 'Socratic'"),
        ("conditions: {model: {0: GPT-4}}\n", "unknown condition 'GPT-4'"),
        ("item_pattern: '(q'\n", "not a valid regular expression"),
        ("sheets: {pretest: {tasks: [physics]}}\n", "unknown task(s) physics"),
        ("[1, 2]\n", "a YAML mapping"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_bad_layout_files_name_the_key(tmp_path, text, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(LayoutError) as exc:
        load_layout(path)
    assert "bad.yaml" in str(exc.value) and fragment in str(exc.value), str(exc.value)


def test_missing_layout_file(tmp_path):
    with pytest.raises(LayoutError, match="cannot read the layout file"):
        load_layout(tmp_path / "nope.yaml")


def test_fixed_maximum_from_the_layout(human_copy, tmp_path):
    """Items scored out of 2 each: the maximum comes from the layout when the sheet has none."""
    wbp = human_copy / "math_model.xlsx"
    wb = openpyxl.load_workbook(wbp)
    ws = wb["prescreening"]
    for r in range(2, ws.max_row + 1):
        for c in range(2, 12):
            ws.cell(r, c).value = 2 * ws.cell(r, c).value
    wb.save(wbp)
    with pytest.raises(KnowChatFormatError, match=r"math_model.xlsx, sheet 'prescreening', row \d+, column 'Q\d+': item score 2 > 1"):
        load_knowchat(human_copy)
    path = tmp_path / "max.yaml"
    path.write_text("sheets: {prescreening: {max_score: 20}}\n")
    df = load_knowchat(human_copy, layout=load_layout(path)).frame()
    mine = (df.arm == "model") & (df.task == "math")
    assert set(df[mine].prescreen_fraction) == {0.2, 0.5, 0.9}
    assert set(df[~mine].prescreen_fraction) == {0.1, 0.25, 0.45}  # 0/1 items, now out of 20
