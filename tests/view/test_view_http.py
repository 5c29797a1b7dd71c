"""The viewer over plain HTTP: what it lists and counts, what it refuses, and the headers it sends.

Traversal attempts go over a raw socket, so the request line reaches the server exactly as
written (an HTTP client would normalise ``..`` and re-encode away the cases that matter).
"""

from __future__ import annotations

import re
import socket
from urllib.parse import quote, urlsplit

import pyarrow.parquet as pq
import pytest

from ray_knowsim.io.rundir import RunReader
from tests.doubles.rundirs import SECRET
from tests.doubles.viewer_http import get, ids


def raw(base: str, target: str, host: str | None = None, method: str = "GET") -> tuple[int, str]:
    """Send ``target`` verbatim as the request target; (status, whole response text)."""
    parts = urlsplit(base)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        head = f"{method} {target} HTTP/1.1\r\nHost: {host or parts.netloc}\r\nConnection: close\r\n\r\n"
        sock.sendall(head.encode("latin-1"))
        chunks = []
        while True:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
    text = b"".join(chunks).decode("latin-1")
    match = re.match(r"HTTP/1\.[01] (\d{3})", text)
    return (int(match.group(1)) if match else 0), text


@pytest.fixture(scope="module")
def entries(viewer):
    return ids(viewer[0])


def test_index_lists_every_run_with_status_and_progress(viewer, entries):
    base, _ = viewer
    status, headers, body = get(base)
    assert status == 200
    assert set(entries) == {"runs/complete", "runs/interrupted", "runs/all_failed", "runs/paper", "runs/evil", "sweeps/sens", "cmp"}
    rows = {m[0]: m[1] for m in re.findall(r'>served/(runs/[a-z_]+)</a>.*?</td><td><span class="status [^"]*"[^>]*>([^<]+)<', body)}
    assert rows == {"runs/complete": "with failures", "runs/interrupted": "interrupted", "runs/all_failed": "all sessions failed",
                    "runs/paper": "with failures", "runs/evil": "unreadable"}
    assert "40 of 96" in body and "24 of 24" in body and "540 of 540" in body


def test_counts_follow_commit_markers(viewer, entries, folders):
    """The paper run holds an uncommitted leftover file: its rows are on disk but never counted."""
    base, state = viewer
    run = folders["runs"] / "paper"
    on_disk = sum(pq.read_metadata(p).num_rows for p in (run / "sessions").glob("*.parquet"))
    committed = len(RunReader.open(run).entries())
    assert on_disk > committed == 540
    _, _, body = get(base + entries["runs/paper"].lstrip("/"))
    assert "540 of 540 planned" in body
    status_counts = state.files.sessions(run, ["status"])[0].column("status").to_pylist()
    assert len(status_counts) == 540


def test_run_page_shows_failures_by_kind_tables_and_links(viewer, entries):
    base, _ = viewer
    _, _, body = get(base + entries["runs/all_failed"].lstrip("/"))
    # per condition, with its class, share and the server's reason (the run's tables/failures count)
    assert re.search(r"<td>assistant_http_404</td><td>infra</td><td class=num><a [^>]*>8</a></td><td class=num>100.0% of 8</td>"
                     r"<td>The model `gpt-nonexistent` does not exist</td>", body)
    _, _, body = get(base + entries["runs/complete"].lstrip("/"))
    assert 'id="table-marginal-grid"' in body and "served/sweeps/sens" in body and "served/cmp" in body
    _, _, body = get(base + entries["runs/interrupted"].lstrip("/"))
    assert 'id="incomplete-banner"' in body and "40 of 96" in body


def test_sweep_and_compare_pages_link_back_to_their_run(viewer, entries):
    base, _ = viewer
    for key in ("sweeps/sens", "cmp"):
        status, _, body = get(base + entries[key].lstrip("/"))
        assert status == 200 and entries["runs/complete"] in body
    _, _, body = get(base + entries["sweeps/sens"].lstrip("/"))
    # the manifest's own facts, and the last invocation's layout (pieces are cut per cluster)
    for fact in ("n_settings", "conversations_per_block", "blocks", "last run: settings_per_piece", "last run: pieces"):
        assert f"<b>{fact}</b>" in body, fact
    png = re.search(r'src="(/file/[0-9a-f]+/report/[^"]+\.png)"', body).group(1)
    status, headers, _ = get(base + png.lstrip("/"))
    assert status == 200 and headers["Content-Type"] == "image/png"
    _, _, body = get(base + entries["cmp"].lstrip("/"))
    assert 'id="leaderboard-grid"' in body
    html_link = re.search(r'href="(/file/[0-9a-f]+/leaderboard\.html)"', body).group(1)
    status, headers, _ = get(base + html_link.lstrip("/"))
    assert status == 200 and headers["Content-Security-Policy"].startswith("sandbox")


