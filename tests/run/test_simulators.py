"""``simulators:`` in a run config: one design under several simulator models in one command.
Each simulator is its own run (directory, manifest, hash, resume, audit), never one pooled run;
``ray-knowsim run`` then writes their agreement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ray_knowsim.config import ConfigError, parse_run_config
from ray_knowsim.plan.build import RunError
from ray_knowsim.run.fan_out import run
from tests.doubles.run_config import small_config

PLUGIN = "tests.plugins.faulty_simulator"
FAULTY_LEARNER = {"backend": "faulty", "plant": ["learner_claims_unaware"], "share": 0.5}
FAULTY_EXTRACTOR = {"backend": "faulty", "plant": ["extractor_labels_unmentioned"], "share": 0.5}


def config(**over) -> dict:
    cfg = small_config(plugins=[PLUGIN], models={"sim": {"backend": "offline"}, "other": {"backend": "offline", "price": {"input": 1, "output": 1}}},
                       levels=["novice", "intermediate"], conditions=[{"strategy": "adaptive"}, {"strategy": "minimal"}],
                       max_turns=2, engine={"shard_size": 8, "shard_fn": "ray_knowsim.sim.shard:run_shard"},
                       simulators=[{"name": "clean", "user_sim": "sim", "extractor": "sim"},
                                   {"name": "faulty", "user_sim": FAULTY_LEARNER, "extractor": FAULTY_EXTRACTOR}])
    cfg.update(over)
    return cfg


def test_each_simulator_is_its_own_config_whose_hash_ignores_the_others():
    cfg = parse_run_config(config())
    subs = dict(cfg.simulator_configs())
    assert list(subs) == ["clean", "faulty"]
    clean, faulty = subs["clean"], subs["faulty"]
    assert (clean.roles.user_sim.model, clean.roles.extractor.model) == ("sim", "sim")
    assert (faulty.roles.user_sim.model, faulty.roles.extractor.model) == ("faulty-user_sim", "faulty-extractor")
    assert faulty.models["faulty-extractor"].plant == ["extractor_labels_unmentioned"]
    assert clean.simulators is None and "simulators" not in clean.public_dict() and sorted(clean.models) == ["sim"]
    # the clean simulator's run is the run of the same config without the list: same hash, so the same resume
    plain = config()
    del plain["simulators"]
    plain["models"] = {"sim": plain["models"]["sim"]}
    assert clean.config_hash() == parse_run_config(plain).config_hash()
    # another simulator added later changes no existing simulator's run
    more = parse_run_config(config(simulators=[*config()["simulators"], {"name": "third", "user_sim": "other", "extractor": "other"}]))
    assert {n: c.config_hash() for n, c in more.simulator_configs()}["clean"] == clean.config_hash()
    assert dict(more.simulator_configs())["faulty"].config_hash() == faulty.config_hash()


@pytest.mark.parametrize("simulators, words", [
    ([{"name": "a", "user_sim": "sim", "extractor": "sim"}], "at least two"),
    ([{"name": "a", "user_sim": "sim", "extractor": "sim"}, {"name": "a", "user_sim": "sim", "extractor": "sim"}], "appears twice"),
    ([{"name": "a", "user_sim": "sim", "extractor": "sim"}, {"name": "b", "user_sim": "nope", "extractor": "sim"}], "simulators.1.user_sim: unknown model 'nope'"),
    ([{"name": "a", "user_sim": "sim", "extractor": "sim"}, {"name": "b c", "user_sim": "sim", "extractor": "sim"}], "simulators.1.name"),
])
def test_a_bad_simulators_list_is_refused_naming_the_entry(simulators, words):
    with pytest.raises(ConfigError, match=words):
        parse_run_config(config(simulators=simulators))


def test_the_engine_never_runs_a_config_with_simulators_as_one_run(tmp_path):
    with pytest.raises(RunError, match="simulator_configs"):
        run(parse_run_config(config()), output=tmp_path / "x", quiet=True)


def test_a_dry_run_estimates_each_simulator_in_its_own_directory(tmp_path, capsys):
    from ray_knowsim.cli.main import main as cli_main

    cfg_file = tmp_path / "design.yaml"
    cfg_file.write_text(yaml.safe_dump(config()))
    assert cli_main(["run", str(cfg_file), "-o", str(tmp_path / "out"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "simulator clean:" in printed and "simulator faulty:" in printed and printed.count("dry run t: 16 sessions") == 2
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["clean", "faulty"]
    assert all(sorted(p.name for p in (tmp_path / "out" / n).iterdir()) == ["estimate.json"] for n in ("clean", "faulty"))
    assert cli_main(["run", str(cfg_file), "-o", str(tmp_path / "p"), "--plan"]) == 2


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*.parquet")
            if "tables" not in p.parts and "agreement" not in p.parts}


@pytest.mark.usefixtures("ray_local")
@pytest.mark.slow  # two Ray-backed runs, then their rerun: ~30 s, the full suite
def test_run_makes_one_run_per_simulator_then_their_agreement_and_resumes(tmp_path, capsys):
    from ray_knowsim.cli.main import main as cli_main
    from ray_knowsim.io.rundir import open_run

    cfg_file = tmp_path / "design.yaml"
    cfg_file.write_text(yaml.safe_dump(config()))
    out = tmp_path / "out"
    assert cli_main(["run", str(cfg_file), "-o", str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    assert "simulator clean: learner sim, extractor sim" in printed and "agreement of 2 runs against clean" in printed
    for name, (learner, extractor) in {"clean": ("sim", "sim"), "faulty": ("faulty-user_sim", "faulty-extractor")}.items():
        manifest = json.loads((out / name / "manifest.json").read_text())
        assert "simulators" not in manifest["config"]
        assert (manifest["config"]["roles"]["user_sim"]["model"], manifest["config"]["roles"]["extractor"]["model"]) == (learner, extractor)
        assert open_run(out / name).sessions.count_rows() == 16  # its own 16 sessions: nothing pooled
    info = json.loads((out / "agreement" / "agreement.json").read_text())
    assert [r["label"] for r in info["runs"]] == ["clean", "faulty"] and info["reference"] == "clean"
    import pandas as pd

    audit = pd.read_csv(out / "agreement" / "audit.csv").set_index("run")["n_flagged"]
    assert audit["faulty"] > audit["clean"]
    # the same command again resumes every simulator's run: nothing is redone; --re-extract adds the
    # faulty extractor's labels of all the clean run's exchanges
    before = _files(out)
    assert cli_main(["run", str(cfg_file), "-o", str(out), "-q", "--re-extract"]) == 0
    assert _files(out) == before
    info = json.loads((out / "agreement" / "agreement.json").read_text())["re_extraction"]["faulty"]
    n_turns = open_run(out / "clean").turns.count_rows()
    assert info["extractor"] == "faulty-extractor" and info["asked"] == info["exchanges"] == n_turns
    table = pd.read_csv(out / "agreement" / "extractor_reextraction.csv").query("item_id == 'all'")
    assert table["tnr"].iloc[0] < 1.0 and table["n_labels"].iloc[0] > 0  # it labels untouched IUs well_explained
