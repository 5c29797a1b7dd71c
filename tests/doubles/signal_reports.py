"""Writes tests/llm/parse/signal_reports.json.xz: extractor replies and what ``parse_signal_report`` made of each.

The fixture pins the parser's whole outcome (value, error, detail, repairs and their order,
warnings, the decoded ``raw``) for a large corpus, so that a faster parser can be proved to read
every reply exactly as the one it replaces did (tests/llm/parse/test_signal_report_golden.py).
Regenerate it ONLY on purpose, from the commit whose behaviour is the reference, and say so in
the commit message: ``python tests/doubles/signal_reports.py``.

The corpus, all deterministic (a seeded ``random.Random``):

* the offline double's replies for every demo item (2 levels x 4 strategies x 4 turns), as sent;
* generated reports on the demo graphs and on small graphs built to be awkward for id resolution
  (shared concepts, ids that differ only in case or spacing, numeric ids, a repeated id), each
  mutated by up to four drifts: every id form, label form, field alias, legacy field, arrow label,
  null or non-string text, extra field, missing / duplicated / unknown / non-object entry, every
  wrapper shape, fences, prose, trailing commas, raw LaTeX backslashes, truncation, empty replies;
* the two recorded reference conversations' per-turn signals (../shared/knowsim-ref, not copied
  here: only their outcomes are stored, the replies are rebuilt from the shared files by
  :func:`reference_replies`).

Every case is parsed against the graph as an ``IUGraph`` and as its ``GraphIndex``.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import random
import sys
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "llm" / "parse" / "signal_reports.json.xz"

LABELS = {
    "teaching_quality": ("well_explained", "shallow", "not_mentioned"),
    "user_attempt_type": ("reasoning", "articulation", "none"),
    "assistant_response_role": ("confirmed_correct", "confirmed_incorrect_no_explanation",
                                "confirmed_incorrect_with_explanation", "ignored", "not_applicable"),
}
TEXTS = ("", "Defines it and shows why.", "Mentions it -> shallow", "shows $\\frac{1}{2}$ and \\sqrt{x}",
         "naïve “quotes” and \"escaped\" ones", "line one\nline two\tcell", "the rest\\nabla f", "→ well_explained here",
         "-> shallowly", "-> Not_Mentioned.", "no arrow at all", "\\theta = 2\\pi", "a\\\\b literal backslash")


def canon(x: Any) -> Any:
    """A JSON-able picture of ``x`` that keeps types and order (a tuple is not a list, 1 is not 1.0 or True)."""
    if isinstance(x, BaseModel):
        return ["model", type(x).__name__, canon(dict(x.__dict__)), canon(x.__pydantic_extra__),
                sorted(x.model_fields_set), canon(x.__pydantic_private__)]
    if isinstance(x, dict):
        return ["dict", [[canon(k), canon(v)] for k, v in x.items()]]
    if isinstance(x, (list, tuple)):
        return [type(x).__name__, [canon(v) for v in x]]
    if hasattr(x, "__dataclass_fields__"):
        return ["dataclass", type(x).__name__, [[f, canon(getattr(x, f))] for f in x.__dataclass_fields__]]
    return [type(x).__name__, repr(x)]


def digest(x: Any) -> str:
    return hashlib.sha256(json.dumps(canon(x), ensure_ascii=True).encode()).hexdigest()[:24]


def outcome(res: Any) -> dict:
    """What the golden file keeps of one ParseResult: the short fields as they are, value and raw by digest."""
    return {"type": type(res).__name__, "error": res.error, "detail": res.detail, "repairs": list(res.repairs),
            "repairs_type": type(res.repairs).__name__, "warnings": list(res.warnings),
            "value": digest(res.value), "raw": digest(res.raw)}


# -- graphs ----------------------------------------------------------------------------------------


def synthetic_graphs() -> dict[str, dict]:
    def g(nodes, edges=()):
        return {"nodes": [{"id": i, "concept": c} for i, c in nodes], "edges": [{"from": a, "to": b} for a, b in edges]}

    return {
        "tiny": g([("IU1", "a"), ("IU2", "b"), ("IU3", "c")], [("IU1", "IU2")]),
        "shared_concept": g([("IU1", "Fractions"), ("IU2", "fractions"), ("IU3", "Ratios"), ("IU4", "")]),
        "case_ids": g([("IU1", "one"), ("iu1", "other one"), ("IU 2", "two"), ("IU_3", "three"), ("iu-4", "four")]),
        "numeric": g([("1", "first"), ("2", "second"), ("10", "tenth"), ("IU1", "IU one")]),
        "letters": g([("A", "alpha"), ("B", "beta"), ("C", "gamma: with a colon"), ("D", "IU1")]),
        "repeated": g([("IU1", "a"), ("IU2", "b"), ("IU1", "a again")]),
        "no_concepts": g([("IU1", ""), ("IU2", ""), ("IU3", "")]),
        "wide": g([(f"IU{k}", f"concept number {k}") for k in range(1, 15)], [(f"IU{k}", f"IU{k + 1}") for k in range(1, 14)]),
    }


def all_graphs() -> dict[str, dict]:
    from ray_knowsim.demo import demo_graphs

    graphs = {f"demo/{k}": v.to_json_dict() for k, v in demo_graphs().items()}
    graphs.update({f"synthetic/{k}": v for k, v in synthetic_graphs().items()})
    return graphs


# -- replies ---------------------------------------------------------------------------------------


def offline_replies() -> Iterator[tuple[str, str, str]]:
    """(case id, graph key, reply) of the offline double's extractor, through the offline turn loop."""
    sys.path.insert(0, str(ROOT))
    from tests.doubles.offline_loop import run_session

    from ray_knowsim.demo import demo_graphs, demo_items
    from ray_knowsim.llm.offline import OfflineModel

    captured: list[str] = []

    class Capturing(OfflineModel):
        def respond(self, request):
            out = super().respond(request)
            if (request.offline_facts or {}).get("template") == "extractor":
                captured.append(out.text)
            return out

    graphs = demo_graphs()
    for item in demo_items():
        for level in ("novice", "advanced"):
            for strategy in ("minimal", "socratic", "adaptive", "comprehensive"):
                captured.clear()
                run_session(Capturing(), item, graphs[item.id], level, strategy, turns=4)
                for t, text in enumerate(captured, 1):
                    yield f"offline/{item.id}/{level}/{strategy}/{t}", f"demo/{item.id}", text


