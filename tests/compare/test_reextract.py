"""``agreement --re-extract``: another run's extractor labels ALL the reference's exchanges.

One offline reference run (local Ray, 12 sessions); two "runs" of the same design under other
extractors are its copy with another extractor in the recorded config: a clean offline one (it
must reproduce the reference's labels exactly: the same renderer, state, seed and request id the
simulation used) and a faulty one (tests/plugins/faulty_simulator.py) that relabels one
well_explained IU not_mentioned in a share of its answers. The planted flips, read from its log,
predict TPR, TNR and kappa exactly; a rerun asks nothing; a lost or failed answer is asked alone."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from ray_knowsim.compare.agreement import agreement
from ray_knowsim.config import parse_run_config
from ray_knowsim.run.fan_out import run
from ray_knowsim.io.rundir import open_run
from tests.doubles.run_config import small_config

PLUGIN = "tests.plugins.faulty_simulator"
PRICE = {"input": 2.0, "output": 8.0}
pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]  # two Ray-backed runs as a module fixture: the full suite


def _labels(signals: str) -> dict[str, str]:
    return {e["id"]: (e["teaching_quality"] if e["teaching_quality"] in ("shallow", "not_mentioned") else "well_explained")
            for e in json.loads(signals)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("reextract")
    cfg = small_config(plugins=[PLUGIN], conditions=[{"strategy": "adaptive"}], max_turns=3,
                       engine={"shard_size": 6, "shard_fn": "ray_knowsim.sim.shard:run_shard"})
    assert run(parse_run_config(cfg), output=root / "ref", quiet=True).n_failed == 0
    log = root / "plants"

    def copy(name: str, entry: dict) -> Path:  # the same design, another extractor model in the recorded config
        shutil.copytree(root / "ref", root / name)
        manifest = json.loads((root / name / "manifest.json").read_text())
        manifest["config"]["models"]["other"] = entry
        manifest["config"]["roles"]["extractor"] = "other"
        (root / name / "manifest.json").write_text(json.dumps(manifest))
        return root / name

    clean = copy("clean", {"backend": "offline", "price": PRICE})
    faulty = copy("faulty", {"backend": "faulty", "plant": ["extractor_ignores_covered"], "share": 0.4, "log": str(log),
                             "price": PRICE})
    turns = open_run(root / "ref").turns.read(["session_id", "turn", "signals_json"]).to_pylist()
    reference = {(r["session_id"], r["turn"]): _labels(r["signals_json"]) for r in turns}
    return {"ref": root / "ref", "clean": clean, "faulty": faulty, "log": log, "reference": reference, "root": root}


def _plants(log: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(log.glob("*.jsonl")) for line in f.read_text().splitlines()]


def _kappa(a: list[str], b: list[str]) -> float:
    n = len(a)
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(a) | set(b)) / n**2
    return (po - pe) / (1 - pe)


def test_the_planted_flips_show_in_kappa_and_tpr_and_a_rerun_asks_nothing(runs, tmp_path):
    out = tmp_path / "agree"
    result = agreement([runs["ref"], runs["clean"], runs["faulty"]], out, reference=runs["ref"], re_extract=True)
    table = result.tables["extractor_reextraction"]
    info = json.loads((out / "agreement.json").read_text())["re_extraction"]
    reference = runs["reference"]
    n_exchanges, n_labels = len(reference), sum(len(v) for v in reference.values())
    assert n_exchanges >= 24  # every exchange of the reference, not only those another run shares word for word
    task = table[table["item_id"] == "all"].set_index("run")

    # the clean extractor, asked as the simulation asked, reproduces every recorded label
    clean = task.loc["clean"]
    assert clean["n_labels"] == n_labels and clean["kappa"] == 1.0 and clean["agreement"] == 1.0
    assert info["clean"]["asked"] == n_exchanges and info["clean"]["errors"] == 0
    answers = pd.read_parquet(out / "re_extraction" / "clean" / "extractor_answers.parquet")
    assert len(answers) == n_exchanges and answers["calls"].sum() == info["clean"]["calls"] >= n_exchanges
    # ... with the very requests the run sent: per session the tokens its extractor spent in the run
    spent = open_run(runs["ref"]).sessions.read(["session_id", "prompt_tokens_extractor", "completion_tokens_extractor"]).to_pandas()
    mine = answers.groupby("session_id")[["prompt_tokens", "completion_tokens"]].sum()
    spent = spent.set_index("session_id").loc[mine.index]
    assert (mine["prompt_tokens"] == spent["prompt_tokens_extractor"]).all()
    assert (mine["completion_tokens"] == spent["completion_tokens_extractor"]).all()
    expected_cost = (answers["prompt_tokens"].sum() * 2.0 + answers["completion_tokens"].sum() * 8.0) / 1e6
    assert info["clean"]["cost_usd"] == pytest.approx(expected_cost) and expected_cost > 0

    # the faulty one: each logged plant turns one reference well_explained into not_mentioned
    plants = _plants(runs["log"])
    flipped = {(p["session_id"], p["turn"], p["iu"]) for p in plants}
    assert len(flipped) == len(plants) > 0
    assert all(reference[(s, t)][iu] == "well_explained" for s, t, iu in flipped)
    planted_share = len({(s, t) for s, t, _ in flipped}) / n_exchanges
    assert 0.15 <= planted_share <= 0.6  # the share asked for (0.4) of the exchanges with a well_explained IU
    ref_all, mine_all = [], []
    for (sid, turn), labs in sorted(reference.items()):
        for iu, lab in sorted(labs.items()):
            ref_all.append(lab)
            mine_all.append("not_mentioned" if (sid, turn, iu) in flipped else lab)
    positives = ref_all.count("well_explained")
    faulty = task.loc["faulty"]
    assert faulty["n_labels"] == n_labels and faulty["positives"] == positives
    assert faulty["tpr"] == pytest.approx(1 - len(flipped) / positives) and faulty["tnr"] == 1.0
    assert faulty["kappa"] == pytest.approx(_kappa(mine_all, ref_all)) and faulty["kappa"] < 1.0
    per_iu = table[(table["run"] == "faulty") & (table["iu"] != "all")]
    assert per_iu["n_labels"].sum() == n_labels and (per_iu["tnr"].dropna() == 1.0).all()
    assert any("re-extraction by faulty" in n for n in result.notes)

    # a rerun asks nothing and plants nothing more: the answers were kept
    again = agreement([runs["ref"], runs["clean"], runs["faulty"]], out, reference=runs["ref"], re_extract=True)
    info2 = json.loads((out / "agreement.json").read_text())["re_extraction"]
    assert info2["clean"]["asked"] == info2["faulty"]["asked"] == 0 and info2["faulty"]["resumed"] == n_exchanges
    assert len(_plants(runs["log"])) == len(plants)
    pd.testing.assert_frame_equal(again.tables["extractor_reextraction"], table)

    # an interrupted pass (answers lost) and a failed answer: only those are asked again
    path = out / "re_extraction" / "faulty" / "extractor_answers.parquet"
    kept = pd.read_parquet(path)
    kept = kept.iloc[5:].copy()
    kept.loc[kept.index[0], "error"] = "extractor_invalid_json: planted"
    kept.to_parquet(path, index=False)
    third = agreement([runs["ref"], runs["faulty"]], out, reference=runs["ref"], re_extract=True)
    info3 = json.loads((out / "agreement.json").read_text())["re_extraction"]
    assert info3["faulty"]["asked"] == 6 and info3["faulty"]["exchanges"] == n_exchanges
    assert third.tables["extractor_reextraction"].query("item_id == 'all'")["tpr"].iloc[0] == pytest.approx(faulty["tpr"])


def test_each_exchange_is_shown_the_state_the_learner_held_before_it(runs):
    """The offline extractor's labels do not read the state, so the kappa above cannot see it: checked here."""
    from ray_knowsim.compare.reextract import read_reference, reference_exchanges
    from ray_knowsim.run.extractor import recorded_config
    from ray_knowsim.plan.sessions import load_inputs
    from ray_knowsim.schema.items import item_key

    inputs = load_inputs(recorded_config(runs["ref"]))
    items = {item_key(task, it.id): it for task, its in inputs.items.items() for it in its}
    exchanges, _ = reference_exchanges(read_reference(runs["ref"], items), inputs.graphs)
    reader = open_run(runs["ref"])
    initial = {r["session_id"]: r["initial_states"] for r in reader.sessions.read(["session_id", "initial_states"]).to_pylist()}
    after = {(r["session_id"], r["turn"]): (r["states"], r["user_message"], r["assistant_message"])
             for r in reader.turns.read(["session_id", "turn", "states", "user_message", "assistant_message"]).to_pylist()}
    assert len(exchanges) == len(after)
    for ex in exchanges:
        sid, turn = ex.key
        assert list(ex.states) == list(initial[sid] if turn == 1 else after[(sid, turn - 1)][0])
        assert (ex.user, ex.reply) == after[(sid, turn)][1:] and len(ex.prior) == 2 * (turn - 1)
        assert ex.request_id == f"{sid}#{turn}:extractor"
    assert any(ex.key[1] > 1 and list(ex.states) != list(initial[ex.key[0]]) for ex in exchanges)


def test_the_command_prints_the_re_extraction_and_refuses_a_run_without_a_config(runs, tmp_path, capsys):
    from ray_knowsim.cli.main import main as cli_main

    code = cli_main(["agreement", str(runs["ref"]), str(runs["clean"]), "--re-extract", "--out", str(tmp_path / "a")])
    printed = capsys.readouterr().out
    assert code == 0 and "on all the reference's exchanges: kappa 1.00" in printed and "re-extraction by clean" in printed
    bare = tmp_path / "bare"
    shutil.copytree(runs["clean"], bare)
    manifest = json.loads((bare / "manifest.json").read_text())
    manifest["config"]["roles"]["extractor"] = "absent"
    (bare / "manifest.json").write_text(json.dumps(manifest))
    assert cli_main(["agreement", str(runs["ref"]), str(bare), "--re-extract", "--out", str(tmp_path / "b")]) == 2
    assert "extractor" in capsys.readouterr().err
