"""A run page leads with its results: the level-marginalised and per-level tables, metrics first in
the mean rank's order, each mean with its 95 % item-clustered interval, n and the failed sessions
beside it; the raw ``tables/`` stay one click away. The numbers are checked against the run's own
table builder (:mod:`ray_knowsim.stats.tables`, which writes ``tables/``) fed from the committed
rows by pandas, not against the code that renders them."""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest

from ray_knowsim.io.rundir import RunReader
from ray_knowsim.compare.sentences import interval_text
from ray_knowsim.score.store import RunScores
from ray_knowsim.stats.tables import level_table, marginal_table
from tests.doubles.viewer_http import get, ids

METRICS = ("kg", "dc", "co", "iq")  # the mean rank's metrics, in its order
DECIMALS = {"kg": 3, "dc": 3, "co": 3, "iq": 2}


@pytest.fixture(scope="module")
def page(viewer, folders):
    base, _ = viewer
    _, _, body = get(base.rstrip("/") + ids(base)["runs/complete"])
    return body


@pytest.fixture(scope="module")
def rows(folders):
    """The committed session rows of runs/complete with the judges' scores joined."""
    reader = RunReader.open(folders["runs"] / "complete")
    table = reader.sessions.read()
    scores = RunScores.load(reader.root, reader)
    return (scores.attach(table) if scores.sets else table).to_pandas()


def item_sums(rows: pd.DataFrame) -> pd.DataFrame:
    """The per-item sums the run's reduction hands ``stats.tables``, computed here with pandas."""
    ok = rows[rows["status"] == "ok"]
    keys = ["task", "condition", "knowledge_level", "item_id"]
    out = ok[keys].drop_duplicates().set_index(keys)
    for m in METRICS:
        g = ok.groupby(keys)[m]
        out[f"{m}__n"] = g.count()
        out[f"{m}__s1"] = g.sum()
        out[f"{m}__s2"] = g.apply(lambda v: float((v.dropna() ** 2).sum()))
    return out.reset_index()


def section(body: str, ident: str) -> str:
    return re.search(rf'<section id="{ident}">(.*?)</section>', body, re.S).group(1)


def cell(block: str, metric: str, condition: str, level: str | None = None) -> tuple[float, str]:
    """(data-value, the interval text below the mean) of one metric cell."""
    lv = rf' data-level="{re.escape(html.escape(level, quote=True))}"' if level else ""
    pattern = (rf'<td class="[^"]*" data-metric="{metric}" data-condition="{re.escape(html.escape(condition, quote=True))}"{lv}'
               rf'[^>]*data-value="([^"]+)"[^>]*><span class="mean">[^<]*</span>(?:<span class="ci">([^<]*)</span>)?')
    found = re.search(pattern, block)
    assert found, (metric, condition, level)
    return float(found.group(1)), found.group(2) or ""


def test_the_page_leads_with_results_and_keeps_the_raw_tables_a_click_away(page):
    order = [page.index(f'id="{ident}"') for ident in ("summary", "marginal", "per-level", "failures", "browse", "tables")]
    assert order[:3] == sorted(order[:3]) and order[2] < min(order[3:]), order
    raw = section(page, "tables")
    assert "<details>" in raw and "<details open" not in raw  # every raw table folded
    head = re.search(r'<table class="results" id="marginal-table"><thead>(.*?)</thead>', page, re.S).group(1)
    labels = [re.sub(r"\s*[↑↓]$", "", h) for h in re.findall(r'<th class="num" title="[^"]*">([^<]+)</th>', head)]
    assert labels == ["KG", "DC", "CO", "IQ"]


def test_marginal_means_and_intervals_are_the_run_tables(page, rows):
    want = marginal_table(item_sums(rows), METRICS).set_index("condition")
    block = section(page, "marginal")
    assert want.index.size >= 3
    for cond, r in want.iterrows():
        for m in METRICS:
            value, ci = cell(block, m, cond)
            assert value == pytest.approx(r[m], rel=1e-12, abs=1e-12), (cond, m)
            assert ci == html.escape(interval_text(r[f"{m}_ci_low"], r[f"{m}_ci_high"], DECIMALS[m], "every item has the same mean"),
                                     quote=True), (cond, m)


def test_per_level_cells_n_and_failed_sessions(page, rows):
    want = level_table(item_sums(rows), METRICS).set_index(["condition", "knowledge_level"])
    block = section(page, "per-level")
    for (cond, level), r in want.iterrows():
        for m in METRICS:
            value, ci = cell(block, m, cond, level)
            assert value == pytest.approx(r[m], rel=1e-12, abs=1e-12), (cond, level, m)
            if r[f"{m}_items"] >= 2:
                assert ci == html.escape(interval_text(r[f"{m}_ci_low"], r[f"{m}_ci_high"], DECIMALS[m], "every item has the same mean"),
                                         quote=True), (cond, level, m)
    # n beside each condition of the marginal: its ok sessions, and its failed ones said beside it
    marginal = section(page, "marginal")
    counts = rows.groupby("condition")["status"].agg(ok=lambda s: int((s == "ok").sum()), failed=lambda s: int((s != "ok").sum()))
    assert counts["failed"].sum() > 0  # the fixture has failures: the note is exercised
    for cond, r in counts.iterrows():
        row = re.search(rf'<td class="cond">{re.escape(html.escape(cond, quote=True))}(?:\s*<span[^>]*>[^<]*</span>)?</td>'
                        r'<td class="num n">([\d,]+)(.*?)</td>', marginal, re.S)
        assert row and int(row.group(1).replace(",", "")) == r["ok"], cond
        failed = re.search(r'data-failed="(\d+)"', row.group(2))
        assert (int(failed.group(1)) if failed else 0) == r["failed"], cond
