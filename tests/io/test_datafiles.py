"""A data file's bytes: made in Arrow's memory and written in one call, they are the bytes the
writers give when they write to the file themselves, in both formats."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from ray_knowsim.io.datafiles import read_table, write_table


def _table() -> pa.Table:
    n = 40
    return pa.table({"session_id": [f"s{k % 7}" for k in range(n)], "turn": list(range(n)),
                     "states": [[k % 4, 3] for k in range(n)], "kg": [k / 3 for k in range(n)],
                     "note": [None if k % 5 else "é\"\n" for k in range(n)]})


class _CountingFile(io.BytesIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, data) -> int:  # noqa: ANN001
        self.writes += 1
        return super().write(data)


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_a_data_file_is_the_writers_own_bytes_in_one_write(fmt, tmp_path):
    table = _table()
    direct = io.BytesIO()
    if fmt == "parquet":
        pq.write_table(table, direct, compression="zstd")
    else:
        with ipc.new_file(direct, table.schema) as writer:
            writer.write_table(table)
    ours = _CountingFile()
    write_table(table, ours, fmt)
    assert ours.getvalue() == direct.getvalue()
    assert ours.writes == 1
    path = tmp_path / f"t.{fmt}"
    path.write_bytes(ours.getvalue())
    assert read_table(path).equals(table)


def test_an_unknown_format_is_refused_before_anything_is_written():
    fh = _CountingFile()
    with pytest.raises(ValueError, match="unknown data file format 'csv'"):
        write_table(_table(), fh, "csv")  # type: ignore[arg-type]
    assert fh.writes == 0
