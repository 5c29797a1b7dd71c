"""Which simulated sessions stand for which human (arm, condition).

Sim sessions carry ``condition`` ("<model>:<strategy>"), ``assistant_model`` and
``assistant_strategy``. Two ways to map them:

* ``--sim-map FILE`` (YAML or JSON): ``{arm: {condition label or code: sim condition | [sim
  conditions]}}``, matched against the sessions' ``condition`` column; e.g.
  ``{"strategy": {"Socratic": "gpt-5.4:socratic", ...}, "model": {"GPT-5.4": ...}}``.
  Arms the file names are mapped only by it; a listed sim condition absent from the run is an error.
* the convention, for arms the file does not name:
  - strategy arm: sessions whose ``assistant_strategy`` is socratic / adaptive / comprehensive
    (case and punctuation ignored) from the ONE assistant model that ran the most of these three
    strategies (a tie is ambiguous: pass a map);
  - model arm: sessions whose ``assistant_model`` is GPT-5.4 / Gemini 3 Pro / Claude Opus 4.7
    (normalised: 'claude-opus-4-7' == 'Claude Opus 4.7'; a provider prefix 'x/' is dropped; an
    exact match wins, else a unique prefix match such as 'gemini-3-pro-preview'), restricted to
    the ONE strategy shared by the most of those models (a tie is ambiguous: pass a map).
  An arm with fewer than two matching conditions is reported as absent (its pairs count as not
  evaluable).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ray_knowsim.io.yamltext import load_yaml
from ray_knowsim.validate.conditions import CONDITION_CODES, condition_label, norm_token

Triple = tuple[str, str, str]  # (condition, assistant_model, assistant_strategy)


class MappingError(ValueError):
    """The sim sessions cannot be assigned to human conditions without a (better) map."""


def load_sim_map(path: Path) -> dict[str, dict[str, list[str]]]:
    """Read and check a map file; labels are normalised to the release's condition labels."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        raw = json.loads(text) if path.suffix.lower() == ".json" else load_yaml(text, str(path))
    except Exception as exc:
        raise MappingError(f"{path.name}: not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {exc}") from exc
    if not isinstance(raw, dict):
        raise MappingError(f"{path.name}: expected a mapping arm -> {{condition: sim condition(s)}}")
    out: dict[str, dict[str, list[str]]] = {}
    for arm, conds in raw.items():
        if arm not in CONDITION_CODES:
            raise MappingError(f"{path.name}: unknown arm {arm!r} (expected one of {', '.join(CONDITION_CODES)})")
        if not isinstance(conds, dict):
            raise MappingError(f"{path.name}: arm {arm!r} must map condition labels to sim conditions")
        out[arm] = {}
        for key, value in conds.items():
            try:
                label = condition_label(arm, key)
            except ValueError as exc:
                raise MappingError(f"{path.name}, arm {arm!r}: {exc}") from None
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                raise MappingError(f"{path.name}, arm {arm!r}, {key!r}: expected a sim condition string or a list of them")
            out[arm][label] = list(values)
    return out


def _model_token(model: str) -> str:
    return norm_token(str(model).rsplit("/", 1)[-1])


def _match_models(label: str, models: Iterable[str]) -> list[str]:
    want = norm_token(label)
    models = sorted(set(models))
    exact = [m for m in models if _model_token(m) == want]
    return exact or [m for m in models if _model_token(m).startswith(want)]


def _only_best(counts: dict[str, int], arm: str, what: str) -> str:
    best = max(counts.values())
    top = sorted(k for k, v in counts.items() if v == best)
    if len(top) > 1:
        raise MappingError(
            f"{arm} arm: ambiguous {what} ({', '.join(top)} cover the arm equally); pass --sim-map to choose"
        )
    return top[0]


def _auto_strategy(triples: list[Triple]) -> dict[str, list[Triple]]:
    names = {norm_token(v): v for v in CONDITION_CODES["strategy"].values()}
    cand = [t for t in triples if norm_token(t[2]) in names]
    if not cand:
        return {}
    per_model: dict[str, set[str]] = {}
    for _, model, strategy in cand:
        per_model.setdefault(model, set()).add(norm_token(strategy))
    if max(len(s) for s in per_model.values()) < 2:
        return {}  # one strategy per model: no contrast to validate
    model = _only_best({m: len(s) for m, s in per_model.items()}, "strategy", "assistant model")
    out: dict[str, list[Triple]] = {}
    for t in cand:
        if t[1] == model:
            out.setdefault(names[norm_token(t[2])], []).append(t)
    return out


def _auto_model(triples: list[Triple]) -> dict[str, list[Triple]]:
    models = {t[1] for t in triples}
    chosen: dict[str, str] = {}
    for label in CONDITION_CODES["model"].values():
        hits = _match_models(label, models)
        if len(hits) > 1:
            raise MappingError(f"model arm: {label!r} matches several assistant models ({', '.join(hits)}); pass --sim-map")
        if hits:
            chosen[label] = hits[0]
    if len(chosen) < 2:
        return {}  # one model: no contrast to validate
    per_strategy: dict[str, int] = {}
    for label, model in chosen.items():
        for s in {t[2] for t in triples if t[1] == model}:
            per_strategy[s] = per_strategy.get(s, 0) + 1
    strategy = _only_best(per_strategy, "model", "assistant strategy")
    out: dict[str, list[Triple]] = {}
    for label, model in chosen.items():
        hit = [t for t in triples if t[1] == model and t[2] == strategy]
        if hit:
            out[label] = hit
    return out


def resolve(triples: Iterable[Triple], sim_map: dict[str, dict[str, list[str]]] | None = None) -> tuple[dict[Triple, list[tuple[str, str]]], list[str]]:
    """Triple -> [(arm, condition label)], plus human-readable notes on what was chosen."""
    triples = sorted(set(triples))
    sim_map = sim_map or {}
    notes: list[str] = []
    by_arm: dict[str, dict[str, list[Triple]]] = {}
    for arm in CONDITION_CODES:
        if arm in sim_map:
            conds = {t[0] for t in triples}
            got: dict[str, list[Triple]] = {}
            for label, sims in sim_map[arm].items():
                for sc in sims:
                    if sc not in conds:
                        raise MappingError(
                            f"sim map: {arm}/{label} -> {sc!r} is not a condition of this run "
                            f"(run has: {', '.join(sorted(conds))})"
                        )
                got[label] = [t for t in triples if t[0] in sims]
            by_arm[arm] = got
            source = "sim map"
        else:
            by_arm[arm] = _auto_strategy(triples) if arm == "strategy" else _auto_model(triples)
            source = "convention"
        if by_arm[arm]:
            desc = "; ".join(
                f"{label} <- {', '.join(sorted({t[0] for t in ts}))}" for label, ts in sorted(by_arm[arm].items())
            )
            notes.append(f"{arm} arm ({source}): {desc}")
        else:
            notes.append(f"{arm} arm: no simulated sessions found (the convention needs two or more of its conditions)")
    out: dict[Triple, list[tuple[str, str]]] = {}
    for arm, labels in by_arm.items():
        for label, ts in labels.items():
            for t in ts:
                out.setdefault(t, []).append((arm, label))
    return out, notes
