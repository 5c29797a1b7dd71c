"""Ray's driver-side printer of forwarded lines, wrapped so that picked lines go elsewhere (issue 51:
the GCS's "Failed to kill actor ... Socket closed" at shutdown belongs in the run log). Uses Ray's
real dispatcher object; no cluster is started."""

from __future__ import annotations

from ray_knowsim.cluster.ray_session import divert_forwarded_lines, split_forwarded


def test_split_keeps_the_rest_of_a_batch():
    data = {"pid": "gcs_server", "is_err": True, "lines": ["noise 1", "keep me", "noise 2"]}
    kept, picked = split_forwarded(data, lambda line: line.startswith("noise"))
    assert kept == {**data, "lines": ["keep me"]} and picked == ["noise 1", "noise 2"]
    assert split_forwarded({**data, "lines": ["noise"]}, lambda line: True) == (None, ["noise"])
    assert split_forwarded(data, lambda line: False) == (data, [])


def test_the_printer_is_wrapped_once_and_prints_only_what_is_not_picked():
    from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

    printed, written = [], []
    dispatcher.add_handler("ray_print_logs", printed.append)
    try:
        assert divert_forwarded_lines(lambda line: "Socket closed" in line, written.append)
        assert not divert_forwarded_lines(lambda line: True, written.append)  # a second run does not wrap it again
        dispatcher.emit({"pid": "gcs_server", "is_err": True, "lines": ["Failed to kill actor 1: Socket closed", "real error"]})
        dispatcher.emit({"pid": 123, "is_err": False, "lines": ["hello"]})
    finally:
        dispatcher.remove_handler("ray_print_logs")  # as ray.shutdown does
    assert [d["lines"] for d in printed] == [["real error"], ["hello"]]
    assert written == ["(gcs_server) Failed to kill actor 1: Socket closed"]
    assert all(name != "ray_print_logs" for name, _ in dispatcher.handlers)
