"""One scoring pass: the chosen judges over many transcripts, all asked at once (no Ray, no I/O).

A judge that fails (a transport error or an unreadable answer past its attempts) leaves its
columns empty and names the failure in ``judge_error``; the simulation's own rows are never
touched, so a judge failure never discards a finished conversation.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Sequence

from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.chat import Usage
from ray_knowsim.schema.price import Price
from ray_knowsim.schema.results import usage_columns
from ray_knowsim.score.judges import JUDGES
from ray_knowsim.score.store import ScoreRow
from ray_knowsim.score.transcripts import Transcript
from ray_knowsim.sim.ask import ask_all
from ray_knowsim.sim.types import RoleSettings, request_id, request_seed


async def judge_transcripts(
    transcripts: Sequence[Transcript],
    model: ChatModel,
    *,
    name: str,
    model_key: str,
    judges: Sequence[str],
    settings: RoleSettings,
    price: Price | None = None,
) -> list[ScoreRow]:
    """One :class:`ScoreRow` per transcript (same order) under the score set ``name``."""
    values: list[dict[str, Any]] = [{} for _ in transcripts]
    errors: list[list[str]] = [[] for _ in transcripts]
    usage = [Usage() for _ in transcripts]
    calls = [0 for _ in transcripts]
    versions: list[dict[str, str]] = [{} for _ in transcripts]
    drift: list[dict[str, dict[str, list[str]]]] = [{} for _ in transcripts]
    asked = []  # per judge: the transcripts it reads and its requests
    for judge_name in judges:
        judge = JUDGES.get(judge_name)
        chosen = [k for k, t in enumerate(transcripts) if judge.applies(t)]
        requests = []
        for k in chosen:
            t = transcripts[k]
            req = judge.request(t, seed=request_seed(t.seed, "judge", judge.slot), request_id=request_id(t.session_id, "judge", judge.slot))
            requests.append(settings.apply(req))
        asked.append((judge_name, judge, chosen, requests))
    # every judge's requests go out at once (no judge waits for another's slowest answer); the
    # answers are booked in the judges' order, so the rows do not depend on which came first
    all_answers = await asyncio.gather(*(
        ask_all(model, requests, lambda text, i, judge=judge, chosen=chosen: judge.parse(text, transcripts[chosen[i]]),
                attempts=settings.attempts, repair_temperature=settings.repair_temperature)
        for _, judge, chosen, requests in asked
    ))  # fmt: skip
    for (judge_name, judge, chosen, _), answers in zip(asked, all_answers):
        for k, answer in zip(chosen, answers):
            usage[k].add(answer.usage)
            calls[k] += answer.calls
            if answer.prompt_version:
                template, _, version = answer.prompt_version.partition("@")
                versions[k][template] = version or answer.prompt_version
            noted = {"repairs": list(answer.repairs), "refusals": list(answer.refusals), "warnings": list(answer.warnings)}
            if any(noted.values()):
                drift[k][judge_name] = {kind: notes for kind, notes in noted.items() if notes}
            if answer.ok:
                values[k].update(judge.values(answer.value, transcripts[k]))
            else:
                errors[k].append(f"{judge_name}: {answer.error or 'judge_failed'}")
    rows = []
    known = set(ScoreRow.model_fields)
    for k, t in enumerate(transcripts):
        fixed = {key: v for key, v in values[k].items() if key in known}
        extra = {key: v for key, v in values[k].items() if key not in known}
        rows.append(
            ScoreRow(
                session_id=t.session_id, name=name, judge_model=model_key, judges=",".join(judges),
                judge_error="; ".join(errors[k]) or None, judge_calls=calls[k], **usage_columns("judge", usage[k]),
                judge_cost_usd=price.usage_cost(usage[k]) if price else None,
                judge_prompt_versions=json.dumps(versions[k], sort_keys=True),
                **_drift_columns(drift[k]),
                extra_json=json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else None, **fixed,
            )
        )  # fmt: skip
    return rows


def _drift_columns(drift: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    """A session's judge drift as score columns: counts per kind, and the notes by judge."""
    def count(kind: str) -> int:
        return sum(len(notes.get(kind, ())) for notes in drift.values())

    return {"judge_repairs": count("repairs"), "judge_refusals": count("refusals"), "judge_warnings": count("warnings"),
            "judge_drift_json": json.dumps(drift, sort_keys=True, ensure_ascii=False)}


__all__ = ["judge_transcripts"]
