"""The one table writer (io/tables.py): the bytes pandas writes, each file replaced whole (a crash
at any file-system step leaves the old table or the new one, never a part: tests/doubles/crash.py),
fsynced before its rename and its folder after, no temporary file left behind."""

from __future__ import annotations

import io
import os

import pandas as pd
import pytest

from ray_knowsim.io.tables import write_table, write_tables
from tests.doubles.crash import copy, each_crash, steps

OLD = pd.DataFrame({"condition": ["a", "b"], "kg": [0.5, 0.25]})
NEW = pd.DataFrame({"condition": ["a", "b", "c"], "kg": [0.75, float("nan"), 1.0], "n": [3, 2, 1]})


def test_the_files_are_what_pandas_writes_and_nothing_else_stays(tmp_path):
    paths = write_tables({"level_means": NEW, "ranks": OLD}, tmp_path)
    assert [p.name for p in paths] == ["level_means.parquet", "level_means.csv", "ranks.parquet", "ranks.csv"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "level_means.parquet"), NEW)
    assert (tmp_path / "level_means.csv").read_text() == NEW.to_csv(index=False)
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO((tmp_path / "ranks.csv").read_text())), OLD)
    assert sorted(os.listdir(tmp_path)) == ["level_means.csv", "level_means.parquet", "ranks.csv", "ranks.parquet"]
    with pytest.raises(ValueError, match="table format 'xlsx'"):
        write_table(OLD, tmp_path, "x", formats=("xlsx",))
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]


def test_each_file_is_fsynced_before_its_rename_and_the_folder_after(tmp_path, monkeypatch):
    with steps(monkeypatch) as s:
        write_table(NEW, tmp_path, "t")
    for fmt in ("parquet", "csv"):
        final = str(tmp_path / f"t.{fmt}")
        rename = next(k for k, (op, p) in enumerate(s.trace) if op == "replace" and p.endswith(f"-> {final}"))
        staged = s.trace[rename][1].split(" -> ")[0]
        assert ("fsync", staged) in s.trace[:rename]
        assert ("fsync", str(tmp_path)) in s.trace[rename:]


def test_a_crash_at_any_step_leaves_the_old_or_the_new_table(tmp_path, monkeypatch):
    base = tmp_path / "base"
    write_table(OLD, base, "t")

    def check(root):
        for fmt, read in (("parquet", pd.read_parquet), ("csv", pd.read_csv)):
            got = read(root / f"t.{fmt}")
            assert got.equals(read_back(OLD, fmt)) or got.equals(read_back(NEW, fmt)), fmt

    def read_back(df, fmt):
        scratch = tmp_path / "scratch"
        write_table(df, scratch, "x", formats=(fmt,))
        return pd.read_parquet(scratch / "x.parquet") if fmt == "parquet" else pd.read_csv(scratch / "x.csv")

    assert each_crash(monkeypatch, lambda: copy(base, tmp_path / "w"), lambda root: write_table(NEW, root, "t"), check) >= 6


def test_arrow_tables_and_text_are_replaced_by_the_same_one_writer(tmp_path, monkeypatch):
    """atomic_write_parquet (a sweep's settings and aggregates) and atomic_write_text (manifests,
    markers) go through the table writer's one durable replacement (io/parquet.replace_durably):
    the staged file fsynced before its rename, the folder after, nothing left in the temp folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ray_knowsim.io.parquet import atomic_write_parquet, atomic_write_text

    table = pa.table({"setting": [0, 1], "kg": [0.5, 0.25]})
    tmp = tmp_path / ".tmp"
    for name, write in (("a.parquet", lambda p: atomic_write_parquet(table, p, tmp)),
                        ("b.json", lambda p: atomic_write_text(p, '{"x": 1}', tmp))):
        final = tmp_path / name
        with steps(monkeypatch) as s:
            write(final)
        rename = next(k for k, (op, p) in enumerate(s.trace) if op == "replace" and p.endswith(f"-> {final}"))
        staged = s.trace[rename][1].split(" -> ")[0]
        assert staged.startswith(str(tmp)) and ("fsync", staged) in s.trace[:rename]
        assert ("fsync", str(tmp_path)) in s.trace[rename:]
    assert pq.read_table(tmp_path / "a.parquet").equals(table) and (tmp_path / "b.json").read_text() == '{"x": 1}'
    assert list(tmp.iterdir()) == []
