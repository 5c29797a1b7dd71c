"""Benchmark: CPU time of ``parse_signal_report`` on the replies a shard reads, old code against new.

The replies are the offline double's 224 extractor replies of the golden corpus
(tests/llm/parse/signal_reports.json.xz) and, where ../shared/knowsim-ref is present, the 30
recorded reference turns in four forms (real model output): all valid, as nearly every live reply
is. Each measurement parses all of them ``--rounds`` times in one process (``time.process_time``)
against the graph as a shard passes it (``IUGraph``), after one warm-up round, and reports
microseconds per reply.

``--against DIR`` (a checkout of another commit, e.g. ``git worktree add /tmp/old main``) runs the
measurement alternately with DIR's package and with this checkout's, ``--pairs`` times each, in
fresh processes, and prints both series and the ratio of their medians, for each set of replies.

Run: ``source scripts/_venv.sh && python scripts/bench/parse_signals.py --against /tmp/old``.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "llm" / "parse" / "signal_reports.json.xz"


def _replies() -> dict[str, list[tuple[str, dict]]]:
    data = json.loads(lzma.decompress(FIXTURE.read_bytes()))
    out = {"offline": [(c["text"], data["graphs"][c["graph"]]) for c in data["cases"] if c["id"].startswith("offline/")]}
    ref = ROOT.parent / "shared" / "knowsim-ref"
    if ref.is_dir():
        sys.path.insert(0, str(ROOT))
        from tests.doubles.signal_reports import reference_replies

        out["reference"] = [(text, graph) for _, graph, text in reference_replies(ref)]
    return out


def measure(rounds: int) -> dict[str, float]:
    """Microseconds of CPU per parsed reply, in this process: the offline double's, the reference
    ones and all together."""
    from ray_knowsim.llm.parse import parse_signal_report
    from ray_knowsim.schema.graph import IUGraph

    graphs: dict[int, IUGraph] = {}
    sets = {name: [(text, graphs.setdefault(id(graph), IUGraph.model_validate(graph))) for text, graph in replies]
            for name, replies in _replies().items()}
    result, total, n = {}, 0.0, 0
    for name, work in sets.items():
        for text, g in work:  # warm-up: caches, first calls
            assert parse_signal_report(text, g).ok
        start = time.process_time()
        for _ in range(rounds):
            for text, g in work:
                parse_signal_report(text, g)
        spent = time.process_time() - start
        result[name] = round(spent / (rounds * len(work)) * 1e6, 1)
        total, n = total + spent, n + rounds * len(work)
    result["all"] = round(total / n * 1e6, 1)
    return result


def _run(src: Path, rounds: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(src))
    code = ("import sys, ray_knowsim; sys.path.insert(0, %r); from scripts.bench.parse_signals import measure; "
            "assert ray_knowsim.__file__.startswith(%r), ray_knowsim.__file__; import json; print(json.dumps(measure(%d)))") % (str(ROOT), str(src), rounds)
    return json.loads(subprocess.run([sys.executable, "-c", code], env=env, cwd=src, check=True, capture_output=True,
                                     text=True).stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--against", type=Path, help="another checkout: alternate its package with this one's")
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    if args.against is None:
        print(json.dumps({"us_per_reply": measure(args.rounds)}))
        return
    old, new = [], []
    for _ in range(args.pairs):
        old.append(_run(args.against.resolve(), args.rounds))
        new.append(_run(ROOT, args.rounds))
    report = {}
    for name in old[0]:
        a, b = [x[name] for x in old], [x[name] for x in new]
        report[name] = {"old_us_per_reply": a, "new_us_per_reply": b,
                        "speedup_of_medians": round(statistics.median(a) / statistics.median(b), 2)}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