def test_list_page_does_not_grow_with_the_run(viewer, entries):
    """The same page of 50 rows weighs about the same for 60 and for 540 committed sessions."""
    base, _ = viewer
    sizes = {}
    for key in ("runs/complete", "runs/paper"):
        status, _, body = get(base + entries[key].lstrip("/") + "/sessions?per=50&status=ok")
        assert status == 200 and body.count('class="conv-link"') == 50
        sizes[key] = len(body.encode())
    assert sizes["runs/paper"] < 1.5 * sizes["runs/complete"], sizes


def test_every_response_carries_the_strict_policy(viewer, entries):
    base, _ = viewer
    for path in ("", entries["runs/complete"].lstrip("/"), "static/view.css", "nope", entries["runs/complete"].lstrip("/") + "/sessions?sort=bad"):
        _, headers, _ = get(base + path)
        csp = headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp, path
        assert headers["X-Content-Type-Options"] == "nosniff"


TRAVERSALS = [
    "/file/{run}/../../../secret/secret.txt",
    "/file/{run}/..%2f..%2f..%2f..%2fsecret%2fsecret.txt",
    "/file/{run}/%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret/secret.txt",
    "/file/{run}/%2E%2E%2F%2E%2E%2F%2E%2E%2F%2E%2E%2Fsecret%2Fsecret.txt",
    "/file/{run}/%252e%252e/%252e%252e/%252e%252e/%252e%252e/secret/secret.txt",
    "/file/{run}/%25252e%25252e/secret/secret.txt",
    "/file/{run}/..\\..\\..\\..\\secret\\secret.txt",
    "/file/{run}/..%5c..%5c..%5c..%5csecret%5csecret.txt",
    "/file/{run}/{secret_abs}",
    "/file/{run}//{secret_abs}",
    "/file/{run}/{secret_abs_encoded}",
    "/file/{run}/./../../../../secret/secret.txt",
    "/file/{run}/leak.csv",  # a symlink in the run folder pointing out
    "/file/{run}/tables/leak.csv",
    "/file/{run}/leak.png",
    "/file/{run}/secretdir/secret.txt",  # a symlinked folder pointing out
    "/file/{run}/secretdir%2fsecret.txt",
    "/file/{run}/estimate.json",  # the run page's own JSON, linked out
    "/file/{run}/sessions/%00../../../../secret/secret.txt",
    "/file/{run}/C:%5csecret%5csecret.txt",
    "/static/..%2f..%2f..%2f..%2fsecret%2fsecret.txt",
    "/static/../../../../secret/secret.txt",
    "/../../../../secret/secret.txt",
    "/run/{run}/..%2f..%2f..%2f..%2fsecret%2fsecret.txt",
    "/run/%2e%2e%2f%2e%2e/sessions",
    "/file/%2e%2e/secret/secret.txt",
    "http://127.0.0.1/../../../../secret/secret.txt",
]


@pytest.mark.parametrize("pattern", TRAVERSALS)
def test_no_request_reads_outside_the_folders(viewer, entries, folders, pattern):
    base, _ = viewer
    run = entries["runs/evil"].rsplit("/", 1)[1]
    secret_abs = str(folders["secret"] / "secret.txt").lstrip("/")
    target = pattern.format(run=run, secret_abs=secret_abs, secret_abs_encoded=quote("/" + secret_abs, safe=""))
    status, text = raw(base, target)
    assert 400 <= status < 500, (target, status)
    assert SECRET not in text


def test_file_route_serves_only_plain_files_inside_the_entry(viewer, entries):
    base, _ = viewer
    rid = entries["runs/complete"].rsplit("/", 1)[1]
    status, headers, body = get(base + f"file/{rid}/tables/marginal.csv")
    assert status == 200 and headers["Content-Type"].startswith("text/csv") and "condition" in body
    for rel in ("manifest.json.bak", "sessions", "tables/marginal.parquet", "shards/shard-000000.json/../x.csv"):
        assert 400 <= get(base + f"file/{rid}/{rel}")[0] < 500, rel


def test_markers_naming_or_linked_from_outside_are_refused(viewer, entries):
    """A marker linked in from outside is never opened, and a marker whose shard id walks out of the
    run is not a readable marker: the run is not read (the page says why), nothing secret is served."""
    base, _ = viewer
    _, _, body = get(base + entries["runs/evil"].lstrip("/"))
    assert "0 of 16" in body and "outside the viewer" in body and SECRET not in body
    _, _, body = get(base + entries["runs/evil"].lstrip("/") + "/sessions?per=200")
    assert SECRET not in body and body.count('class="conv-link"') == 0
    assert get(base + entries["runs/evil"].lstrip("/") + f"/conversation?sid={SECRET}")[0] == 404


