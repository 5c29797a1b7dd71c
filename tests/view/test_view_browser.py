"""The viewer in a real headless browser (Debian chromium + chromedriver, driven by selenium): pages
load without console errors, the filter form narrows the list to what the server-side query says,
a conversation opens in the report's viewer, injected model text stays text, traversal URLs show
nothing from outside, and the paper-sized run's pages are measured (printed, not asserted on
time: ``pytest -s`` shows them).
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from ray_knowsim.view.query import parse_query, select  # noqa: E402
from tests.doubles.browser import start_chrome  # noqa: E402
from tests.doubles.rundirs import SECRET  # noqa: E402

pytestmark = pytest.mark.browser

PROBES = "return [typeof window.__probe_img, typeof window.__probe_script, typeof window.__probe];"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = start_chrome(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def entries(viewer, browser):
    base, _ = viewer
    browser.get(base)
    links = browser.find_elements(By.CSS_SELECTOR, "a[href^='/run/'], a[href^='/sweep/'], a[href^='/compare/']")
    return {a.text.removeprefix("served/"): a.get_attribute("href") for a in links}


def click_and_wait(driver, element, url_part: str) -> None:
    """Click what navigates, then wait for the new page (a click does not wait for it)."""
    element.click()
    WebDriverWait(driver, 60).until(lambda d: url_part in d.current_url and d.execute_script("return document.readyState") == "complete")


def severe(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def test_index_loads_clean_and_shows_each_runs_status(viewer, browser, entries):
    base, _ = viewer
    browser.get(base)
    assert not severe(browser)
    statuses = {}
    for row in browser.find_elements(By.CSS_SELECTOR, "#run-table tbody tr"):
        link = row.find_element(By.CSS_SELECTOR, "a.run-link").text.removeprefix("served/")
        statuses[link] = row.find_element(By.CSS_SELECTOR, ".status").text
    assert statuses == {"runs/all_failed": "all sessions failed", "runs/complete": "with failures", "runs/evil": "unreadable",
                        "runs/interrupted": "interrupted", "runs/paper": "with failures"}
    for key in ("runs/complete", "runs/interrupted", "runs/all_failed", "runs/paper", "sweeps/sens", "cmp"):
        browser.get(entries[key])
        assert not severe(browser), key
        assert browser.find_elements(By.TAG_NAME, "section"), key


def test_filter_form_narrows_the_list_as_the_query_says(viewer, browser, entries, folders):
    _, state = viewer
    browser.get(entries["runs/paper"] + "/sessions")
    Select(browser.find_element(By.NAME, "level")).select_by_visible_text("novice")
    Select(browser.find_element(By.NAME, "condition")).select_by_visible_text("model-a:comprehensive")
    browser.find_element(By.NAME, "min.kg").send_keys("4")
    Select(browser.find_element(By.NAME, "sort")).select_by_visible_text("co")
    browser.find_element(By.NAME, "desc").click()
    click_and_wait(browser, browser.find_element(By.ID, "apply"), "min.kg=4")
    assert "level=novice" in browser.current_url
    assert not severe(browser)
    rows = browser.find_elements(By.CSS_SELECTOR, "#session-table tbody tr")
    table, _ = state.files.sessions(folders["runs"] / "paper", ["knowledge_level", "condition", "kg", "co", "status", "error"])
    q, _ = parse_query({"level": "novice", "condition": "model-a:comprehensive", "min.kg": "4", "sort": "co", "desc": "1"})
    want = select(table, q).column("session_id").to_pylist()
    shown = [r.find_element(By.CSS_SELECTOR, "a.conv-link").text for r in rows]
    assert shown == want[:50] and 0 < len(want)
    assert f"of {len(want):,} matching" in browser.find_element(By.ID, "page-pos").text

    browser.get(entries["runs/paper"] + "/sessions")
    browser.find_element(By.NAME, "failed").click()
    click_and_wait(browser, browser.find_element(By.ID, "apply"), "failed=1")
    statuses = {s.text for s in browser.find_elements(By.CSS_SELECTOR, "#session-table tbody .status")}
    assert statuses == {"failed"}


def test_a_conversation_opens_in_the_reports_viewer(browser, entries):
    browser.get(entries["runs/paper"] + "/sessions?sort=kg&desc=1")
    first = browser.find_element(By.CSS_SELECTOR, "a.conv-link")
    sid = first.text
    click_and_wait(browser, first, "/conversation?")
    assert not severe(browser)
    article = browser.find_element(By.CSS_SELECTOR, "article.conv")
    assert article.get_attribute("data-session") == sid
    heatmap = browser.find_element(By.CSS_SELECTOR, "img.trajectory")
    assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", heatmap)
    turns = browser.find_elements(By.CSS_SELECTOR, "li.turn")
    assert len(turns) == 15 and browser.find_elements(By.CSS_SELECTOR, "table.moves td .mode")
    assert browser.find_element(By.ID, "conv-pos").text.startswith("1 of ")
    shown = "return Array.from(document.querySelectorAll('li.turn')).filter(function (t) { return t.offsetParent !== null; }).length;"
    still = len(browser.find_elements(By.CSS_SELECTOR, "li.turn.no-moves"))
    browser.find_element(By.ID, "only-moves").click()  # /static/view.js runs under the CSP
    assert browser.execute_script(shown) == 15 - still
    before = browser.current_url
    browser.find_element(By.ID, "conv-next").click()
    WebDriverWait(browser, 60).until(lambda d: d.current_url != before and d.execute_script("return document.readyState") == "complete")
    assert browser.find_element(By.CSS_SELECTOR, "article.conv").get_attribute("data-session") != sid
    assert browser.find_element(By.ID, "conv-pos").text.startswith("2 of ")


def test_injected_model_text_stays_inert(browser, entries):
    sid = "synthetic/synth_000/novice/model-a:adaptive/0"  # turn 1 carries the probes
    browser.get(entries["runs/complete"] + f"/conversation?sid={quote(sid, safe='')}")
    assert not severe(browser)
    assert browser.execute_script(PROBES) == ["undefined"] * 3
    user = browser.find_element(By.CSS_SELECTOR, "li.turn .msg.user .text").text
    assert '<img src=x onerror="window.__probe_img=1">' in user and "<script>window.__probe_script=1</script>" in user
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg img, .msg b, .msg script")
    assert browser.execute_script("return document.scripts.length") == 1  # only /static/view.js
    for page in (entries["runs/complete"], entries["runs/complete"] + "/sessions?failed=1"):
        browser.get(page)  # the probes also sit in a table cell and in a failed session's error
        assert browser.execute_script(PROBES) == ["undefined"] * 3
        assert "<b>not bold</b>" in browser.find_element(By.TAG_NAME, "main").text
        assert not browser.find_elements(By.CSS_SELECTOR, "main img, main td b") and not severe(browser)


def test_traversal_urls_show_nothing_from_outside(viewer, browser, entries):
    base, _ = viewer
    rid = entries["runs/evil"].rsplit("/", 1)[1]
    for path in (f"file/{rid}/..%2f..%2f..%2f..%2fsecret%2fsecret.txt", f"file/{rid}/leak.csv", f"file/{rid}/secretdir/secret.txt",
                 f"file/{rid}/%252e%252e/%252e%252e/secret/secret.txt", f"file/{rid}/..%5c..%5csecret%5csecret.txt",
                 "static/..%2f..%2fsecret.txt"):
        browser.get(base + path)
        assert SECRET not in browser.page_source, path
        assert re.search(r"\b4\d\d\b", browser.title), (path, browser.title)


TIMING = """
var nav = performance.getEntriesByType('navigation')[0];
return {ms_dom_content_loaded: nav.domContentLoadedEventEnd, ms_load: nav.loadEventEnd, bytes: nav.transferSize,
        html_bytes: nav.encodedBodySize, dom_nodes: document.getElementsByTagName('*').length,
        rows: document.querySelectorAll('#session-table tbody tr').length};
