"""A decision never contradicts the table beside it (issue 28), end to end on a planted population.

The population: two conditions, 200 items, one trial per (item, level). On KG condition A's item
mean is B's + 1 on 65 % of the items and B's - 3 on the other 35 %: A wins most items (the exact
sign test says A is better, at every level and over all levels), while B has the higher MEAN
(by 0.4). Every other metric is the same for both on every item. So the paper's mean rank (ranks
of means) puts B first, and every verdict puts A first.

What a person reads is checked, not the code that builds it: the report's HTML and Markdown, what
``compare`` writes (leaderboard, compare.json, leaderboard.html) and the viewer's run and
comparison pages. Everywhere: A's position on KG is 1 and B's 2, the ★ is A's alone, no table
that orders conditions puts B above A -- except the paper's mean rank, which must sit in its own
section under its label (and does put B first: the test would see an order of means anywhere else).
"""

from __future__ import annotations

import html
import json
import re
import threading

import pandas as pd
import pyarrow as pa
import pytest

from ray_knowsim.stats.ranks import PAPER_MEAN_RANK_LABEL, PAPER_MEAN_RANK_NOTE
from tests.doubles.rundirs import committed_run
from tests.doubles.viewer_http import get

N_ITEMS = 200
WIN_SHARE = 0.65
A, B = "tutor-a", "tutor-b"
LEVELS = ("novice", "intermediate", "advanced")
#: every compared metric but KG: one value for every session (all items tie)
FLAT = {"nkg": 0.3, "dc": 0.5, "ic": 0.4, "co": 0.2, "po": 0.1, "engagement": 0.6, "iq": 6.0}


