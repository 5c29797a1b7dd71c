"""`ray-knowsim run` says what failed: its final line counts failed sessions by error kind per
condition, its tables hold them with their reasons (and truncations per role, sanity warnings),
and a simulator that does not work is named on the final line."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from ray_knowsim.cli.main import main as cli
from ray_knowsim.tables.outcome_tables import final_line_parts, sanity_table
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.tables.sanity import check_run
from tests.doubles.broken import HTTP_400_DETAIL, broken_simulator
from tests.doubles.run_config import small_config, write_config
from tests.doubles.rundirs import committed_run

FAILS = {
    "math/demo_math_01/novice/sim:adaptive/0": f"extractor_http_400: {HTTP_400_DETAIL}",
    "math/demo_math_02/advanced/sim:adaptive/0": f"extractor_http_400: {HTTP_400_DETAIL}",
    "math/demo_math_03/novice/sim:socratic/0": "extractor_http_400",
    "math/demo_math_04/novice/sim:socratic/0": "assistant_truncated: the answer was cut at max_tokens=64",
}


#: a line Ray's log monitor forwards from a raylet or a worker into the driver's output (on a
#: loaded machine, e.g. "(raylet) WARNING: 8 PYTHON worker processes have been started ...")
_RAY_FORWARDED = re.compile(r"^(\x1b\[[0-9;]*m)*\((raylet|pid=|[\w.:-]+ pid=)")


def own_lines(out: str) -> list[str]:
    """The command's own lines of ``out``, without what Ray forwarded into it."""
    return [line for line in out.strip().splitlines() if not _RAY_FORWARDED.match(line)]


@pytest.mark.slow
@pytest.mark.usefixtures("ray_local")
def test_final_line_and_tables_count_failures_by_kind_per_condition(tmp_path, capsys):
    path = write_config(tmp_path, small_config(engine={"shard_fn_options": {"fail_sessions": FAILS}}))
    out = tmp_path / "run"
    assert cli(["run", str(path), "-o", str(out), "--quiet"]) == 1
    line = own_lines(capsys.readouterr().out)[0]
    assert "failed by kind: extractor_http_400 3 (sim:adaptive 2, sim:socratic 1); assistant_truncated 1 (sim:socratic 1)" in line, line
    failures = pd.read_csv(out / "tables" / "failures.csv")
    assert failures.groupby("error_kind")["n_failed"].sum().to_dict() == {"extractor_http_400": 3, "assistant_truncated": 1}
    adaptive = failures[failures.condition == "sim:adaptive"]
    assert set(adaptive["example"]) == {HTTP_400_DETAIL} and set(adaptive["failure_class"]) == {"infra"}
    rows = RunReader.open(out).sessions.read(["session_id", "error", "error_detail"]).to_pylist()
    details = {r["session_id"]: (r["error"], r["error_detail"]) for r in rows if r["error"]}
    assert details["math/demo_math_01/novice/sim:adaptive/0"] == ("extractor_http_400", HTTP_400_DETAIL)
    assert details["math/demo_math_03/novice/sim:socratic/0"] == ("extractor_http_400", None)
    assert (out / "tables" / "truncations.csv").is_file() and (out / "tables" / "sanity.csv").is_file()


def test_a_simulator_that_does_not_work_is_named_on_the_final_line(tmp_path):
    run = committed_run(tmp_path, "broken", n_sessions=24, max_turns=3, seed=3, edit=broken_simulator)
    parts = final_line_parts({"sanity": sanity_table(check_run(RunReader.open(run)))})
    assert parts == ["SIMULATOR NOT WORKING? extractor: one label for every IU in 72 of 72 answers; "
                     "no state moved in any of 3 conditions; judge: IQ 1 for all 24"]
    healthy = committed_run(tmp_path, "healthy", n_sessions=24, max_turns=3, seed=3)
    assert final_line_parts({"sanity": sanity_table(check_run(RunReader.open(healthy))), "failures": None}) == []


@pytest.mark.usefixtures("ray_local")
def test_the_terminal_result_of_an_offline_run_fits_100_columns_says_offline_and_what_next(tmp_path, capsys, monkeypatch):
    """Issue 51: what `ray-knowsim run` prints at the end of a small offline run -- every line at
    most 100 columns, the means per condition and level, the offline double's caveat (the report's
    text) and a closing ``next:`` line with the run directory; the report is named for the rest."""
    from ray_knowsim.report.banner import manifest_banner
    from ray_knowsim.report.run_result import shown_dir

    path = write_config(tmp_path, small_config(max_turns=2))
    out = tmp_path / "run"
    # from the folder above the run, as a user runs it (the next: line names "run"): a command
    # holding a run directory longer than the line cannot be folded, and pytest's own temp
    # paths (longer under pytest-xdist) would make that case out of this one
    monkeypatch.chdir(tmp_path)
    assert cli(["run", str(path), "-o", "run"]) == 0
    lines = own_lines(capsys.readouterr().out)
    assert all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]
    start = lines.index("math: 4 items")
    assert lines[start + 2] == "sim:adaptive" and lines[start + 3].startswith("  novice ") and "±" in lines[start + 3]
    banner = manifest_banner(RunReader.open(out).manifest)
    assert banner and "OFFLINE" in banner
    caveat = next(k for k, line in enumerate(lines) if line.startswith("NOT A REAL-MODEL MEASUREMENT."))
    assert " ".join(lines[caveat: lines.index("", caveat)]) == f"NOT A REAL-MODEL MEASUREMENT. {banner}"
    assert any(line.startswith("more in the report:") for line in lines) and "verdicts:" in lines
    assert lines[-1] == f"next: ray-knowsim view {shown_dir(out)}   |   ray-knowsim report {shown_dir(out)}" \
        or lines[-2:] == [f"next: ray-knowsim view {shown_dir(out)}", f"      ray-knowsim report {shown_dir(out)}"]
