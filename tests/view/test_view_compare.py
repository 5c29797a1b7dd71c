"""A comparison's page leads with compare's verdicts as sentences, then its leaderboard as a table
(metrics first; per cell the position on the item win rate, ★, the mean and its interval); the raw
tables are folded. The folder is a real ``compare_runs`` over a committed run whose one condition
wins on most items; an older folder (wide leaderboard, no sentences in compare.json) is read too,
its verdicts worded by compare's own function."""

from __future__ import annotations

import html
import json
import re
import shutil
import threading

import pandas as pd
import pyarrow as pa
import pytest

from ray_knowsim.compare.paired import ALL_LEVELS
from tests.doubles.rundirs import committed_run
from tests.doubles.viewer_http import get

WINNER = "model-a:adaptive"


def spread_items(sessions: pa.Table, turns: pa.Table | None) -> tuple[pa.Table, pa.Table | None]:
    """24 items matched across conditions (one trial, one initial state), the winner +3 KG."""
    n = sessions.num_rows

    def put(table: pa.Table, name: str, values: list) -> pa.Table:
        return table.set_column(table.schema.get_field_index(name), name, pa.array(values, table.schema.field(name).type))

    conds = sessions.column("condition").to_pylist()
    kg = [None if v is None else v + (3.0 if c == WINNER else 0.0) for v, c in zip(sessions.column("kg").to_pylist(), conds)]
    sessions = put(sessions, "item_id", [f"it{(k // 3) % 24:02d}" for k in range(n)])
    sessions = put(put(put(sessions, "kg", kg), "initial_states", [[0]] * n), "trial", [0] * n)
    return sessions, turns


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from ray_knowsim.compare.pipeline import compare_runs
    from ray_knowsim.view.data import Files
    from ray_knowsim.view.discover import discover
    from ray_knowsim.view.routes import ViewState
    from ray_knowsim.view.server import serve

    root = tmp_path_factory.mktemp("view_compare")
    run = committed_run(root / "runs", "wide", n_sessions=216, max_turns=3, seed=9, edit=spread_items)
    compare_runs([run], root / "cmp")
    old = root / "cmp_old"  # the same folder as an earlier compare left it: a wide leaderboard, no sentences
    shutil.copytree(root / "cmp", old)
    info = json.loads((old / "compare.json").read_text())
    info.pop("verdicts")
    (old / "compare.json").write_text(json.dumps(info))
    paired = pd.read_parquet(old / "paired.parquet")
    paired.drop(columns=["wins", "losses", "ties", "sentence"]).to_parquet(old / "paired.parquet", index=False)
    board = pd.read_parquet(old / "leaderboard.parquet")
    wide = board.pivot_table(index=["task", "condition"], columns="metric", values=["mean", "ci_low", "ci_high", "position", "n"])
    wide.columns = [m if v == "mean" else f"{m}_{'rank' if v == 'position' else v}" for v, m in wide.columns]
    wide = wide.reset_index().merge(board.drop_duplicates(["task", "condition"])[["task", "condition", "mean_rank"]])
    wide.to_parquet(old / "leaderboard.parquet", index=False)
    state = ViewState(Files([root]))
    ready, started, stop = [], threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(state, "127.0.0.1", 0, lambda u: (ready.append(u), started.set()), stop), daemon=True)
    thread.start()
    assert started.wait(30)
    ids = {en.path.name: en.id for en in discover(state.files)}
    yield ready[0], ids, root
    stop.set()
    thread.join(10)


def shown_verdicts(body: str) -> tuple[list[str], list[str]]:
    """(over all levels, within one level) sentences as the page lists them."""
    box = re.search(r'<section id="compare-verdicts">(.*?)</section>', body, re.S).group(1)
    overall = re.search(r'<ul class="verdicts" id="verdict-list">(.*?)</ul>', box, re.S)
    levels = re.search(r'<details id="verdicts-per-level"[^>]*>.*?<ul class="verdicts">(.*?)</ul>', box, re.S)
    def items(m):
        return [html.unescape(x) for x in re.findall(r"<li [^>]*>(.*?)</li>", m.group(1))] if m else []
    return items(overall), items(levels)


