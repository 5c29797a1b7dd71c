"""The report page in a real headless browser (Debian chromium + chromedriver, driven by selenium):
it loads without console errors, its images decode, its tables hold the run's numbers (checked
against pandas on the same Parquet), the viewer switches conversations, and conversation text is
shown, not executed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.doubles.report_expect import expected_tables, formatted

from tests.doubles.browser import start_chrome

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = start_chrome(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


def _open(driver, path: Path) -> list[dict]:
    driver.get(path.as_uri())
    assert driver.execute_script("return document.readyState") == "complete"
    return driver.get_log("browser")


CELLS_JS = """
return Array.from(document.querySelectorAll('td[data-metric], td[data-rank]')).map(function (td) {
  var mean = td.querySelector('.mean');
  return [td.closest('table').id, td.dataset.metric || ('rank:' + td.dataset.rank), td.dataset.condition,
          td.dataset.level || null, (mean || td).textContent.trim()];
});
"""


def test_page_loads_clean_and_tables_hold_the_runs_numbers(browser, small_run, small_report):
    _, sampled = small_report
    logs = _open(browser, sampled.html_path)
    severe = [entry for entry in logs if entry.get("level") == "SEVERE"]
    assert not severe, severe
    broken = browser.execute_script(
        "return Array.from(document.images).filter(function (i) { return !(i.complete && i.naturalWidth > 0); }).length"
    )
    assert broken == 0 and browser.execute_script("return document.images.length") >= 3

    cells = {(t, k, c, lv): text for t, k, c, lv, text in browser.execute_script(CELLS_JS)}
    exp = expected_tables(small_run.run_dir)
    for (cond, level, key), value in exp["per_level"].items():
        assert cells[("per-level-table", key, cond, level)] == formatted(value, key), (cond, level, key)
    for (cond, key), value in exp["marginal"].items():
        assert cells[("marginal-table", key, cond, None)] == formatted(value, key), (cond, key)
        rank = exp["rank"][(cond, key)]
        assert cells[("paper-rank-table", f"rank:{key}", cond, None)] == ("–" if rank is None else str(rank))


def test_viewer_switches_conversations_and_filters_turns(browser, small_report):
    _, sampled = small_report
    _open(browser, sampled.html_path)
    visible = "return Array.from(document.querySelectorAll('article.conv')).filter(function (a) { return !a.hidden; }).map(function (a) { return a.id; });"
    assert browser.execute_script(visible) == ["conv-0"]
    browser.find_element("id", "conv-next").click()
    assert browser.execute_script(visible) == ["conv-1"]
    browser.execute_script("var s = document.getElementById('conv-select'); s.value = 'conv-3'; s.dispatchEvent(new Event('change'));")
    assert browser.execute_script(visible) == ["conv-3"]
    assert browser.find_element("id", "conv-pos").text == "4 / 4"

    shown_turns = "return Array.from(document.querySelectorAll('#conv-3 li.turn')).filter(function (t) { return t.offsetParent !== null; }).length;"
    before = browser.execute_script(shown_turns)
    still = browser.execute_script("return document.querySelectorAll('#conv-3 li.turn.no-moves').length;")
    browser.find_element("id", "only-moves").click()
    assert browser.execute_script(shown_turns) == before - still
    assert not [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]


def test_conversation_text_is_shown_not_executed(browser, small_report):
    explicit, _ = small_report
    logs = _open(browser, explicit.html_path)
    assert not [e for e in logs if e.get("level") == "SEVERE"]
    assert browser.execute_script("return typeof window.__probe") == "undefined"
    first_user = browser.find_element("css selector", "#conv-0 li.turn .msg.user .text").text
    assert "<script>window.__probe = 1;</script><b>bold?</b>" in first_user
    assert browser.execute_script("return document.querySelectorAll('#conv-0 .msg b').length") == 0
