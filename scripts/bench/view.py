"""Benchmark: browsing every conversation of a run with ``ray-knowsim view`` vs the report page
that embeds them all (what there was before the viewer).

Workload: committed run directories of N sessions (tests/doubles/synthetic.py rows, 15 turns,
cut into shards with commit markers as the engine writes them; tests/doubles/rundirs.py), for each
size in ``--sizes``.

Measured in one run, per size:
* baseline: ``build_report`` with every conversation of the run embedded (``--sessions`` = all
  ids): seconds to build and bytes of the HTML page;
* viewer (aiohttp on loopback, in this process): bytes and seconds of the run page (the first
  request: it reads the projected session columns), of a page of 50 sessions of the conversation
  list (twice, then filtered and sorted; served from the cache of projected columns), and of one
  15-turn conversation (with its heatmap).
Ratios: ``report_bytes / list_bytes`` and ``report_seconds / (list_seconds + conversation_seconds)``
(what it takes to see one conversation chosen from the list, against what it took to see any).
Viewer only (so also with ``--skip-report``): ``view_list_vs_run_page_ratio``, the list page's
seconds (served from the cache of projected columns) over the run page's (the first request, which
reads them).
The last line is one JSON object with the figures.

Run: ``source scripts/_venv.sh && python scripts/bench/view.py`` (``--sizes 168,540``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def fetch(url: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as resp:
        body = resp.read()
    return len(body), time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="168,540", help="comma-separated run sizes (sessions)")
    p.add_argument("--skip-report", action="store_true", help="viewer figures only (the baseline takes minutes at 540)")
    args = p.parse_args()

    from ray_knowsim.io.rundir import RunReader
    from ray_knowsim.report.build import ReportOptions, build_report
    from ray_knowsim.view.data import Files
    from ray_knowsim.view.discover import entry_id
    from ray_knowsim.view.routes import ViewState
    from ray_knowsim.view.server import serve
    from tests.doubles.rundirs import committed_run

    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "served"
        root.mkdir()
        sizes = [int(s) for s in args.sizes.split(",")]
        for n in sizes:
            committed_run(root, f"run{n}", n_sessions=n, max_turns=15, failed_share=0.02, seed=n)
        urls: list[str] = []
        ready = threading.Event()
        stop = threading.Event()
        state = ViewState(Files([root]))
        thread = threading.Thread(target=serve, args=(state, "127.0.0.1", 0, lambda u: (urls.append(u), ready.set()), stop), daemon=True)
        thread.start()
        ready.wait(60)
        base = urls[0].rstrip("/")
        for n in sizes:
            run = root / f"run{n}"
            rid = entry_id(Path(os.path.realpath(run)))
            ids = list(RunReader.open(run).entries())
            row: dict[str, float] = {"sessions": n}
            row["run_page_bytes"], row["run_page_s"] = fetch(f"{base}/run/{rid}")
            row["list_bytes"], row["list_s"] = fetch(f"{base}/run/{rid}/sessions")
            _, row["list_again_s"] = fetch(f"{base}/run/{rid}/sessions")
            row["list_filtered_bytes"], row["list_filtered_s"] = fetch(f"{base}/run/{rid}/sessions?level=novice&min.kg=2&sort=dc&desc=1")
            sid = ids[0]
            row["conversation_bytes"], row["conversation_s"] = fetch(f"{base}/run/{rid}/conversation?sid={quote(sid, safe='')}")
            if not args.skip_report:
                t0 = time.perf_counter()
                rep = build_report(run, Path(tmp) / f"report{n}", ReportOptions(sessions=tuple(ids), sample=0))
                row["report_all_s"] = time.perf_counter() - t0
                row["report_all_bytes"] = rep.html_path.stat().st_size
                row["bytes_ratio"] = row["report_all_bytes"] / row["list_bytes"]
                row["seconds_ratio"] = row["report_all_s"] / (row["list_s"] + row["conversation_s"])
            out[f"n{n}"] = row
            print(json.dumps(row), flush=True)
        stop.set()
        thread.join(10)
    last = out[f"n{sizes[-1]}"]
    summary = {"sizes": sizes, **{f"{k}_n{sizes[-1]}": v for k, v in last.items() if k != "sessions"}}
    summary["view_list_vs_run_page_ratio"] = round(last["list_s"] / last["run_page_s"], 3)
    if "bytes_ratio" in last:
        summary["view_bytes_ratio"] = last["bytes_ratio"]
        summary["view_seconds_ratio"] = last["seconds_ratio"]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
