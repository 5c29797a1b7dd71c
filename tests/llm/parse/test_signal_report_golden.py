"""``parse_signal_report`` reads every reply of a large recorded corpus exactly as it did when the
corpus was recorded: the accepted entries (values, types, field order, extras), the repairs and
their order, every failure's name and detail, and the decoded ``raw``, with the graph given as an
``IUGraph`` and as a ``GraphIndex``. Speed-ups of the parser must keep all of it byte-identical;
the corpus and how it is made are described in tests/doubles/signal_reports.py, which writes it."""

from __future__ import annotations

import json
import lzma
from collections import Counter

import pytest

from tests.doubles.signal_reports import FIXTURE, outcome, reference_replies

from ray_knowsim.llm.parse import parse_signal_report
from ray_knowsim.schema.graph import IUGraph, build_index
from ray_knowsim.schema.signals import SignalEntry, normalize_entry

DATA = json.loads(lzma.decompress(FIXTURE.read_bytes()))
GRAPHS = {k: IUGraph.model_validate(v) for k, v in DATA["graphs"].items()}
INDEXES = {k: build_index(g, k) for k, g in GRAPHS.items()}


def _check(case_id: str, text, graph: IUGraph, index, want: dict, role: str = "extractor") -> None:
    kw = {} if role == "extractor" else {"role": role}
    for name, g in (("graph", graph), ("index", index)):
        expected = want.get(name, want)
        got = outcome(parse_signal_report(text, g, **kw))
        assert got == expected, (case_id, name, {k: (got[k], expected[k]) for k in got if got[k] != expected.get(k)})


def test_the_corpus_covers_what_the_parser_decides():
    errors = Counter((c["out"].get("graph", c["out"])["error"]) for c in DATA["cases"])
    assert errors[None] > 1000 and errors["extractor_invalid_signals"] > 1000
    for kind in ("empty", "invalid_json", "invalid_output", "invalid_signals"):
        assert errors[f"extractor_{kind}"] > 0 and errors[f"judge_{kind}"] > 0, kind
    repairs = {r.split(":")[0] for c in DATA["cases"] for r in c["out"].get("graph", c["out"])["repairs"]}
    assert {"renamed", "label", "id", "top_level_list", "teaching_quality_from_reasoning", "null_text", "legacy",
            "fenced_block", "surrounding_text", "trailing_commas", "latex_from_escapes", "literal_backslashes"} <= repairs


@pytest.mark.parametrize("chunk", range(8))
def test_every_recorded_reply_reads_as_it_did(chunk):
    for case in DATA["cases"][chunk::8]:
        _check(case["id"], case["text"], GRAPHS[case["graph"]], INDEXES[case["graph"]], case["out"], case["role"])


def test_the_reference_signals_read_as_they_did(shared_ref):
    seen = set()
    for case_id, graph, text in reference_replies(shared_ref):
        g = IUGraph.model_validate(graph)
        _check(case_id, text, g, build_index(g), DATA["reference"][case_id])
        seen.add(case_id)
    assert seen == set(DATA["reference"])


def test_accepted_entries_are_what_the_reference_normalisation_makes_of_them():
    """The accepted entry is canonical, so spec §1.5's normalisation of it is the entry itself."""
    checked = 0
    for case in DATA["cases"]:
        res = parse_signal_report(case["text"], INDEXES[case["graph"]])
        for e in res.value.entries if res.ok else ():
            again = normalize_entry(e.model_dump())
            assert type(again) is SignalEntry and again == e and again.model_fields_set == e.model_fields_set, case["id"]
            checked += 1
    assert checked > 9_000
