"""The sweep folder's commit protocol, without Ray: a piece committed twice (same name, or an
overlapping piece of another layout) is read once; superseded files are collected; markers that
cannot be trusted stop the sweep with the file named; a worker that cannot see the folder refuses."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from ray_knowsim.cli.main import main
from ray_knowsim.sweep.commits import SweepCommitError, check_visible, collect_garbage, read_commits
from ray_knowsim.sweep.config import parse_sweep_config
from ray_knowsim.sweep.pieces import Piece
from ray_knowsim.sweep.rescore import prepare
from ray_knowsim.sweep.runner import finish, read_rows, run_sweep, score_piece
from tests.doubles.sweep_runs import run_dir_config

SPACE = {"grid": {"capacity_ratio": [0.4, 0.55, 0.7], "hinge": [True, False]}}
EXECUTION = {"conversations_per_block": 30, "settings_per_task": 2}


def quiet(_: str) -> None:
    pass


@pytest.fixture
def finished(run_dir, tmp_path):
    cfg = parse_sweep_config(run_dir_config(run_dir, tmp_path / "out", space=SPACE, execution=EXECUTION))
    result = run_sweep(cfg, use_ray=False, report=False, progress=quiet)
    return cfg, result


def test_a_piece_committed_twice_or_overlapped_by_another_layout_is_read_once(finished):
    cfg, result = finished
    out, plan = result.out_dir, result.plan
    rows_before = read_rows(out)
    agg_before = pd.read_parquet(out / "aggregates.parquet")
    assert len(rows_before) == len(plan.settings) * 54
    n_markers = len(read_commits(out).markers)

    prep = prepare(plan.block(0), plan.backend, resample=False)
    again = Piece(0, 0, 2)  # a retried task commits the same piece again: new files, the marker replaced
    old_files = next(m for m in read_commits(out).markers if m.piece == again).files()
    score_piece(prep, plan.settings_of(again), plan.init, again, str(out), plan.fingerprint)
    other = Piece(0, 1, 5)  # the same work cut another way (a resume on another cluster racing a straggler)
    score_piece(prep, plan.settings_of(other), plan.init, other, str(out), plan.fingerprint)

    commits = read_commits(out)
    assert len(commits.markers) == n_markers + 1
    assert all((out / f).is_file() for f in old_files.values())  # superseded, still on disk until collected
    tiles = sorted(r for m, ranges in commits.sources() if m.block == 0 for r in ranges)
    assert [s for a, b in tiles for s in range(a, b)] == list(range(len(plan.settings)))  # each setting from one file
    pd.testing.assert_frame_equal(rows_before, read_rows(out), check_exact=True)
    assert not read_rows(out).duplicated(["setting", "conversation"]).any()
    finish(plan)
    pd.testing.assert_frame_equal(agg_before, pd.read_parquet(out / "aggregates.parquet"), check_exact=True)

    assert collect_garbage(out, commits) == 2  # the superseded rows + partials of the re-committed piece
    assert not any((out / f).exists() for f in old_files.values())
    pd.testing.assert_frame_equal(rows_before, read_rows(out), check_exact=True)
    resumed = run_sweep(cfg, use_ray=False, report=False, progress=quiet)
    assert (resumed.pieces_run, resumed.pairs_run) == (0, 0)


def test_a_commit_overlapping_only_partly_supplies_the_rest(finished):
    _, result = finished
    out, plan = result.out_dir, result.plan
    before = read_rows(out)
    # remove the commits of block 1, settings 0..3, then commit settings 1..5 as one piece:
    # settings 0 of block 1 is now missing, 1..3 come from the new piece, 4..5 from both (read once)
    for m in read_commits(out).markers:
        if m.block == 1 and m.start < 4:
            (out / "committed" / f"{m.piece.name}.json").unlink()
    wide = Piece(1, 1, 6)
    score_piece(prepare(plan.block(1), plan.backend, resample=False), plan.settings_of(wide), plan.init, wide, str(out), plan.fingerprint)
    assert read_commits(out).covered()[1] == [(1, len(plan.settings))]
    got = read_rows(out)
    expected = before[~((before.setting == 0) & (before.conversation >= 30))].reset_index(drop=True)
    pd.testing.assert_frame_equal(expected, got, check_exact=True)


def test_markers_that_cannot_be_trusted_are_errors_naming_the_file(finished, tmp_path, capsys):
    cfg, result = finished
    out = result.out_dir
    victim = sorted((out / "committed").glob("*.json"))[0]
    good = victim.read_text()
    victim.write_text(good[: len(good) // 2])  # damaged
    with pytest.raises(SweepCommitError, match=victim.name):
        read_commits(out)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(run_dir_config(cfg.source.run_dir, out, space=SPACE, execution=EXECUTION)))
    assert main(["sweep", str(path), "--no-ray", "--no-report"]) == 2
    assert victim.name in capsys.readouterr().err
    foreign = json.loads(good) | {"fingerprint": "0" * 16}
    victim.write_text(json.dumps(foreign))
    with pytest.raises(SweepCommitError, match="belongs to another sweep"):
        read_commits(out)


def test_a_worker_that_cannot_see_the_folder_refuses_to_write(finished, tmp_path):
    _, result = finished
    plan = result.plan
    private = tmp_path / "not-shared"  # what a node without the shared mount would see
    with pytest.raises(SweepCommitError, match="every node mounts"):
        check_visible(private, plan.fingerprint)
    prep = prepare(plan.block(0), plan.backend, resample=False)
    with pytest.raises(SweepCommitError):
        score_piece(prep, plan.settings[:1], plan.init, Piece(0, 0, 1), str(private), plan.fingerprint)
    assert not private.exists()
