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
from tests.view.rundirs import committed_run
from tests.view.test_view_http import get


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