def _id_forms(node_id: Any, concept: Any, rng: random.Random) -> Any:
    node_id, concept = str(node_id), str(concept)
    digits = "".join(ch for ch in node_id if ch.isdigit())
    forms: list[Any] = [node_id.lower(), node_id.upper(), f" {node_id} ", node_id.replace("IU", "IU "),
                        node_id.replace("IU", "IU_"), node_id.replace("IU", "iu-"), f"{node_id}: {concept}",
                        f"{node_id}:  {concept.upper()}", concept, concept.upper(), f"  {concept}  ", "IU99", "", None,
                        True, False, 1.5, [node_id], {"id": node_id}, "nonsense"]
    if digits:
        forms += [int(digits), digits, f"iu{digits}", f"IU{digits}.0"]
    return rng.choice(forms)


def _label_forms(key: str, value: Any, rng: random.Random) -> Any:
    if not isinstance(value, str):
        value = rng.choice(LABELS[key])
    return rng.choice([value.upper(), value.title(), f" {value} ", value.replace("_", " "), value.replace("_", "-"),
                       value.replace("_", " ").title(), f"\t{value}\n", "excellent", "", None, 3, True, [value],
                       {"label": value}, value + "s", value.replace("_", "__"), rng.choice(LABELS[key])])


def _entry(node: dict, rng: random.Random) -> dict:
    return {"id": node["id"], "concept": node.get("concept", ""), "teaching_quality_reasoning": rng.choice(TEXTS),
            "teaching_quality": rng.choice(LABELS["teaching_quality"]), "user_attempt_reasoning": rng.choice(TEXTS),
            "user_attempt_type": rng.choice(LABELS["user_attempt_type"]),
            "assistant_response_role": rng.choice(LABELS["assistant_response_role"])}


ALIASES = ("assistant_reasoning_role", "assistant_reason_role", "assistant_role", "assistant_response")


