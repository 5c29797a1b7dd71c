"""The viewer's run page says what went wrong, from the same functions as the report and the
tables: failures by kind with their reasons, the simulator's sanity warnings, an incomplete run by
the reader's status, and a failed conversation's reason."""

from __future__ import annotations

import re
import threading
from urllib.parse import quote

import pytest

from ray_knowsim.io.rundir import RunReader
from tests.doubles.broken import HTTP_400_DETAIL, broken_simulator, failures
from tests.doubles.rundirs import committed_run
from tests.doubles.viewer_http import get


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from ray_knowsim.view.data import Files
    from ray_knowsim.view.discover import discover
    from ray_knowsim.view.routes import ViewState
    from ray_knowsim.view.server import serve

    root = tmp_path_factory.mktemp("view_plain")
    plan = {"model-a:adaptive": (3, "extractor_http_400", HTTP_400_DETAIL)}
    runs = {"broken": committed_run(root, "broken", n_sessions=24, max_turns=3, seed=3, edit=broken_simulator),
            "failing": committed_run(root, "failing", n_sessions=24, max_turns=3, seed=2, edit=lambda s, t: failures(s, t, plan)),
            "stopped": committed_run(root, "stopped", n_sessions=16, planned=96, status="stopped_on_failures", seed=5)}
    state = ViewState(Files([root]))
    ready, started, stop = [], threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(state, "127.0.0.1", 0, lambda u: (ready.append(u), started.set()), stop), daemon=True)
    thread.start()
    assert started.wait(30), "the viewer did not start"
    ids = {en.path.name: en.id for en in discover(state.files)}
    yield ready[0], ids, runs
    stop.set()
    thread.join(10)


def test_sanity_warnings_on_the_run_page(site):
    base, ids, _ = site
    _, _, body = get(f"{base}run/{ids['broken']}")
    box = re.search(r'<div class="banner" id="sanity-warnings"[^>]*>(.*?)</div>', body).group(1)
    assert set(re.findall(r'data-check="(\w+)" data-severe="true"', box)) == {"uniform_labels", "frozen_states", "constant_judge"}
    assert box.startswith("<b>The simulator may not be working.</b>")
    _, _, body = get(f"{base}run/{ids['failing']}")
    assert 'id="sanity-warnings"' not in body


def test_failures_with_their_reason_and_a_failed_conversation(site):
    base, ids, runs = site
    _, _, body = get(f"{base}run/{ids['failing']}")
    assert re.search(r"<td>model-a:adaptive</td><td>extractor_http_400</td><td>infra</td><td class=num><a [^>]*>3</a></td>"
                     rf"<td class=num>[\d.]+% of \d+</td><td>{re.escape(HTTP_400_DETAIL)}</td>", body)
    failed = RunReader.open(runs["failing"]).sessions.read(["session_id", "status"]).to_pandas()
    sid = failed[failed.status != "ok"].session_id.iloc[0]
    _, _, page = get(f"{base}run/{ids['failing']}/conversation?sid={quote(sid, safe='')}")
    assert '<div id="session-error-detail">' + HTTP_400_DETAIL + "</div>" in page and "extractor_http_400" in page


def test_an_incomplete_run_by_the_readers_status(site):
    base, ids, runs = site
    comp = RunReader.open(runs["stopped"]).status().completeness()
    _, _, body = get(f"{base}run/{ids['stopped']}")
    banner = re.search(r'id="incomplete-banner"[^>]*>(.*?)</div>', body).group(1)
    assert "16 of 96" in banner and comp.text in banner.replace("&#x27;", "'")
    assert "stopped on failures" in body


def test_the_run_list_shows_sanity_warnings_not_a_green_status(site):
    """A run whose simulator checks fire keeps its status word but never its green badge, and the
    list says why in the words of the run's final line; a run without warnings is left as it is."""
    SEVERE_HEADLINE = "SIMULATOR NOT WORKING?"  # the run's final line's words (tables.outcome_tables.final_line_parts)

    base, ids, _ = site
    _, _, body = get(base)
    rows = {}
    for name, ident in ids.items():
        row = re.search(rf'<tr><td><a class="run-link" href="/run/{ident}">(.*?)</tr>', body, re.S)
        assert row, name
        rows[name] = row.group(1)
    broken = rows["broken"]
    badge = re.search(r'<span class="status ([^"]+)"[^>]*>([^<]+)</span><span class="sanity-flag severe">([^<]+)</span>', broken)
    assert badge, broken
    assert badge.group(2) == "complete" and "flagged severe" in badge.group(1)
    assert badge.group(3).startswith(SEVERE_HEADLINE) and "one label for every IU" in badge.group(3)
    for name in ("failing", "stopped"):
        assert "sanity-flag" not in rows[name] and "flagged" not in rows[name], name
    # the run page's status says the same
    _, _, page = get(f"{base}run/{ids['broken']}")
    facts = re.search(r'<div class="facts" id="run-facts">(.*?)</div>', page, re.S).group(1)
    assert "flagged severe" in facts and SEVERE_HEADLINE in facts


