"""The offline learner: structured simulator turns and baseline turns, from ``offline_facts`` only."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any, Mapping

from ray_knowsim.llm.offline.words import TOUCH_CONCEPT_AT, _lc, first_sentence, sentences, words


def _turn(thought: str, message: str, *, attempt_verify: bool = False, terminate: bool = False) -> dict[str, Any]:
    """One structured learner turn; every branch of :func:`_user_turn` answers in this shape."""
    return {"thought": thought, "message": message, "attempt_verify": attempt_verify, "terminate": terminate}


def _user_turn(ctx: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    ius = {row["id"]: row for row in ctx.get("ius", [])}
    concept = {i: row.get("concept") or i for i, row in ius.items()}
    state = {i: row.get("state", "unaware") for i, row in ius.items()}
    connectable = [i for i in ctx.get("connectable", []) if i in ius]
    unaware = [i for i in ctx.get("unaware", []) if i in ius]
    known = [i for i in ius if state[i] == "knows_well"]
    turn = int(ctx.get("turn", 1))
    transcript = ctx.get("transcript") or []
    last_reply = next((t for r, t in reversed(transcript) if r == "assistant"), "")
    allow_terminate = bool(ctx.get("allow_terminate"))

    if ctx.get("stop_hint"):
        return _turn(
            "This is too much for me; I want to stop.",
            "Honestly, this is too much for me at once. I'm lost and I'd like to stop here.",
            terminate=True,
        )
    if turn == 1:
        lines = [f"I'm working on this problem: {ctx.get('problem', '')}"]
        if known:
            lines.append(f"I'm comfortable with {_lc(concept[known[0]])}.")
        if connectable:
            lines.append(f"But I'm confused about {_lc(concept[connectable[0]])} and don't see how to go on. Can you help?")
        else:
            lines.append("But I don't know how to start. Can you help?")
        return _turn(
            f"I know {len(known)} of the ideas; I'm stuck early on.",
            " ".join(lines),
        )
    if not connectable and not unaware:
        return _turn(
            "Everything fits together now.",
            "I think I've got it now: I can put all the steps together and reach the answer myself. Is that right?",
            attempt_verify=True,
            terminate=allow_terminate,
        )
    lines: list[str] = []
    unaware_names = [set(words(concept[i])) for i in unaware]

    def names_unaware(text: str) -> bool:
        tw = set(words(text))
        return any(cw and len(cw & tw) >= TOUCH_CONCEPT_AT * len(cw) for cw in unaware_names)

    gist = next(
        (s for s in sentences(last_reply) if len(s.split()) >= 8 and not s.startswith("**") and not names_unaware(s)), ""
    )
    if gist and rng.random() < 0.35:
        lines.append(f"So you're saying {_lc(gist.rstrip('.'))}.")
    if connectable:
        start = (turn - 2) % len(connectable)
        focus = [connectable[start]]
        if len(connectable) > 1 and rng.random() < 0.5:
            focus.append(connectable[(start + 1) % len(connectable)])
        for i in focus:
            name = _lc(concept[i])
            if state[i] == "struggling":
                lines.append(
                    rng.choice(
                        (
                            f"I'm still lost on {name}; I'm not sure what it means here.",
                            f"I don't get {name} yet. Could you explain it differently?",
                            f"Maybe {name} is the step I keep missing? I'm confused about it.",
                        )
                    )
                )
            else:
                lines.append(
                    rng.choice(
                        (
                            f"Let me try {name} on the problem: I think it gives the next step, so I would apply it to our problem.",
                            f"I think {name} works like this here, so that gives me the next part. Is that right?",
                        )
                    )
                )
    else:
        lines.append("I followed that, but I don't see what comes next. I'm a bit lost.")
    return _turn(
        f"Ready to work on {len(connectable)} idea(s); {len(unaware)} still unknown to me.",
        " ".join(lines),
    )


def _baseline_turn(ctx: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    turn = int(ctx.get("turn", 1))
    transcript = ctx.get("transcript") or []
    last_reply = next((t for r, t in reversed(transcript) if r == "assistant"), "")
    # a baseline learner stops after a few turns, at a point fixed by the conversation's opening
    opening = json.dumps([ctx.get("item_id"), ctx.get("method")])
    end_at = 3 + int(hashlib.sha256(opening.encode()).hexdigest(), 16) % 4
    out: dict[str, Any]
    if turn == 1:
        profile = ctx.get("initial_state") or {}
        knows = [k.split(": ", 1)[-1] for k, v in profile.items() if v == "knows_well"][:1]
        extra = f" I already know {_lc(knows[0])}." if knows else ""
        out = {"message": f"Can you help me with this problem? {ctx.get('problem', '')}{extra}", "terminate": False}
    elif turn >= end_at and ctx.get("allow_terminate"):
        out = {"message": "Thanks, I think I've got it now and can finish on my own.", "terminate": True}
    else:
        content = next((s for s in sentences(last_reply) if len(s.split()) >= 8), first_sentence(last_reply))
        gist = " ".join(content.lstrip("*").split()[:14]).rstrip(".,;:*")
        follow = rng.choice(("What should I do next?", "Can you show me the next step?", "Why does that work?"))
        out = {"message": f"Okay, so {_lc(gist)}. {follow}" if gist else follow, "terminate": False}
    if ctx.get("thinks"):
        out = {"thought": f"Turn {turn}: respond to the tutor and decide whether I'm done.", **out}
    return out
