"""Diagnostics that ask nothing of the user go to RUN_DIR/run.log, not the terminal (issue 51):
our own "progress board not reachable", a worker's "progress report ... not sent", and Ray's
"Failed to kill actor ... Socket closed" forwarded from the GCS at shutdown."""

from __future__ import annotations

from ray_knowsim.run.runlog import DIAGNOSTICS, RUN_LOG, is_noise, run_log, to_run_log

GCS_NOISE = ("[2026-12-07 20:08:52,438 E 8726 8726] (gcs_server) gcs_actor_scheduler.cc:538: Failed to kill actor "
             "29cd5195df9c56421e50d84b01000000, return status: Invalid: KillActor RPC failed for actor "
             "29cd5195df9c56421e50d84b01000000: RpcError: RPC error: Socket closed rpc_code: 14")


def test_the_known_noise_is_picked_and_nothing_else():
    assert is_noise(GCS_NOISE)
    assert is_noise("progress report of shard-000003 not sent (RayActorError: gone); the display may lag")
    assert not is_noise("shard-000003 did not finish: RuntimeError: boom")
    assert not is_noise("Failed to kill actor 29cd, return status: OK")  # not the shutdown race: it stays visible


def test_diagnostics_go_to_the_run_log_while_a_run_holds_it(tmp_path, capsys):
    with run_log(tmp_path) as path:
        DIAGNOSTICS.warning("progress board not reachable (%s: %s); the display may lag", "GetTimeoutError", "5 s")
        to_run_log(f"(gcs_server) {GCS_NOISE}")
    assert path == tmp_path / RUN_LOG
    text = path.read_text()
    assert "warning: progress board not reachable (GetTimeoutError: 5 s)" in text and "Socket closed" in text
    out = capsys.readouterr()
    assert "not reachable" not in out.out + out.err and "Socket closed" not in out.out + out.err
    assert not [h for h in DIAGNOSTICS.handlers if type(h).__name__ == "_RunLogHandler"]  # released with the run


def test_before_the_run_dir_exists_a_diagnostic_goes_to_stderr(tmp_path, capsys):
    with run_log(tmp_path / "not-yet"):
        DIAGNOSTICS.warning("early")
    assert "early" in capsys.readouterr().err and not (tmp_path / "not-yet").exists()