@pytest.mark.browser
def test_in_a_browser_results_lead_and_a_flagged_run_is_not_green(site, tmp_path):
    """Headless chromium at 1300x1000: the run page's metric table is on the first screen and fits
    its width (no horizontal scroll); the list's badge of the
    broken run is not green (its computed colour) and its warning line is shown."""
    pytest.importorskip("selenium")
    from selenium.webdriver.common.by import By

    from tests.doubles.browser import start_chrome

    base, ids, _ = site
    driver = start_chrome(tmp_path / "profile")
    try:
        driver.get(f"{base}run/{ids['failing']}")
        assert not [x for x in driver.get_log("browser") if x.get("level") == "SEVERE"]
        bottom, right, height, width, scroll = driver.execute_script(
            "var t = document.getElementById('marginal-table'); var r = t.tBodies[0].rows[t.tBodies[0].rows.length - 1]"
            ".getBoundingClientRect(); return [r.bottom, t.getBoundingClientRect().right, window.innerHeight, "
            "window.innerWidth, document.documentElement.scrollWidth];")
        assert bottom <= height and right <= width and scroll <= width, (bottom, right, height, width, scroll)
        heads = [h.text.split()[0] for h in driver.find_elements(By.CSS_SELECTOR, "#marginal-table thead th[title]")]
        assert heads == ["KG", "DC", "CO", "IQ"]
        driver.get(base)
        colour = "return getComputedStyle(arguments[0]).backgroundColor;"
        badges = {}
        for row in driver.find_elements(By.CSS_SELECTOR, "#run-table tbody tr"):
            name = row.find_element(By.CSS_SELECTOR, "a.run-link").text.rsplit("/", 1)[-1]
            badges[name] = (driver.execute_script(colour, row.find_element(By.CSS_SELECTOR, ".status")),
                            [f.text for f in row.find_elements(By.CSS_SELECTOR, ".sanity-flag")])
        green = driver.execute_script(colour, driver.find_element(By.CSS_SELECTOR, ".status.with-failures"))  # a reference colour
        assert badges["broken"][0] not in ("rgb(227, 244, 232)", green) and badges["broken"][1][0].startswith("SIMULATOR NOT WORKING?")
        assert badges["failing"][1] == []
    finally:
        driver.quit()


def test_the_run_list_reads_the_runs_own_sanity_table_only_while_it_is_current(site, tmp_path):
    """The list takes a run's warnings from its tables/sanity (written by the run's reduction) when
    that file is newer than every committed file, and computes them from the rows otherwise."""
    import os
    import shutil

    from ray_knowsim.tables.outcome_tables import sanity_table
    from ray_knowsim.tables.sanity import check_run
    from ray_knowsim.view.data import Files

    _, _, runs = site
    run = tmp_path / "broken"
    shutil.copytree(runs["broken"], run)
    files = Files([tmp_path])
    rf = files.run_files(run)
    computed = [(w.check, w.severe, w.short) for w in files.sanity(run, rf).warnings]
    (run / "tables").mkdir(exist_ok=True)
    sanity_table(check_run(RunReader.open(run))).to_parquet(run / "tables" / "sanity.parquet", index=False)
    assert [(w.check, w.severe, w.short) for w in Files([tmp_path]).listed_sanity(run, rf).warnings] == computed
    # a table that says something else: used while current, ignored once a commit is newer
    fake = sanity_table(check_run(RunReader.open(run))).iloc[:1].assign(short="FROM THE TABLE")
    fake.to_parquet(run / "tables" / "sanity.parquet", index=False)
    assert [w.short for w in Files([tmp_path]).listed_sanity(run, rf).warnings] == ["FROM THE TABLE"]
    old = min(p.stat().st_mtime_ns for p in rf.sessions) - 10**9
    os.utime(run / "tables" / "sanity.parquet", ns=(old, old))
    assert [(w.check, w.severe, w.short) for w in Files([tmp_path]).listed_sanity(run, rf).warnings] == computed


def test_the_banner_names_the_component_the_evidence_points_at():
    from ray_knowsim.tables.sanity import SanityInputs, SanityReport, SanityWarning
    from ray_knowsim.view.pages_runs import sanity_banner

    tutor = SanityWarning("degenerate_tutor", True, "echo", "every reply echoes the learner", component="tutor")
    learner = SanityWarning("frozen_states", True, "run", "no state ever moves")
    assert "<b>The tutor may not be working.</b>" in sanity_banner(SanityReport([tutor], SanityInputs()))
    assert "<b>The simulator may not be working.</b>" in sanity_banner(SanityReport([learner], SanityInputs()))
    assert "<b>The simulator or the tutor may not be working.</b>" in sanity_banner(SanityReport([learner, tutor], SanityInputs()))