def _mutate_entry(e: dict, node: dict, rng: random.Random) -> Any:
    kind = rng.randrange(17)
    e = dict(e)
    if kind == 0:
        e["id"] = _id_forms(node["id"], node.get("concept", ""), rng)
    elif kind == 1:
        key = rng.choice(list(LABELS))
        e[key] = _label_forms(key, e.get(key), rng)
    elif kind == 2:
        key = rng.choice(list(LABELS) + ["id", "concept", "teaching_quality_reasoning", "user_attempt_reasoning"])
        e.pop(key, None)
    elif kind == 3:
        alias = rng.choice(ALIASES)
        value = e.pop("assistant_response_role", None) if rng.random() < 0.8 else e.get("assistant_response_role")
        e[alias] = value
        if rng.random() < 0.2:
            e[rng.choice(ALIASES)] = rng.choice(LABELS["assistant_response_role"] + ("Ignored", None))
    elif kind == 4:
        value = e.pop("user_attempt_type", None) if rng.random() < 0.8 else e.get("user_attempt_type")
        e["user_attempt"] = rng.choice([value, value, "Reasoning", None, 7])
    elif kind == 5:
        if rng.random() < 0.7:
            e.pop("user_attempt_type", None)
        e["attempted_by_user"] = rng.choice([True, False, "yes", 1, None])
    elif kind == 6:
        e.pop("teaching_quality", None)
        e["teaching_quality_reasoning"] = rng.choice(
            ["clear -> well_explained", "brief → shallow", "x ->  not_mentioned.", "-> shallowly", "-> SHALLOW", "no label",
             None, 5, "a -> shallow then -> well_explained"])
    elif kind == 7:
        key = rng.choice(["concept", "teaching_quality_reasoning", "user_attempt_reasoning"])
        e[key] = rng.choice([None, None, 3, 2.5, True, ["a"], {"t": 1}, "", "plain"])
    elif kind == 8:
        e[rng.choice(["label", "confidence", "notes", "extra", "tq_code", "mentioned"])] = rng.choice(
            [f"{node['id']}: {node.get('concept', '')}", 0.9, {"nested": [1, 2.0, None]}, None, True, "text"])
    elif kind == 9:
        items = list(e.items())
        rng.shuffle(items)
        e = dict(items)
    elif kind == 10:
        return rng.choice(["IU1", 3, None, [e], True, 2.5])
    elif kind == 11:
        e["teaching_quality"] = None
    elif kind == 12:
        e = {k: e[k] for k in ("id",) if k in e}
    elif kind == 13:
        e["id"] = rng.choice(["IU1", "IU2", "A", "1", node["id"]])
    elif kind == 14:
        e["user_attempt_type"] = rng.choice(["REASONING", " none ", "articulation", "guess", None])
        e["assistant_response_role"] = rng.choice(["Confirmed Correct", "confirmed-incorrect-no-explanation",
                                                   "not applicable", "praised", None])
    elif kind == 16:
        extras = [("zeta", 1), ("alpha", [2]), ("label", "x"), ("attempted_by_user", False), ("assistant_role", "ignored")]
        rng.shuffle(extras)
        e.update(extras[: rng.randrange(2, 6)])
    else:
        e["teaching_quality"] = rng.choice(["Well Explained", "SHALLOW", " not_mentioned", "well-explained", "great"])
    return e


def _wrap(entries: list, rng: random.Random) -> Any:
    kind = rng.randrange(12)
    if kind <= 4:
        return {"iu_analysis": entries}
    return [entries,
            {"analysis": entries},
            {"iu_analysis": entries, "summary": "fine", "other": [1, 2]},
            {"iu_analysis": "not a list", "signals": entries},
            {"first": entries, "second": entries},
            {"iu_analysis": [], "signals": entries} if rng.random() < 0.5 else {"iu_analysis": [1, "x"]},
            rng.choice([{}, [], {"iu_analysis": []}, {"summary": "nothing"}, "a string", 3, None, {"iu_analysis": None}]),
            ][kind - 5]


def _text_of(value: Any, rng: random.Random) -> str | None:
    kind = rng.randrange(14)
    if kind <= 5:
        return json.dumps(value, ensure_ascii=rng.random() < 0.5)
    if kind == 6:
        return json.dumps(value, indent=2)
    if kind == 7:
        return "```json\n" + json.dumps(value) + "\n```\nThat is my analysis."
    if kind == 8:
        return "Here it is: " + json.dumps(value, separators=(",", ":")) + " -- done"
    if kind == 9:
        return json.dumps(value, indent=1).replace("\n  }", ",\n  }").replace("\n]", ",\n]")  # trailing commas
    if kind == 10:
        return json.dumps(value).replace("\\\\", "\\")  # LaTeX written with single backslashes
    if kind == 11:
        text = json.dumps(value)
        return text[: rng.randrange(1, max(2, len(text)))]  # truncated
    if kind == 12:
        return json.dumps(value).replace("\\n", "\n")  # raw line breaks inside strings
    return rng.choice(["", "   ", None, "I could not do it", "```\nno json\n```", "[1, 2", "{}", "[]", "null"])


