import asyncio
import json

from ray_knowsim.cli.main import main
from ray_knowsim.demo import demo_items
from ray_knowsim.graph_extraction.extract import bridging_warnings, extract_graphs
from ray_knowsim.schema.chat import ChatResponse, Usage
from ray_knowsim.schema.graph import parse_graph

CYCLIC = {"nodes": [{"id": "IU1", "concept": "a", "abstraction_level": 0.5, "description": "d"},
                    {"id": "IU2", "concept": "b", "abstraction_level": 0.5, "description": "d"}],
          "edges": [{"from": "IU1", "to": "IU2", "delta_l": 0}, {"from": "IU2", "to": "IU1", "delta_l": 0}]}  # fmt: skip
VALID = {"nodes": [{"id": "IU1", "concept": "a", "abstraction_level": 0.9, "description": "d"},
                   {"id": "IU2", "concept": "b", "abstraction_level": 0.3, "description": "d"}],
         "edges": [{"from": "IU1", "to": "IU2", "delta_l": 0.6}]}  # fmt: skip


class Scripted:
    """Answers each item's requests with the next reply of its script."""

    name = "scripted"

    def __init__(self, replies):
        self.replies = {k: list(v) for k, v in replies.items()}
        self.seen = []

    async def generate(self, r):
        item = r.request_id.split(":")[0]
        self.seen.append((item, r.temperature, r.max_tokens))
        script = self.replies[item]
        reply = script.pop(0) if len(script) > 1 else script[0]
        return ChatResponse(text=json.dumps(reply) if isinstance(reply, dict) else reply, usage=Usage(10, 5))


def test_cycle_is_rejected_and_the_ladder_retries_until_valid():
    items = demo_items("math")[:2]
    model = Scripted({items[0].id: [CYCLIC, "not json", VALID], items[1].id: ["never json"]})
    good, bad = asyncio.run(extract_graphs(model, items))
    assert good.graph is not None and good.attempts == 3 and good.error is None
    assert any("spans 0.60" in w for w in good.warnings)  # bridging check
    assert bad.graph is None and bad.error == "graph_extractor_invalid_json" and bad.attempts == 7
    temps = [t for item, t, _ in model.seen if item == items[1].id]
    assert temps[0] == 0.2 and set(temps[1:]) == {0.0}


def test_bridging_warning_threshold():
    graph = parse_graph(VALID, "x")
    assert len(bridging_warnings(graph)) == 1
    flat = parse_graph({**VALID, "nodes": [dict(n, abstraction_level=0.5) for n in VALID["nodes"]]}, "x")
    assert bridging_warnings(flat) == []


def test_cli_merges_without_touching_existing_entries(tmp_path, capsys):
    items_file = tmp_path / "items.jsonl"
    items = demo_items("math")
    items_file.write_text("\n".join(json.dumps({"id": i.id, "problem": i.question, "solution": i.reference_answer}) for i in items))
    out = tmp_path / "graphs.json"
    keep = {"nodes": [{"id": "K1", "concept": "kept", "description": "untouched"}], "edges": [], "custom": 1}
    out.write_text(json.dumps({items[0].id: keep}))
    assert main(["extract-graphs", str(items_file), "--out", str(out)]) == 0
    merged = json.loads(out.read_text())
    assert merged[items[0].id] == keep
    assert set(merged) == {i.id for i in items}
    for item in items[1:]:
        parse_graph(merged[item.id], item.id)
    assert "1 of 4 items already" in capsys.readouterr().err
