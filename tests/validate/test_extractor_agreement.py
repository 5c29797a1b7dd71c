"""The extractor against people's per-IU labels (KnowChat sheet 'iu labels'): a small KnowChat
folder written here, the offline extractor, planted disagreements with a hand-computed kappa and
TPR/TNR per label, resume, an unreadable answer, the loader's errors and the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import openpyxl
import pandas as pd
import pytest

from ray_knowsim.demo import demo_graphs
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.schema.chat import ChatResponse, Usage
from ray_knowsim.schema.items import item_key
from ray_knowsim.stats.agreement import label_agreement
from ray_knowsim.validate.extractor_labels import REPLIES_FILE, label_replies
from ray_knowsim.validate.knowchat import KnowChatFormatError, load_knowchat
from ray_knowsim.validate.knowchat_labels import LABELS

ITEM = "demo_math_01"
WE, SH, NM = "well_explained", "shallow", "not_mentioned"


def _graph():
    return demo_graphs("math")[ITEM]


def _desc(iu: str) -> str:
    return next(n.description for n in _graph().nodes if n.id == iu)


# per participant: (reply texts, {(reply, IU): the person's label})
REPLY_1 = f"Let us start with two ideas. {_desc('IU1')} {_desc('IU2')}"
REPLY_2 = f"Now the next idea. {_desc('IU3')}"
#: what the offline extractor says of the labelled IUs (the fixture checks it)
EXTRACTOR = {(1, "IU1"): WE, (1, "IU2"): WE, (1, "IU5"): NM, (1, "IU6"): NM,
             (2, "IU3"): WE, (2, "IU4"): NM, (2, "IU5"): NM, (2, "IU7"): NM}
PEOPLE = {
    "PA": dict(EXTRACTOR),  # agrees everywhere
    "PB": {**EXTRACTOR, (1, "IU1"): SH, (1, "IU5"): WE, (2, "IU7"): SH},  # three disagreements
}


def write_folder(root: Path, people: dict = PEOPLE, extra_rows: list | None = None) -> Path:
    """One (strategy, math) pair: a JSONL of two conversations and a workbook with every sheet math
    needs, plus 'iu labels' (math records name no item: the sheet's item id column does)."""
    root.mkdir(parents=True, exist_ok=True)
    lines = []
    for k, pid in enumerate(people):
        messages = [{"role": "user", "content": "How do I find the area of this rectangle?"},
                    {"role": "assistant", "content": REPLY_1},
                    {"role": "user", "content": "Okay, and then?"},
                    {"role": "assistant", "content": REPLY_2}]
        lines.append(json.dumps({"prolific id": pid, "session": 1, "condition": k % 3, "messages": messages}))
    (root / "math_strategy_conversations.jsonl").write_text("\n".join(lines) + "\n")
    wb = openpyxl.Workbook()
    wb.remove(wb.active)

    def sheet(name, header, rows):
        ws = wb.create_sheet(name)
        ws.append(header)
        for r in rows:
            ws.append(r)

    pids = list(people)
    q = [f"Q{i}" for i in range(1, 11)]
    t = [f"Q{i}" for i in range(1, 8)]
    sheet("background", ["Prolific ID"], [[p] for p in pids])
    sheet("prescreening", ["Prolific ID", *q], [[p, *([1] * 2 + [0] * 8)] for p in pids])  # 2/10: novice
    sheet("pretest", ["Prolific ID", "Session", *t], [[p, 1, 1, *([0] * 6)] for p in pids])
    sheet("posttest", ["Prolific ID", "Session", *t], [[p, 1, 1, 1, *([0] * 5)] for p in pids])
    sheet("main", ["Prolific ID", "Session", "Condition"], [[p, 1, k % 3] for k, p in enumerate(pids)])
    sheet("survey", ["Prolific ID", "Session", "Delivery Calibration", "Cognitive Overload", "Interaction Quality"],
          [[p, 1, 3, 2, 4] for p in pids])
    rows = [[p, 1, turn, iu, label.replace("_", " ").title(), ITEM] for p, labels in people.items() for (turn, iu), label in labels.items()]
    sheet("IU Labels", ["Prolific ID", "Session", "Turn", "IU", "Label", "Item ID"], rows + (extra_rows or []))
    wb.save(root / "math_strategy.xlsx")
    return root


def items_and_graphs():
    from ray_knowsim.demo import demo_items

    items = {item_key("math", it.id): it for it in demo_items("math")}
    graphs = {item_key("math", k): g for k, g in demo_graphs("math").items()}
    return items, graphs


class Counting:
    """The offline model, counting what it is asked; ``broken``: request ids answered with broken JSON."""

    def __init__(self, broken: set[str] = frozenset()) -> None:
        self.inner, self.asked, self.broken = OfflineModel(), [], set(broken)

    async def generate(self, request):  # noqa: ANN001, ANN201
        self.asked.append(request.request_id)
        if any(request.request_id.startswith(b) for b in self.broken):
            return ChatResponse(text='{"iu_analysis": [{"id": "IU1", "teaching_quality": ', usage=Usage(50, 10), finish_reason="stop")
        return await self.inner.generate(request)


def run_labels(human, out, model):  # noqa: ANN001, ANN201

    items, graphs = items_and_graphs()
    levels = {(s.arm, s.task, s.prolific_id, str(s.session)): s.level for s in human.sessions}
    from ray_knowsim.schema.price import Price

    return label_replies(human, items=items, graphs=graphs, initial_state=lambda item, graph, level: [0] * len(graph.nodes),
                         levels=levels, model=model, model_key="offline", model_identity="offline-test",
                         settings=_settings(), out_dir=out, price=Price(input=1.0, output=2.0))


def _settings():
    from ray_knowsim.config import parse_run_config
    from tests.doubles.run_config import small_config

    return parse_run_config(small_config(), check_files=False).roles.settings("extractor")


def test_label_agreement_by_hand():
    ext = [EXTRACTOR[k] for p in PEOPLE for k in PEOPLE[p]]
    ref = [PEOPLE[p][k] for p in PEOPLE for k in PEOPLE[p]]
    got = label_agreement(ext, ref, LABELS)
    # 13 of 16 agree; marginals extractor WE 6 SH 0 NM 10, people WE 6 SH 2 NM 8 -> p_e = 116/256
    assert got["n"] == 16 and got["agreement"] == pytest.approx(13 / 16)
    assert got["kappa"] == pytest.approx((13 / 16 - 116 / 256) / (1 - 116 / 256)) == pytest.approx(23 / 35)
    assert (got["tpr_well_explained"], got["tnr_well_explained"]) == (pytest.approx(5 / 6), pytest.approx(9 / 10))
    assert (got["tpr_shallow"], got["tnr_shallow"]) == (0.0, 1.0)
    assert (got["tpr_not_mentioned"], got["tnr_not_mentioned"]) == (1.0, 0.75)
    assert (got["n_ref_shallow"], got["n_shallow"]) == (2, 0)


def test_the_loader_reads_the_labels_with_their_replies(tmp_path):
    data = load_knowchat(write_folder(tmp_path / "h"))
    assert len(data.iu_labels) == 16 and {x.label for x in data.iu_labels} == {WE, SH, NM}
    assert data.reports[0].iu_labels == "16 per-IU labels of 4 tutor replies in 2 sessions"
    conv = data.conversations[0]
    prior, user, reply = conv.exchange(2)
    assert prior == [["user", "How do I find the area of this rectangle?"], ["assistant", REPLY_1]]
    assert (user, reply) == ("Okay, and then?", REPLY_2)


def test_the_extractor_against_planted_labels_and_resume(tmp_path):
    human = load_knowchat(write_folder(tmp_path / "h"))
    out = tmp_path / "out"
    model = Counting()
    res = run_labels(human, out, model)
    assert res.asked == 4 and len(model.asked) == 4  # one request per labelled reply
    got = {(r.prolific_id, r.turn, r.iu): r.extractor_label for r in res.labels.itertuples()}
    assert got == {(p, t, iu): EXTRACTOR[(t, iu)] for p in PEOPLE for (t, iu) in PEOPLE[p]}  # the fixture's premise
    row = res.agreement.set_index(["task", "item_id"]).loc[("math", "all")]
    assert (row.n, row.n_replies) == (16, 4)
    assert row.kappa == pytest.approx(23 / 35)
    assert (row.tpr_well_explained, row.tnr_well_explained, row.tpr_shallow, row.tnr_not_mentioned) == (
        pytest.approx(5 / 6), pytest.approx(0.9), 0.0, 0.75)
    assert res.agreement.set_index(["task", "item_id"]).loc[("math", ITEM)].kappa == pytest.approx(23 / 35)
    # costed: tokens and the price per reply
    rep = pd.read_parquet(out / REPLIES_FILE)
    assert len(rep) == 4 and (rep.prompt_tokens > 0).all() and (rep.calls == 1).all()
    assert rep.cost_usd.tolist() == pytest.approx(((rep.prompt_tokens * 1.0 + rep.completion_tokens * 2.0) / 1e6).tolist())
    # resumed: nothing asked again, the same figures
    again = Counting()
    res2 = run_labels(human, out, again)
    assert again.asked == [] and res2.asked == 0
    assert res2.agreement.equals(res.agreement)


def test_a_broken_answer_is_named_left_out_and_asked_again(tmp_path):
    human = load_knowchat(write_folder(tmp_path / "h"))
    out = tmp_path / "out"
    broken = Counting(broken={"human/strategy/math/PB/1/demo_math_01#1:"})
    res = run_labels(human, out, broken)
    assert res.asked == 4
    err = res.replies[res.replies.error.notna()]
    assert len(err) == 1 and err.iloc[0].prolific_id == "PB" and "extractor_invalid_json" in err.iloc[0].error
    assert res.agreement.set_index("item_id").loc["all"].n == 12  # PB's first reply (4 labels) left out ...
    assert any("4 of 16 human labels left out" in n for n in res.notes)  # ... and said
    good = Counting()
    res2 = run_labels(human, out, good)
    assert len(good.asked) == 1 and good.asked[0].startswith("human/strategy/math/PB/1/")  # only the failed reply
    assert res2.agreement.set_index("item_id").loc["all"].kappa == pytest.approx(23 / 35)


@pytest.mark.parametrize("row, fragment", [
    (["PA", 1, 3, "IU1", "Shallow", ITEM], "reply 3 of session PA/1, which has 2 tutor replies"),
    (["PA", 1, 1, "IU9", "great", ITEM], "expected one of well_explained, shallow, not_mentioned, got 'great'"),
    (["PZ", 1, 1, "IU1", "Shallow", ITEM], "session PZ/1 has no conversation"),
    (["PA", 1, 1, "IU1", "Shallow", ITEM], "IU IU1 of reply 1 of session PA/1 is labelled twice"),
    (["PA", 1, 1, "IU8", "Shallow", None], "names 0 items; give the item in a column 'item id'"),
])
def test_bad_label_rows_are_errors_naming_the_row(tmp_path, row, fragment):
    folder = write_folder(tmp_path / "h", extra_rows=[row])
    with pytest.raises(KnowChatFormatError) as exc:
        load_knowchat(folder)
    assert fragment in str(exc.value) and "sheet 'IU Labels', row 18" in str(exc.value)


def test_an_iu_outside_the_graph_is_an_error_naming_the_row(tmp_path):
    human = load_knowchat(write_folder(tmp_path / "h", extra_rows=[["PA", 1, 1, "IU99", "Shallow", ITEM]]))
    with pytest.raises(KnowChatFormatError, match=r"row 18: IU 'IU99' is not in the graph of demo_math_01"):
        run_labels(human, tmp_path / "out", Counting())


def test_cli_extractor_agreement(tmp_path, capsys):
    from ray_knowsim.cli.main import main
    from tests.doubles.run_config import small_config, write_config

    cfg = write_config(tmp_path / "cfg", small_config())
    human, out = write_folder(tmp_path / "h"), tmp_path / "out"
    args = ["validate", "--human", str(human), "--extractor-agreement", "--config", str(cfg), "--out", str(out)]
    assert main(args) == 0
    cap = capsys.readouterr().out
    assert "4 replies (4 asked now, 0 resumed)" in cap and "math" in cap
    table = pd.read_parquet(out / "extractor_human_agreement.parquet")
    assert table.set_index("item_id").loc["all"].n == 16 and not math.isnan(table.set_index("item_id").loc["all"].kappa)
    assert (out / "extractor_human_labels.csv").is_file()
    assert main(args) == 0 and "0 asked now, 4 resumed" in capsys.readouterr().out
    assert main(["validate", "--human", str(human), "--extractor-agreement"]) == 2
    assert "needs --sim RUN_DIR or --config FILE" in capsys.readouterr().err


def test_no_labels_is_a_clear_error(tmp_path):
    folder = write_folder(tmp_path / "h")
    wb = openpyxl.load_workbook(folder / "math_strategy.xlsx")
    wb.remove(wb["IU Labels"])
    wb.save(folder / "math_strategy.xlsx")
    human = load_knowchat(folder)
    assert human.iu_labels == [] and human.reports[0].iu_labels is None
    with pytest.raises(KnowChatFormatError, match="no per-IU labels"):
        run_labels(human, tmp_path / "out", Counting())


def test_cli_reads_the_extractor_from_the_runs_recorded_config(tmp_path, capsys):
    """--sim RUN_DIR: the run's manifest names the config (items, graphs, extractor); output in RUN_DIR/validation."""
    from ray_knowsim.cli.main import main
    from tests.doubles.run_config import small_config

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({"config": small_config(), "base_dir": str(tmp_path)}))
    human = write_folder(tmp_path / "h")
    assert main(["validate", "--human", str(human), "--extractor-agreement", "--sim", str(run_dir)]) == 0
    table = pd.read_parquet(run_dir / "validation" / "extractor_human_agreement.parquet").set_index("item_id")
    assert table.loc["all"].kappa == pytest.approx(23 / 35)
    assert main(["validate", "--human", str(human), "--extractor-agreement", "--sim", str(run_dir), "--extractor", "nope"]) == 2
    assert "--extractor 'nope': neither a model key of the run" in capsys.readouterr().err