@pytest.mark.parametrize("folder", ["cmp", "cmp_old"])
def test_verdicts_lead_as_sentences_then_the_leaderboard(site, folder):
    base, ids, root = site
    _, _, body = get(f"{base}compare/{ids[folder]}")
    paired = pd.read_parquet(root / "cmp" / "paired.parquet")
    sig = paired[paired["significant"].astype(bool)]
    overall, levels = shown_verdicts(body)
    assert sorted(overall) == sorted(sig[sig["knowledge_level"] == ALL_LEVELS]["sentence"])  # compare's own words, an old folder too
    assert sorted(levels) == sorted(sig[sig["knowledge_level"] != ALL_LEVELS]["sentence"])
    assert any(s.startswith(f"{WINNER} teaches more (KG) than ") for s in overall)
    assert body.index('id="compare-verdicts"') < body.index('id="compare-leaderboard"') < body.index('id="compare-tables"')
    assert "<details open" not in re.search(r'<section id="compare-tables">(.*?)</section>', body, re.S).group(1)


def test_leaderboard_cells_are_compares_positions_and_stars(site):
    base, ids, root = site
    _, _, body = get(f"{base}compare/{ids['cmp']}")
    board = pd.read_parquet(root / "cmp" / "leaderboard.parquet")
    grid = re.search(r'<table class="results board"[^>]*>(.*?)</table>', body, re.S).group(1)
    heads = re.findall(r'<th class="num">([A-Z$ a-z]+) [↑↓]</th>', grid)
    assert heads[:4] == ["KG", "DC", "CO", "IQ"]
    for _, r in board.iterrows():
        row = re.search(rf'<tr data-condition="{re.escape(html.escape(r["condition"], quote=True))}">(.*?)</tr>', grid, re.S).group(1)
        cell = re.search(rf'<td class="num( best)?" data-metric="{r["metric"]}" data-position="#{int(r["position"])}">', row)
        assert cell, (r["condition"], r["metric"])
        assert bool(cell.group(1)) == bool(r["star"]), (r["condition"], r["metric"])
    assert board[(board.metric == "kg") & board.star]["condition"].tolist() == [WINNER]
    assert "ranks the 3 conditions of one run" in body


def test_a_comparison_without_verdicts_says_so(folders, viewer):
    base, _ = viewer
    _, _, index = get(base)
    path = re.search(r'href="(/compare/[0-9a-f]+)">served/cmp<', index).group(1)
    _, _, body = get(base.rstrip("/") + path)
    info = json.loads((folders["served"] / "cmp" / "compare.json").read_text())
    assert 'id="no-verdict"' in body and 'id="verdict-list"' not in body
    for text in info.get("too_few_items") or []:
        assert html.escape(text, quote=True) in body
    assert 'id="compare-leaderboard"' in body


@pytest.mark.browser
def test_in_a_browser_the_verdicts_are_on_the_first_screen(site, tmp_path):
    """Headless chromium at 1300x1000: the first verdict sentence is read without scrolling, and the
    leaderboard fits the page's width (no horizontal scroll), with no console error."""
    pytest.importorskip("selenium")
    from selenium.webdriver.common.by import By

    from tests.doubles.browser import start_chrome

    base, ids, _ = site
    driver = start_chrome(tmp_path / "profile")
    try:
        driver.get(f"{base}compare/{ids['cmp']}")
        assert not [x for x in driver.get_log("browser") if x.get("level") == "SEVERE"]
        first = driver.find_element(By.CSS_SELECTOR, "#verdict-list li")
        assert first.is_displayed() and first.text.startswith(WINNER)
        bottom, height, scroll, width = driver.execute_script(
            "return [arguments[0].getBoundingClientRect().bottom, window.innerHeight, document.documentElement.scrollWidth, "
            "window.innerWidth];", first)
        assert bottom <= height and scroll <= width, (bottom, height, scroll, width)
    finally:
        driver.quit()
