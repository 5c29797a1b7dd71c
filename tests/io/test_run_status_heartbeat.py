"""A run whose driver died shows as interrupted once its heartbeat is stale (io/rundir.py), one
word for it everywhere; a driver that still beats shows as running."""

from __future__ import annotations

import json
import time

from ray_knowsim.run.manifest import heartbeat, now
from ray_knowsim.io.commits import RunDir
from ray_knowsim.io.rundir import HEARTBEAT_FILE, HEARTBEAT_STALE_S, RunStatus, last_seen_s_ago, manifest_facts


def _manifest(started: str, finished: bool = False) -> dict:
    inv = {"started_at": started, "finished_at": started if finished else None, "status": "ok" if finished else "running"}
    return {"plan": {"n_sessions": 10}, "invocations": [{"started_at": started, "finished_at": started, "status": "interrupted"}, inv]}


def _status(root, manifest) -> RunStatus:
    return RunStatus(root=root, layout="committed", config_hash="h", n_committed=4, n_ok=4, n_failed=0,
                     **manifest_facts(manifest, root))


def test_a_fresh_heartbeat_is_running_a_stale_one_interrupted(tmp_path):
    manifest = _manifest(now())
    with heartbeat(RunDir(tmp_path), invocation=1, every_s=0.05):
        beat = json.loads((tmp_path / HEARTBEAT_FILE).read_text())
        assert beat["invocation"] == 1
        c = _status(tmp_path, manifest).completeness()
        assert c.reason == "running" and "heartbeat is fresh" in c.text
    later = time.time() + HEARTBEAT_STALE_S + 120  # the same run looked at after its driver died
    assert last_seen_s_ago(tmp_path, manifest, now=later) > HEARTBEAT_STALE_S
    st = _status(tmp_path, manifest)
    st.last_seen_s_ago = last_seen_s_ago(tmp_path, manifest, now=later)
    c = st.completeness()
    assert c.reason == "interrupted" and "without recording its end" in c.text and "resumes" in c.text


def test_without_a_beat_of_this_invocation_its_start_is_the_last_sign_of_life(tmp_path):
    old = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(time.time() - 3600))
    (tmp_path / HEARTBEAT_FILE).write_text(json.dumps({"invocation": 0, "at": time.time()}))  # an earlier invocation's beat
    assert _status(tmp_path, _manifest(old)).completeness().reason == "interrupted"  # a driver killed an hour ago
    assert _status(tmp_path, _manifest(now())).completeness().reason == "running"  # one that just started
    done = _status(tmp_path, _manifest(old, finished=True)).completeness()
    assert done.reason == "incomplete"  # ended normally with sessions missing: not a dead driver