def test_an_unreadable_marker_is_shown_not_skipped(tmp_path):
    """The viewer reads through the run-directory reader: a marker it cannot read stops the run's
    reading, and the run says which file (nothing is counted around it)."""
    from ray_knowsim.view.data import Files
    from ray_knowsim.view.discover import Entry, run_info
    from tests.doubles.rundirs import committed_run

    run = committed_run(tmp_path, "broken", n_sessions=8, seed=2)
    marker = sorted((run / "commits").glob("*.json"))[0]
    marker.write_text("{cut short")
    info, table = run_info(Files([tmp_path]), Entry("run", "x", run.resolve(), run.name))
    assert table.num_rows == 0 and info.status == "unreadable" and str(marker) in info.status_detail


def test_foreign_hosts_and_other_methods_are_refused(viewer):
    base, _ = viewer
    assert raw(base, "/", host="attacker.example")[0] == 421  # DNS rebinding: a foreign name for our address
    assert raw(base, "/", method="POST")[0] == 405
    assert raw(base, "/", method="DELETE")[0] == 405
    assert raw(base, "/")[0] == 200


def test_unknown_pages_and_sessions_are_404_pages(viewer, entries):
    base, _ = viewer
    assert get(base + "run/000000000000")[0] == 404
    assert get(base + entries["runs/complete"].lstrip("/") + "/conversation?sid=nope")[0] == 404
    status, _, body = get(base + entries["runs/complete"].lstrip("/") + "/sessions?min.kg=lots")
    assert status == 200 and "min.kg: &#x27;lots&#x27; is not a number" in body


def test_a_failed_session_opens_with_its_error(viewer, entries):
    base, _ = viewer
    _, _, body = get(base + entries["runs/all_failed"].lstrip("/") + "/sessions?per=1")
    link = re.search(r'class="conv-link" href="([^"]+)"', body).group(1).replace("&amp;", "&")
    status, _, page = get(base + link.lstrip("/"))
    assert status == 200 and 'id="session-error"' in page
    assert "The model `gpt-nonexistent` does not exist" in page and "No turns recorded" in page


def test_the_index_row_counts_from_the_markers_what_the_run_page_counts_from_the_rows(folders):
    """The index builds each run's row from the reader's RunStatus (no session table read); its
    counts and status are those the run page gets from the rows."""
    from ray_knowsim.view.data import Files
    from ray_knowsim.view.discover import discover, index_info, run_info

    files = Files([folders["served"]])
    runs = [en for en in discover(files) if en.kind == "run"]
    assert len(runs) >= 5
    for en in runs:
        row, (full, _table) = index_info(files, en), run_info(files, en)
        for name in ("status", "status_detail", "planned", "committed", "ok", "failed", "cost_usd", "priced_sessions", "models"):
            assert getattr(row, name) == getattr(full, name), (en.label, name)


@pytest.mark.parametrize("layout", ["files", "hive"])
def test_a_plain_layout_shows_each_sessions_turns(tmp_path, layout):
    """A plain layout (``sessions.parquet`` + ``turns.parquet``, or hive partitions) is read through
    the reader's tables: a conversation gets its turns, and a row keeps its partition columns."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from ray_knowsim.io.rundir import RunReader
    from ray_knowsim.view.data import Files
    from ray_knowsim.view.discover import Entry, run_info
    from tests.doubles.rundirs import committed_run

    src = RunReader.open(committed_run(tmp_path / "src", "src", n_sessions=8, seed=2))
    sessions, turns = src.sessions.read(), src.turns.read()
    plain = tmp_path / "served" / "plain"
    plain.mkdir(parents=True)
    if layout == "files":
        pq.write_table(sessions, plain / "sessions.parquet")
        pq.write_table(turns, plain / "turns.parquet")
    else:
        for name, table in (("sessions", sessions), ("turns", turns)):
            cond = "condition" if "condition" in table.column_names else None
            if cond is None:
                (plain / name).mkdir()
                pq.write_table(table, plain / name / "part-0.parquet")
                continue
            for value in pc.unique(table.column(cond)).to_pylist():
                part = plain / name / f"condition={value}"
                part.mkdir(parents=True)
                rows = table.filter(pc.equal(table.column(cond), value))
                pq.write_table(rows.drop_columns([cond]), part / "part-0.parquet")
    files = Files([tmp_path / "served"])
    info, table = run_info(files, Entry("run", "p", plain.resolve(), "plain"))
    assert table.num_rows == sessions.num_rows and info.files is not None and not info.files.follows_markers
    for sid in sessions.column("session_id").to_pylist()[:3]:
        part = int(table.filter(pc.equal(table.column("session_id"), sid)).column("_part")[0].as_py())
        row = files.session_row(plain, info.files, part, sid)
        want = sessions.filter(pc.equal(sessions.column("session_id"), sid)).to_pylist()[0]
        assert row is not None and row["condition"] == want["condition"]
        got = files.turn_rows(info.files, part, sid)
        expected = sorted(t["turn"] for t in turns.filter(pc.equal(turns.column("session_id"), sid)).to_pylist())
        assert expected and [t["turn"] for t in got] == expected