def planted(sessions: pa.Table, turns: pa.Table | None) -> tuple[pa.Table, pa.Table | None]:
    """Session i of the synthetic writer is cell i % 6 (level, condition) and its (i // 6)-th
    session: that is item i // 6, so every item is matched at every level."""
    n = sessions.num_rows

    def put(table: pa.Table, name: str, values: list) -> pa.Table:
        return table.set_column(table.schema.get_field_index(name), name, pa.array(values, table.schema.field(name).type))

    item = [k // 6 for k in range(n)]
    conds = sessions.column("condition").to_pylist()
    diff = [1.0 if j < WIN_SHARE * N_ITEMS else -3.0 for j in item]
    kg = [5.0 + (d if c == A else 0.0) for c, d in zip(conds, diff)]
    sessions = put(sessions, "item_id", [f"it{j:03d}" for j in item])
    sessions = put(put(put(sessions, "kg", kg), "initial_states", [[0]] * n), "trial", [0] * n)
    sessions = put(sessions, "status", ["ok"] * n)
    for name, value in FLAT.items():
        sessions = put(sessions, name, [value] * n)
    return sessions, turns


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """The run, its report, its comparison and the viewer serving both (the viewer's pages fetched)."""
    from ray_knowsim.compare.pipeline import compare_runs
    from ray_knowsim.report.build import ReportOptions, build_report
    from ray_knowsim.view.data import Files
    from ray_knowsim.view.discover import discover
    from ray_knowsim.view.routes import ViewState
    from ray_knowsim.view.server import serve

    root = tmp_path_factory.mktemp("consistency")
    run = committed_run(root / "runs", "planted", n_sessions=N_ITEMS * 6, max_turns=2, seed=3, edit=planted,
                        conditions={A: (2.5, 0.75, 0.8), B: (2.5, 0.75, 0.8)})
    report = build_report(run, root / "report", ReportOptions(sample=0))
    (run / "tables").mkdir()  # the run's tables/ranks as the reduction writes it: the paper's mean rank, B first
    pd.DataFrame({"task": ["math"] * 2, "scope": ["marginal"] * 2, "condition": [B, A], "rank_kg": [1.0, 2.0],
                  "mean_rank": [1.0, 1.25]}).to_parquet(run / "tables" / "ranks.parquet", index=False)
    compare_runs([run], root / "cmp")
    state = ViewState(Files([root]))
    ready, started, stop = [], threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(state, "127.0.0.1", 0, lambda u: (ready.append(u), started.set()), stop), daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        ids = {en.path.name: en.id for en in discover(state.files)}
        _, _, run_page = get(f"{ready[0]}run/{ids['planted']}")
        _, _, compare_page = get(f"{ready[0]}compare/{ids['cmp']}")
    finally:
        stop.set()
        thread.join(10)
    return {"run": run, "report": report, "cmp": root / "cmp", "run_page": run_page, "compare_page": compare_page}


def _without_paper_rank(page: str) -> str:
    """The page less the paper's mean rank (its section, or its folded block): the one place an
    order of means may stand, under its label."""
    page = re.sub(r'<section id="paper-rank[^"]*">.*?</section>', "", page, flags=re.S)
    return re.sub(r'<details class="paper-rank".*?</details>', "", page, flags=re.S)


def _row_orders(page: str) -> list[list[str]]:
    """Per table, its conditions in row order (a row names its condition in a ``cond`` cell or a
    ``data-condition`` on the row)."""
    out = []
    for table in re.findall(r"<table.*?</table>", page, re.S):
        names = []
        for row in re.findall(r"<tr[^>]*>.*?</tr>", table, re.S):
            m = re.search(r'<tr[^>]*data-condition="([^"]+)"', row) or re.search(r'<td class="cond">([^<]+)', row)
            if m:
                names.append(html.unescape(m.group(1)).strip())
        names = [c for c in dict.fromkeys(names) if c in (A, B)]
        if len(names) == 2:
            out.append(names)
    return out


def test_the_population_sets_the_mean_against_the_win_rate(outputs):
    """The premise: the sign test says A, the means say B (else the test below proves nothing)."""
    paired = pd.read_parquet(outputs["cmp"] / "paired.parquet")
    kg = paired[paired["metric"] == "kg"].set_index("knowledge_level")
    for level in (*LEVELS, "all"):
        r = kg.loc[level]
        assert r["significant"] and r["better"] == A
        assert (r["wins"], r["losses"], r["ties"]) == ((130, 70, 0) if r["condition_a"] == A else (70, 130, 0))
        assert (r["mean_diff"] < 0) == (r["condition_a"] == A)  # A's mean is lower
    assert not paired[paired["metric"] != "kg"]["significant"].any()
    board = pd.read_parquet(outputs["cmp"] / "leaderboard.parquet").drop_duplicates("condition").set_index("condition")
    assert board.loc[B, "mean_rank"] < board.loc[A, "mean_rank"]  # the paper's figure favours B


def test_the_report_page_never_orders_or_stars_against_the_verdict(outputs):
    page = outputs["report"].html_path.read_text()
    assert re.search(rf"{A} teaches more \(KG\) than {B}", html.unescape(page))
    assert not re.search(rf"{B} teaches more \(KG\) than {A}", html.unescape(page))
    shown = _without_paper_rank(page)
    # KG positions from the verdicts' leaderboard, per level and over all levels; the ★ is A's only
    for cond, pos in ((A, "1"), (B, "2")):
        assert re.search(rf'<td class="rank num" data-position="kg" data-condition="{cond}">{pos}</td>', shown), cond
        for level in LEVELS:
            assert re.search(rf'data-metric="kg" data-condition="{cond}" data-level="{level}"[^>]*data-position="{pos}"', shown), (cond, level)
    starred = re.findall(r'<td class="num best" data-metric="(\w+)" data-condition="([^"]+)"', shown)
    assert starred and {c for _, c in starred} == {A} and {m for m, _ in starred} == {"kg"}
    assert "tier 1: tutor-a ★ > tier 2: tutor-b [tutor-b: below tutor-a]" in html.unescape(shown)  # the win-rate leaderboard section, KG (tiers)
    assert "lowest" not in shown and "smallest mean rank" not in shown
    orders = _row_orders(shown)
    assert orders and all(o == [A, B] for o in orders), orders  # no table lists B above A outside the paper's block
    # the paper's mean rank: there, labelled, and (an order of means) B first
    section = re.search(r'<section id="paper-rank">(.*?)</section>', page, re.S).group(1)
    assert html.escape(PAPER_MEAN_RANK_NOTE, quote=True) in section and html.escape(PAPER_MEAN_RANK_LABEL, quote=True) in section
    assert _row_orders(section)[0] == [B, A]


def test_the_report_markdown_never_orders_or_stars_against_the_verdict(outputs):
    md = outputs["report"].markdown_path.read_text()
    results = md[md.index("## Level-marginalised results"): md.index("## Failure modes")]
    tables, paper = results.split("## The paper's mean rank")
    lines = [line for line in tables.splitlines() if line.startswith("|") and (A in line or B in line)]
    assert len(lines) == 2 * (1 + len(LEVELS))  # the marginal table and one row per level and condition
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        cond = A if A in cells else B
        kg = cells[cells.index(cond) + 2]  # condition, n, KG, ...
        assert ("★" in line) == (cond == A), line
        assert kg.endswith("(#1)" if cond == A else "(#2)"), line
    assert [A if A in line else B for line in lines[:2]] == [A, B]  # the marginal rows: the run's order
    assert PAPER_MEAN_RANK_NOTE in paper
    paper_rows = [A if A in line else B for line in paper.splitlines() if line.startswith("| all levels")]
    assert paper_rows == [B, A]  # the paper's order of means, under its label


def test_compare_outputs_never_order_or_star_against_the_verdict(outputs):
    board = pd.read_parquet(outputs["cmp"] / "leaderboard.parquet")
    kg = board[board["metric"] == "kg"].set_index("condition")
    assert (kg.loc[A, "position"], kg.loc[B, "position"]) == (1, 2)
    assert board[board["star"]]["condition"].tolist() == [A]
    info = json.loads((outputs["cmp"] / "compare.json").read_text())
    better = {(v["knowledge_level"], v["metric"]): v.get("better") for v in info["verdicts"] if v.get("significant")}
    assert better == {(lv, "kg"): A for lv in (*LEVELS, "all")}
    page = (outputs["cmp"] / "leaderboard.html").read_text()
    kg_table = re.search(r"<table class='board' data-metric='kg'>(.*?)</table>", page, re.S).group(1)
    assert re.findall(r"data-condition='([^']+)'", kg_table) == [A, B]
    paper = page[page.index("class='paper-rank'"):]
    assert html.escape(PAPER_MEAN_RANK_NOTE) in paper


def test_the_viewer_pages_never_order_or_star_against_the_verdict(outputs):
    cmp_page, run_page = outputs["compare_page"], outputs["run_page"]
    shown = _without_paper_rank(cmp_page)
    assert re.search(rf'<td class="num best" data-metric="kg" data-position="#1"><span class="pos">#1</span>', shown)
    b_row = re.search(rf'<tr data-condition="{B}">(.*?)</tr>', shown, re.S).group(1)
    assert 'data-metric="kg" data-position="#2"' in b_row and "best" not in b_row
    assert all(o == [A, B] for o in _row_orders(shown))
    paper = re.search(r'<details class="paper-rank".*?</details>', cmp_page, re.S).group(0)
    assert html.escape(PAPER_MEAN_RANK_NOTE, quote=True) in paper and _row_orders(paper) == [[B, A]]
    # the run page computes no verdicts: no positions, no ★, rows in the run's order; the paper's rank apart
    shown = _without_paper_rank(run_page)
    assert "num best" not in shown and "data-position" not in shown
    assert all(o == [A, B] for o in _row_orders(shown))
    assert html.escape(PAPER_MEAN_RANK_NOTE, quote=True) in run_page
    raw = re.search(r'<h3 id="table-ranks">(.*?)</h3>', run_page).group(1)  # the raw tables/ranks, folded, named for what it is
    assert html.escape(PAPER_MEAN_RANK_LABEL, quote=True) in raw and "not a verdict" in raw