def generated_replies(graphs: dict[str, dict], n: int, seed: int = 30) -> Iterator[tuple[str, str, Any]]:
    rng = random.Random(seed)
    keys = sorted(graphs)
    for k in range(n):
        key = rng.choice(keys)
        nodes = graphs[key]["nodes"]
        entries: list[Any] = [_entry(node, rng) for node in nodes]
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3, 4])):
            j = rng.randrange(len(entries))
            op = rng.randrange(10)
            if op <= 6:
                entries[j] = _mutate_entry(entries[j], nodes[j % len(nodes)], rng) if isinstance(entries[j], dict) else entries[j]
            elif op == 7:
                entries.pop(j)
                if not entries:
                    break
            elif op == 8:
                entries.insert(rng.randrange(len(entries) + 1), dict(entries[j]) if isinstance(entries[j], dict) else entries[j])
            else:
                entries.insert(rng.randrange(len(entries) + 1), _entry({"id": rng.choice(["IU12", "IU99", "Z", "0"]), "concept": "x"}, rng))
        if rng.random() < 0.1:
            rng.shuffle(entries)
        value = _wrap(entries, rng) if rng.random() < 0.5 else {"iu_analysis": entries}
        yield f"generated/{k}", key, _text_of(value, rng) if rng.random() < 0.45 else json.dumps(value)


#: ways the reference signals are sent, each a function of the turn's entry list
REFERENCE_FORMS = ("object", "list", "fenced_indented", "prose")


def reference_replies(ref: Path) -> Iterator[tuple[str, dict, str]]:
    """(case id, graph, reply) of the recorded conversations' per-turn signals, in each REFERENCE_FORMS."""
    records = json.loads((ref / "examples" / "mathqa_structured_adaptive_novice.json").read_text(encoding="utf-8"))
    cache = json.loads((ref / "iu_cache" / "math.json").read_text(encoding="utf-8"))
    for rec in records:
        graph = cache[rec["problem_id"]]
        for t, turn in enumerate(rec["iu_analysis_history"], 1):
            entries = turn["iu_analysis"] if isinstance(turn, dict) else turn
            texts = {"object": json.dumps({"iu_analysis": entries}, ensure_ascii=False), "list": json.dumps(entries),
                     "fenced_indented": "```json\n" + json.dumps({"iu_analysis": entries}, indent=2) + "\n```",
                     "prose": "Analysis follows. " + json.dumps({"analysis": entries[::-1]}) + " End."}
            for form in REFERENCE_FORMS:
                yield f"reference/{rec['problem_id']}/{t}/{form}", graph, texts[form]


def _both(text: str | None, graph: dict, role: str) -> dict:
    from ray_knowsim.llm.parse import parse_signal_report
    from ray_knowsim.schema.graph import IUGraph, build_index

    g = IUGraph.model_validate(graph)
    a = outcome(parse_signal_report(text, g, role=role) if role != "extractor" else parse_signal_report(text, g))
    b = outcome(parse_signal_report(text, build_index(g), role=role))
    return a if a == b else {"graph": a, "index": b}


def main() -> None:
    sys.path.insert(0, str(ROOT))
    graphs = all_graphs()
    cases = []
    for cid, key, text in offline_replies():
        cases.append({"id": cid, "graph": key, "text": text, "role": "extractor"})
    for cid, key, text in generated_replies(graphs, 2600):
        cases.append({"id": cid, "graph": key, "text": text, "role": "extractor" if not cid.endswith("7") else "judge"})
    for case in cases:
        case["out"] = _both(case["text"], graphs[case["graph"]], case["role"])
    reference = {}
    ref = ROOT.parent / "shared" / "knowsim-ref"
    for cid, graph, text in reference_replies(ref):
        reference[cid] = _both(text, graph, "extractor")
    data = {"graphs": graphs, "cases": cases, "reference": reference}
    FIXTURE.write_bytes(lzma.compress(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), preset=9))
    ok = sum(1 for c in cases if (c["out"].get("error", "") if "error" in c["out"] else c["out"]["graph"]["error"]) is None)
    print({k: sum(1 for c in cases if c["id"].startswith(k)) for k in ("offline", "generated")})
    print(f"{FIXTURE.name}: {len(cases)} cases ({ok} accepted), {len(reference)} reference; {FIXTURE.stat().st_size} bytes")


if __name__ == "__main__":
    main()
