"""The viewer shows the simulator audit: the run page gives the share of flagged sessions per
condition and level and lists each flagged session as a link that opens its conversation, where
the flags and their evidence stand above the transcript."""

from __future__ import annotations

import html
import re

from ray_knowsim.audit.run import audit_run
from ray_knowsim.io.rundir import RunReader
from tests.doubles.viewer_http import get, ids


def test_the_run_page_lists_flagged_sessions_and_each_opens_with_its_flags(viewer, folders):
    base, _ = viewer
    entries = ids(base)
    run_dir = folders["runs"] / "complete"
    audit = audit_run(RunReader.open(run_dir))
    flagged = audit.flagged_ids()
    _, _, body = get(base + entries["runs/complete"].lstrip("/"))
    assert 'id="audit"' in body and 'id="audit-headline"' in body
    assert f"{len(flagged):,} of {len(audit.sessions):,} ok sessions flagged" in body
    assert 'id="audit-shares"' in body
    links = re.findall(r'class="audit-link" href="([^"]+)">([^<]+)<', body)
    assert {html.unescape(sid) for _, sid in links} == flagged or len(links) == 200
    if links:
        link, sid = links[0]
        status, _, page = get(base + html.unescape(link).lstrip("/"))
        first = next(f for f in audit.flags if f.session_id == html.unescape(sid))
        assert status == 200 and 'id="audit-flags"' in page and html.escape(first.kind) in page
