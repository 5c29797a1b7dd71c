"""Benchmark: the simulator audit on a large run — the report's audit of a 10,000-conversation run
took 167 s of its 171 s when "which IU is this sentence about" scored every IU of the graph for
every sentence; it now scores only the IUs that hold one of the sentence's words.

Workload: the real tutor replies of the reference release's recorded conversations
(``../shared/knowsim-ref/examples``: a real model's text, 15 replies each) with their items' IU
graphs (``iu_cache``), each reply audited ``--repeat`` times.

Measured in one run, on the same replies:
* the baseline: every IU scored for every sentence, each score summing all of the IU's words (the
  code before, kept here as the reference);
* ``ray_knowsim.audit.wording.about``, the product's;
both at the audit's two settings (the topic: share 0.2 and margin 1.2; the leaning: 0.08 and 1.0),
checked equal reply by reply. The last line is one JSON object with the figures (``about_ratio``:
the baseline's time over the product's).

Run: ``source scripts/_venv.sh && python scripts/bench/audit.py`` (``--help`` for sizes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ray_knowsim.audit import wording
from ray_knowsim.audit.wording import _WHOLE_SENTENCE, about, content_words, graph_words
from ray_knowsim.schema.graph import IUGraph

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "knowsim-ref"
SETTINGS = ((wording.ABOUT_SHARE, wording.ABOUT_MARGIN), (0.08, 1.0))


def _baseline_share(iu, words: frozenset[str]) -> float:
    total = sum(iu.weights.values())
    return sum(w for word, w in iu.weights.items() if word in words) / total if total else 0.0


def baseline_about(text: str, ius, least: float, margin: float) -> dict[str, str]:
    """Every judgeable IU scored for every sentence (the audit's code before the index)."""
    out: dict[str, str] = {}
    for sentence in (s.strip() for s in _WHOLE_SENTENCE.split(text or "") if s and s.strip()):
        words = content_words(sentence)
        ranked = sorted(((_baseline_share(iu, words), i) for i, iu in ius.items() if iu.judgeable), reverse=True)
        if not ranked or ranked[0][0] < least:
            continue
        runner_up = ranked[1][0] if len(ranked) > 1 else 0.0
        if ranked[0][0] >= margin * runner_up and ranked[0][0] > runner_up and len(words & ius[ranked[0][1]].weights.keys()) >= 2:
            out.setdefault(ranked[0][1], sentence)
    return out


def workload(repeat: int) -> list[tuple[dict, str]]:
    """(the item's IU words, a recorded tutor reply) for every reply of every recorded conversation."""
    out = []
    for path in sorted((SHARED / "examples").glob("*.json")):
        for record in json.loads(path.read_text()):
            graphs = json.loads((SHARED / "iu_cache" / f"{record['task']}.json").read_text())
            ius = graph_words(IUGraph.model_validate(graphs[record["problem_id"]]), record["problem"], record["reference_answer"])
            out += [(ius, text) for who, text in record["conversation"] if who == "assistant"]
    return out * repeat


def timed(fn, work: list[tuple[dict, str]]) -> tuple[float, list]:
    start = time.perf_counter()
    got = [fn(text, ius, least, margin) for ius, text in work for least, margin in SETTINGS]
    return time.perf_counter() - start, got


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=50, help="times each recorded reply is audited (default 50)")
    args = p.parse_args(argv)
    if not SHARED.is_dir():
        print(f"reference graphs not found at {SHARED}", file=sys.stderr)
        return 2
    work = workload(args.repeat)
    timed(about, work[:50])  # warm the word caches both use alike
    base_s, base = timed(baseline_about, work)
    new_s, new = timed(about, work)
    if base != new:
        print("the product's answers differ from the baseline's", file=sys.stderr)
        return 1
    calls = len(work) * len(SETTINGS)
    print(f"{len(work):,} replies x {len(SETTINGS)} settings: baseline {base_s:.2f} s ({1e6 * base_s / calls:.0f} us/call), "
          f"product {new_s:.2f} s ({1e6 * new_s / calls:.0f} us/call): {base_s / new_s:.1f}x, same answers")
    print(json.dumps({"replies": len(work), "calls": calls, "baseline_s": round(base_s, 3), "product_s": round(new_s, 3),
                      "about_ratio": round(base_s / new_s, 2), "same_answers": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
