"""The report never pools tasks: one section per task, each with its own tables and charts; and a
banner when the numbers came from the offline model."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest
import pyarrow.parquet as pq

from ray_knowsim.report.build import ReportOptions, build_report


def two_task_run(small_run, tmp_path):
    """The synthetic run with its even-numbered files relabelled as a second task."""
    run_dir = tmp_path / "two_tasks"
    shutil.copytree(small_run.run_dir, run_dir)
    for k, f in enumerate(sorted((run_dir / "sessions").glob("*.parquet"))):
        t = pq.read_table(f)
        if k % 2 == 0:
            i = t.column_names.index("task")
            t = t.set_column(i, "task", pa.array(["expertqa"] * t.num_rows))
            pq.write_table(t, f)
    return run_dir


def test_each_task_gets_its_own_section_and_tables(small_run, tmp_path):
    run_dir = two_task_run(small_run, tmp_path)
    result = build_report(run_dir, tmp_path / "out", ReportOptions(sample=2))
    sections = result.content.sections
    assert [s.task for s in sections] == ["expertqa", "synthetic"]
    sessions = pq.read_table(run_dir / "sessions").to_pandas()
    for s in sections:
        mine = sessions[(sessions["task"] == s.task) & (sessions["status"] == "ok")]
        assert sum(r.n for r in s.marginal) > 0
        # each section's counts come from its own task's sessions only
        for block in s.per_level:
            for row in block.rows:
                n = len(mine[(mine["knowledge_level"] == block.level) & (mine["condition"] == row.condition)])
                assert row.n == n
    html = result.html_path.read_text()
    assert 'id="task-expertqa"' in html and 'id="task-synthetic"' in html
    assert html.count('id="marginal-table-') == 2 and 'id="marginal-table"' not in html
    md = result.markdown_path.read_text()
    assert "## Task: expertqa" in md and "## Task: synthetic" in md


def test_a_single_task_run_keeps_one_plain_section(small_report):
    single, _ = small_report
    assert len(single.content.sections) == 1
    assert 'id="marginal-table"' in single.html_path.read_text()


def test_the_offline_banner_follows_the_manifest(small_run, tmp_path):
    run_dir = tmp_path / "offline"
    shutil.copytree(small_run.run_dir, run_dir)
    plain = build_report(run_dir, tmp_path / "plain", ReportOptions(sample=0))
    assert plain.content.banner is None and 'id="offline-banner"' not in plain.html_path.read_text()
    (run_dir / "manifest.json").write_text(json.dumps({"backends": {"user_sim": "offline", "assistant:a": "http"}, "test_doubles": ["user_sim"]}))
    flagged = build_report(run_dir, tmp_path / "flagged", ReportOptions(sample=0))
    assert "OFFLINE model (roles: user_sim)" in flagged.content.banner
    assert 'id="offline-banner"' in flagged.html_path.read_text()
    assert "**Not a real-model measurement.** These results come from the OFFLINE model" in flagged.markdown_path.read_text()


def test_a_replaced_shard_function_is_named_in_the_banner(tmp_path):
    from ray_knowsim.report.build import offline_banner

    (tmp_path / "manifest.json").write_text(json.dumps({"test_doubles": [], "replaced_shard_fn": "tests.doubles.standin:run_shard"}))
    banner = offline_banner(tmp_path)
    assert "engine.shard_fn = tests.doubles.standin:run_shard" in banner and "OFFLINE" not in banner
    (tmp_path / "manifest.json").write_text(json.dumps({"test_doubles": [], "replaced_shard_fn": None}))
    assert offline_banner(tmp_path) is None


def test_older_manifests_are_read_from_their_config(tmp_path, small_run):
    from ray_knowsim.report.build import offline_banner

    cfg = {"models": {"o": {"backend": "offline"}, "h": {"backend": "http"}},
           "roles": {"user_sim": "o", "extractor": {"model": "h"}, "assistant": {"model": "h"}}, "conditions": [{}]}
    (tmp_path / "manifest.json").write_text(json.dumps({"config": cfg}))
    assert "(roles: user_sim)" in offline_banner(tmp_path)


def test_a_run_compare_cannot_read_gets_a_section_saying_why(small_run, tmp_path, caplog):
    from ray_knowsim.report.decisions import decision_sections

    run_dir = tmp_path / "no_manifest"
    shutil.copytree(small_run.run_dir, run_dir)
    (run_dir / "manifest.json").unlink(missing_ok=True)  # compare needs the manifest (the run's identity)
    with caplog.at_level("WARNING", logger="ray_knowsim.report.decisions"):
        html_parts, md, _ = decision_sections(run_dir)
    why = "not computed: compare cannot read this run (RunDirError"
    assert any(why in part for part in html_parts) and any(why in line for line in md)
    assert any(why in r.getMessage() for r in caplog.records)
    assert any('id="cost"' in part for part in html_parts)  # the rest of the report is still there


def test_task_sections_match_a_filtered_read_when_tasks_mix_within_a_file(small_run, tmp_path):
    """The per-task summaries are built in the run's one pass (rows routed by task); they equal a
    summary of a read filtered to the task, also when one batch holds rows of two tasks."""
    import pyarrow.compute as pc

    from ray_knowsim.io.rundir import open_run
    from ray_knowsim.report.aggregate import RunSummary
    from ray_knowsim.score.store import RunScores

    run_dir = tmp_path / "mixed"
    shutil.copytree(small_run.run_dir, run_dir)
    for f in sorted((run_dir / "sessions").glob("*.parquet")):
        t = pq.read_table(f)
        i = t.column_names.index("task")
        t = t.set_column(i, "task", pa.array([("expertqa" if k % 3 == 0 else "synthetic") for k in range(t.num_rows)]))
        pq.write_table(t, f)
    result = build_report(run_dir, tmp_path / "out", ReportOptions(sample=0))
    assert [s.task for s in result.content.sections] == ["expertqa", "synthetic"]
    run = open_run(run_dir)
    scores = RunScores.load(run.root, run)
    for s in result.content.sections:
        want = RunSummary(s.summary.metric_columns)
        for batch in run.sessions.scan(want.columns(), pc.field("task") == s.task):
            if batch.num_rows:
                want.add(scores.attach(batch) if scores.sets else batch)
        assert s.summary.rows == want.rows and s.summary.status == want.status
        assert s.summary.failure_modes == want.failure_modes and s.summary.early_stops == want.early_stops
        for (c, lv, col), items in want.moments.items():
            got = s.summary.moments[(c, lv, col)]
            assert list(got) == list(items)
            for it, m in items.items():
                assert got[it].n == m.n and got[it].mean == pytest.approx(m.mean, nan_ok=True)
