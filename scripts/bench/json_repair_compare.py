"""Comparison: our decode-first JSON reader against the ``json-repair`` package, on the answer
corpus (``tests/llm/data/answer_corpus.yaml``: the shapes models really write, each with the
value it must read as or the refusal it must get).

Per reader, over the corpus's ``json`` cases and the learner messages of its ``user_sim`` cases:

* ``correct``: the value it must read as, or a refusal where one is due (a truncated reply, no JSON);
* ``changed``: a value other than the one meant (a different string, a truncated reply completed);
  ``silent`` counts those of them the reader did not report (json-repair's ``logging=True`` log is
  empty, or for ours no repair was listed);
* ``refused``: no value where one was meant.

A reader may touch a learner's message only if it is correct wherever ours is and never changes
meaning silently. The last line is one JSON object (``json_repair_vs_ours_correct_ratio``).

Run: ``source scripts/_venv.sh && pip install json-repair && python scripts/bench/json_repair_compare.py``
(json-repair is not a dependency of the project: this script is how it was weighed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "llm" / "data" / "answer_corpus.yaml"
REFUSED = object()


def cases() -> list[dict[str, Any]]:
    """(id, reply, expected value or REFUSED, where to look) for every JSON-level case of the corpus."""
    corpus = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    out = [{"id": f"json/{c['id']}", "reply": c["reply"], "want": REFUSED if "error" in c else c["value"], "pick": None}
           for c in corpus["json"]]
    out += [{"id": f"user_sim/{c['id']}", "reply": c["reply"], "want": REFUSED if "error" in c else c["message"], "pick": "message"}
            for c in corpus["user_sim"]]
    return out


def ours(reply: str) -> tuple[Any, list[str]]:
    from ray_knowsim.llm.parse import extract_json

    got = extract_json(reply, allow_array=True)
    return (REFUSED if got.error is not None else got.value), list(got.repairs)


def theirs(reply: str) -> tuple[Any, list[str]]:
    import json_repair

    try:
        value, log = json_repair.repair_json(reply, return_objects=True, logging=True)
    except Exception as exc:  # noqa: BLE001 - a crash is a refusal
        return REFUSED, [f"raised {type(exc).__name__}"]
    if value in ("", None, {}, []) and reply.strip():  # what json-repair returns when it finds nothing
        return REFUSED, [str(entry) for entry in log]
    return value, [str(entry) for entry in log]


def judge(case: dict[str, Any], read: Callable[[str], tuple[Any, list[str]]]) -> str:
    value, notes = read(case["reply"])
    if case["pick"] is not None and value is not REFUSED:
        value = value.get(case["pick"], REFUSED) if isinstance(value, dict) else REFUSED
    want = case["want"]
    if value is REFUSED:
        return "correct" if want is REFUSED else "refused"
    if want is not REFUSED and value == want:
        return "correct"
    return "changed" if notes else "silent"


def main() -> int:
    try:
        import json_repair  # noqa: F401
    except ImportError:
        print("json-repair is not installed here: pip install json-repair (it is not a project dependency)", file=sys.stderr)
        return 2
    from importlib import metadata

    rows = cases()
    results = {name: {c["id"]: judge(c, fn) for c in rows} for name, fn in (("ours", ours), ("json_repair", theirs))}
    width = max(len(c["id"]) for c in rows)
    print(f"{'case':<{width}}  {'ours':<8} json-repair {metadata.version('json-repair')}")
    for c in rows:
        a, b = results["ours"][c["id"]], results["json_repair"][c["id"]]
        print(f"{c['id']:<{width}}  {a:<8} {b}{'   <-' if a != b else ''}")
    summary: dict[str, Any] = {"cases": len(rows)}
    for name, got in results.items():
        for outcome in ("correct", "changed", "silent", "refused"):
            summary[f"{name}_{outcome}"] = sum(v == outcome for v in got.values())
    summary["json_repair_wrong_where_ours_correct"] = sorted(
        k for k, v in results["json_repair"].items() if v != "correct" and results["ours"][k] == "correct")
    summary["ours_wrong_where_json_repair_correct"] = sorted(
        k for k, v in results["ours"].items() if v != "correct" and results["json_repair"][k] == "correct")
    summary["json_repair_vs_ours_correct_ratio"] = round(summary["json_repair_correct"] / max(1, summary["ours_correct"]), 3)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
