"""Ask an extractor model to label exchanges it did not label in a run: resumable and costed.

Two callers need the same thing: ``validate --extractor-agreement`` (the tutor replies people
labelled per IU) and ``agreement --re-extract`` (a reference run's own exchanges, labelled by
another run's extractor). Each exchange is ONE request rendered by the simulation's own renderer
(:func:`ray_knowsim.prompts.render.render_extractor`: item, IU graph, the state before the
exchange, the conversation before it, the learner's message, the reply) and read by the
simulation's own parser (:func:`ray_knowsim.llm.parse.signals.parse_signal_report`).

Every answered exchange is a row of one Parquet file (its key columns, the labels, calls, tokens,
cost from the entry's price, prompt version, error, the model's identity), written a chunk at a
time: an interrupt loses at most the chunk in flight, and a rerun with the same model asks only
the exchanges with no row or an error row. A file holding another model's labels is refused.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ray_knowsim.io.tables import write_table
from ray_knowsim.llm.parse.signals import parse_signal_report
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.prompts.render import render_extractor
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.items import Item
from ray_knowsim.schema.price import Price
from ray_knowsim.sim.ask import ask_all
from ray_knowsim.sim.types import RoleSettings

__all__ = ["ANSWER_COLUMNS", "CHUNK", "Exchange", "Relabelled", "label_of", "model_identity", "read_answers", "relabel",
           "spend"]

#: what every answer row holds besides its key columns
ANSWER_COLUMNS = ("extractor_model", "model_identity", "prompt_version", "labels_json", "error", "calls",
                  "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "cost_usd")  # fmt: skip
#: exchanges asked per written chunk: an interrupt loses at most the chunk in flight
CHUNK = 32


@dataclass(frozen=True)
class Exchange:
    """One exchange to label: its key (the caller's key columns) and what the renderer needs."""

    key: tuple
    item: Item
    graph: IUGraph
    states: Any  # the learner's state before the exchange (ordinals in graph order, or {id: name})
    prior: Sequence[Sequence[str]]  # [speaker, text] pairs before the exchange
    user: str
    reply: str
    seed: int
    request_id: str


@dataclass
class Relabelled:
    answers: pd.DataFrame  # one row per exchange: key columns + ANSWER_COLUMNS
    asked: int  # exchanges sent to the model by this call (the rest were resumed)


def label_of(raw: Any) -> str:
    """The extractor's teaching-quality label as the rules read it (spec §1.5: anything else is well_explained)."""
    return raw if raw in ("shallow", "not_mentioned") else "well_explained"


def model_identity(backend: str, entry_json: str) -> str:
    """A short digest of what makes a model entry answer as it does (resume keys on it)."""
    return hashlib.sha256(f"{backend}\x1f{entry_json}".encode()).hexdigest()[:16]


def read_answers(path: Path, key_columns: Sequence[str]) -> pd.DataFrame:
    columns = [*key_columns, *ANSWER_COLUMNS]
    if not path.is_file():
        return pd.DataFrame(columns=columns)
    df = pd.read_parquet(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not an extractor-answers file (no column(s) {', '.join(missing)}); move it away")
    return df


def _write(path: Path, df: pd.DataFrame) -> None:
    if path.suffix != ".parquet":
        raise ValueError(f"{path}: the answers file is a .parquet file")
    write_table(df, path.parent, path.stem, formats=("parquet",))


def _frame(rows: list[dict[str, Any]], key_columns: Sequence[str], normalise) -> pd.DataFrame:  # noqa: ANN001
    df = normalise(pd.DataFrame(rows, columns=[*key_columns, *ANSWER_COLUMNS]))
    return df.sort_values(list(key_columns), key=lambda s: s.astype(str)).reset_index(drop=True)


def relabel(
    exchanges: Sequence[Exchange],
    *,
    key_columns: Sequence[str],
    path: Path,
    model: ChatModel,
    model_key: str,
    model_identity: str,
    settings: RoleSettings,
    price: Price | None = None,
    prompts: str = DEFAULT_PROMPTS,
    normalise=lambda df: df,  # noqa: ANN001 - the caller's column types (e.g. a session id as text), applied on read too
) -> Relabelled:
    """The model's labels of every exchange, resumed from ``path`` (asked: those without a row or
    with an error row). Raises ValueError when ``path`` holds another model's labels."""
    have = normalise(read_answers(path, key_columns))
    others = sorted(set(have["model_identity"]) - {model_identity})
    if others:
        raise ValueError(f"{path} holds another extractor's labels ({', '.join(sorted(set(have['extractor_model'])))}); "
                         "choose another output folder for this one")
    kept = have[have["error"].isna()]
    done = {tuple(r) for r in kept[list(key_columns)].itertuples(index=False, name=None)}
    todo = [ex for ex in exchanges if ex.key not in done]  # never asked, or answered with an error: asked (again)
    rows: list[dict[str, Any]] = kept.to_dict("records")

    async def ask(chunk: Sequence[Exchange]) -> list[dict[str, Any]]:
        requests = [settings.apply(render_extractor(ex.item, ex.graph, ex.states, ex.prior, ex.user, ex.reply, seed=ex.seed,
                                                    request_id=ex.request_id, prompts=prompts)) for ex in chunk]
        answers = await ask_all(model, requests, lambda text, i: parse_signal_report(text, chunk[i].graph),
                                attempts=settings.attempts, repair_temperature=settings.repair_temperature)
        out = []
        for ex, answer in zip(chunk, answers):
            u = answer.usage
            labels = {e.id: label_of(e.teaching_quality) for e in answer.value.entries if e.id} if answer.ok else {}
            out.append(dict(zip(key_columns, ex.key)) | {
                "extractor_model": model_key, "model_identity": model_identity, "prompt_version": answer.prompt_version,
                "labels_json": json.dumps(labels, sort_keys=True), "error": None if answer.ok else f"{answer.error}: {answer.detail}"[:500],
                "calls": answer.calls, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                "cached_prompt_tokens": u.cached_prompt_tokens,
                "cost_usd": price.usage_cost(u) if price else None,
            })  # fmt: skip
        return out

    async def ask_everything() -> None:
        try:
            for start in range(0, len(todo), CHUNK):
                rows.extend(await ask(todo[start:start + CHUNK]))
                _write(path, _frame(rows, key_columns, normalise))  # committed a chunk at a time
        finally:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()

    if todo:
        asyncio.run(ask_everything())
    answers = _frame(rows, key_columns, normalise)
    if not todo and len(answers):
        _write(path, answers)
    return Relabelled(answers[answers["model_identity"] == model_identity], asked=len(todo))


def spend(answers: pd.DataFrame) -> dict[str, Any]:
    """Calls, tokens and cost (None when the entry names no price) of every answer row."""
    costs = answers["cost_usd"].dropna()
    return {"exchanges": len(answers), "errors": int(answers["error"].notna().sum()), "calls": int(answers["calls"].sum()),
            "prompt_tokens": int(answers["prompt_tokens"].sum()), "completion_tokens": int(answers["completion_tokens"].sum()),
            "cost_usd": float(costs.sum()) if len(costs) else None}