"""


def test_measure_the_paper_sized_run(browser, entries, tmp_path_factory):
    """Load and render figures of the 540-session run's pages (a measurement, printed; only the
    page's row count is asserted: it follows the page size, not the run)."""
    pages = {
        "index": entries["runs/paper"].rsplit("/run/", 1)[0] + "/",
        "run": entries["runs/paper"],
        "list_50": entries["runs/paper"] + "/sessions",
        "list_200": entries["runs/paper"] + "/sessions?per=200",
        "list_filtered": entries["runs/paper"] + "/sessions?level=advanced&min.kg=2&sort=dc&desc=1",
        "conversation_15_turns": entries["runs/paper"] + "/conversation?sid=" + quote("synthetic/synth_001/novice/model-a:adaptive/1", safe=""),
    }
    out = {}
    for name, url in pages.items():
        browser.get(url)
        out[name] = browser.execute_script(TIMING)
    print("\nviewer measurements, 540-session run:\n" + json.dumps(out, indent=1))
    (tmp_path_factory.getbasetemp() / "view_measurements.json").write_text(json.dumps(out, indent=1))
    assert out["list_50"]["rows"] == 50 and out["list_200"]["rows"] == 200


def test_a_run_page_leads_with_its_metrics_and_folds_the_raw_tables(browser, entries):
    """The first screen (1300x1000) holds the whole marginal table; the raw tables/ are folded and
    open on a click (what the run wrote, every column, one click away)."""
    severe(browser)  # (drains what earlier tests left in the log)
    browser.get(entries["runs/complete"])
    assert not severe(browser)
    bottom, height = browser.execute_script(
        "var b = document.getElementById('marginal-table').tBodies[0]; "
        "return [b.rows[b.rows.length - 1].getBoundingClientRect().bottom, window.innerHeight];")
    assert bottom <= height, (bottom, height)
    raw = browser.find_element(By.CSS_SELECTOR, "#tables details")
    grid = raw.find_element(By.CSS_SELECTOR, "table")
    assert not grid.is_displayed()
    raw.find_element(By.TAG_NAME, "summary").click()
    assert grid.is_displayed()
