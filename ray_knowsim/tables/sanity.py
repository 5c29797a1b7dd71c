"""Cheap signs that the simulator (or the tutor) is not working, said on every page that shows results.

Why: a broken learner-side model makes numbers that look like results. Measured with SmolLM2-135M
as the extractor and the judge: the extractor gave every IU the same label in 12 of 12 answers, no
knowledge state ever moved, and the judge gave IQ 1 to every conversation, yet the report looked
normal. Each check below would have said so. They read a few columns of the rows (pure counting,
no model, no Ray), so the report, the viewer and the run's final line all run them:

* **uniform_labels** — the share of extractor answers (turns with signals) that give ONE
  ``teaching_quality`` label to every IU they list (at least 2 IUs). A working extractor labels
  the few IUs a turn touched and leaves the rest ``not_mentioned`` (the offline demo: 25 of
  2,520 answers, 1 %, all "not_mentioned" turns where the tutor named nothing). It speaks at any
  run size, with the evidence there is: below :data:`SHARE_MIN_ANSWERS` answers when EVERY answer
  (at least :data:`MIN_ANSWERS`) is one-label ("2 of 2 answers" is a warning: a 2-session smoke
  run of SmolLM2 labelled all 14 IUs ``not_mentioned``), from there on from
  :data:`UNIFORM_WARN_SHARE`; severe from :data:`UNIFORM_SEVERE_SHARE` of at least
  :data:`SHARE_MIN_ANSWERS` answers.
* **frozen_states** — a condition whose structured sessions gave at least :data:`SHARE_MIN_ANSWERS`
  extractor answers and whose knowledge states never moved (no upward transition in any turn). One
  such condition may be a tutor that teaches nothing (a warning per condition); when EVERY condition
  with answers is frozen it is the simulator (one severe warning for the run). A run too small for
  that (no condition with :data:`SHARE_MIN_ANSWERS`) is warned, not severely, when two or more
  conditions with at least :data:`MIN_ANSWERS` answers each are all frozen.
* **constant_judge** — a judge score (IQ and the judge's other scores) that takes one value over
  at least :data:`JUDGE_MIN_SCORED` judged conversations; severe from
  :data:`JUDGE_SEVERE_SCORED`. On fewer, from :data:`JUDGE_SMALL_SCORED`, when EVERY one of the
  judge's scales (two or more) takes one value: a warning that names how little it rests on.
* **degenerate_tutor** — a condition whose tutor replies (at least :data:`MIN_ANSWERS`) are all
  empty, all echoes of the learner's message, or all one and the same text over at least two
  items or turns (a deterministic tutor gives one item's first turn the same reply in every
  session: the offline tutor does, and so may a real one at temperature 0). That is the tutor's
  fault, not the simulator's, and it changes what the other checks mean: an echo teaches nothing,
  so an extractor that labels every IU ``not_mentioned`` and states that never move are the
  simulator reading it right. When every condition's tutor is degenerate, those warnings name the
  tutor (``component``) and the run's final line says ``TUTOR NOT WORKING?``, never that the
  simulator is broken.

Each warning names the ``component`` its evidence points at: ``extractor`` and ``judge`` (the
learner side, "SIMULATOR" on the final line), ``simulator`` (states frozen in every condition),
``tutor``.

Cost: at most :data:`MAX_TURN_ROWS` turn rows are read (the first in the run's file order; a page
says when the cap cut the read), and the tutor's replies of the first :data:`MAX_TUTOR_REPLIES`; every session row is scanned, a few columns of it (the judges'
scores of all, the condition of those whose turns were read).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Literal

import pyarrow as pa

from ray_knowsim.io.rundir import RunReader

#: the fewest answers (extractor answers, tutor replies) any check speaks from
MIN_ANSWERS = 2
#: extractor answers (of the run, or of one condition) before a share or a frozen state is judged
SHARE_MIN_ANSWERS = 8
#: share of one-label answers from which the run is warned about, and from which that is severe
UNIFORM_WARN_SHARE = 0.5
UNIFORM_SEVERE_SHARE = 0.9
#: judged conversations before a constant score is warned about, and from which that is severe
JUDGE_MIN_SCORED = 8
JUDGE_SEVERE_SCORED = 12
#: below JUDGE_MIN_SCORED: judged conversations from which one value on EVERY judge scale (two or
#: more scales) is warned about (a working judge may repeat one score, rarely all of them)
JUDGE_SMALL_SCORED = 3
#: turn rows read at most (bounds the cost of the checks on very large runs)
MAX_TURN_ROWS = 50_000
#: of those, the tutor replies read for degenerate_tutor (a reply's text costs ~100x its signals: a
#: 10k-session report read 50k replies at ~0.5 GB; an empty, echoing or constant tutor shows in far fewer)
MAX_TUTOR_REPLIES = 10_000
#: the judges' scores checked for a constant value (score columns, ray_knowsim.score.store)
JUDGE_SCORES: dict[str, str] = {
    "iq": "IQ", "judge_information_calibration": "information calibration",
    "judge_perceived_overload": "perceived overload", "judge_perceived_learning": "perceived learning",
}  # fmt: skip
TURN_COLUMNS = ("session_id", "turn", "signals_json", "n_upward_transitions", "user_message", "assistant_message")

Check = Literal["uniform_labels", "frozen_states", "constant_judge", "degenerate_tutor"]
Component = Literal["extractor", "simulator", "judge", "tutor"]
#: the name of each component on the run's final line ("<NAME> NOT WORKING?")
COMPONENT_HEADING: dict[str, str] = {"extractor": "SIMULATOR", "simulator": "SIMULATOR", "judge": "SIMULATOR", "tutor": "TUTOR"}


@dataclass(frozen=True)
class SanityWarning:
    check: Check
    severe: bool
    scope: str  # "run", or the condition it is about
    text: str  # one sentence for a page
    short: str = ""  # a few words for the run's final line
    component: Component = "simulator"  # what the evidence points at

    def line(self) -> str:
        return f"{'SEVERE' if self.severe else 'warning'} ({self.check}): {self.text}"


@dataclass
class SessionSignals:
    """What one session's extractor answers amount to."""

    answers: int = 0  # turns with signals
    uniform: int = 0  # of them, one label for every IU listed
    upward: int = 0  # upward state transitions over its turns
    labels: Counter = field(default_factory=Counter)  # label of each uniform answer -> answers


@dataclass
class TutorReplies:
    """What one session's (or condition's) tutor replies amount to."""

    replies: int = 0
    empty: int = 0  # nothing but whitespace
    echoes: int = 0  # the learner's own message back (give or take a little wrapping)
    texts: set = field(default_factory=set)  # distinct replies (hashes), to see a constant one
    contexts: set = field(default_factory=set)  # distinct (item, turn) the replies answer

    def add(self, user: Any, reply: Any, context: Any = None) -> None:
        text = " ".join(str(reply or "").split()).lower()
        self.replies += 1
        self.texts.add(hash(text))
        self.contexts.add(context)
        if not text:
            self.empty += 1
        elif _is_echo(" ".join(str(user or "").split()).lower(), text):
            self.echoes += 1

    def merge(self, other: "TutorReplies") -> None:
        self.replies += other.replies
        self.empty += other.empty
        self.echoes += other.echoes
        self.texts |= other.texts
        self.contexts |= other.contexts

    def degenerate(self) -> str | None:
        """How the replies are degenerate ("echoes of the learner", "empty", "one constant text"), or None."""
        if self.replies < MIN_ANSWERS:
            return None
        if self.empty == self.replies:
            return "empty"
        if self.echoes + self.empty == self.replies:
            return "echoes of the learner's message"
        if len(self.texts) == 1 and len(self.contexts) >= 2:  # one text for other items or turns (a
            return "one and the same text"  # deterministic tutor answers one item's first turn alike: not that)
        return None


def _is_echo(user: str, reply: str) -> bool:
    """``reply`` is ``user`` back, possibly quoted or prefixed (at most a few words more)."""
    return bool(user) and (reply == user or (user in reply and len(reply) <= 1.2 * len(user) + 24))


@dataclass
class SanityInputs:
    """The counts the checks read, built batch by batch (turn rows, then session rows)."""

    per_session: dict[str, SessionSignals] = field(default_factory=dict)
    condition_of: dict[str, str] = field(default_factory=dict)  # session id -> condition (of the sessions above)
    judge: dict[str, Counter] = field(default_factory=dict)  # score column -> value counts (non-null)
    turn_rows: int = 0
    capped: bool = False  # MAX_TURN_ROWS stopped the read of the turns
    tutor: dict[str, TutorReplies] = field(default_factory=dict)  # session id -> its tutor's replies
    tutor_rows: int = 0  # tutor replies read (at most MAX_TUTOR_REPLIES)

    def add_turns(self, batch: pa.RecordBatch | pa.Table) -> None:
        names = set(batch.schema.names)
        room = MAX_TUTOR_REPLIES - self.tutor_rows
        if "assistant_message" in names and room > 0:
            part = batch.slice(0, room) if batch.num_rows > room else batch
            self.tutor_rows += part.num_rows
            users = part.column("user_message").to_pylist() if "user_message" in names else [None] * part.num_rows
            turns = part.column("turn").to_pylist() if "turn" in names else [None] * part.num_rows
            for sid, turn, user, reply in zip(part.column("session_id").to_pylist(), turns, users,
                                              part.column("assistant_message").to_pylist()):
                item = "/".join(str(sid).split("/")[:2])  # task/item of "task/item/level/condition/trial"
                self.tutor.setdefault(str(sid), TutorReplies()).add(user, reply, (item, turn))
        if "signals_json" not in names:
            return
        ids = batch.column("session_id").to_pylist()
        signals = batch.column("signals_json").to_pylist()
        ups = batch.column("n_upward_transitions").to_pylist() if "n_upward_transitions" in names else [0] * len(ids)
        self.turn_rows += len(ids)
        for sid, text, up in zip(ids, signals, ups):
            entries = _entries(text)
            if not entries:
                continue  # a baseline turn: no extractor answer
            label = _one_label(entries)
            s = self.per_session.setdefault(str(sid), SessionSignals())
            s.answers += 1
            s.upward += int(up or 0)
            if label:
                s.uniform += 1
                s.labels[label] += 1

    def add_sessions(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Session rows with the judges' scores joined in (and ``condition`` for the sessions whose turns were read)."""
        names = set(batch.schema.names)
        if "condition" in names and (self.per_session or self.tutor):
            for sid, cond in zip(batch.column("session_id").to_pylist(), batch.column("condition").to_pylist()):
                if sid in self.per_session or sid in self.tutor:
                    self.condition_of[sid] = str(cond)
        for column in JUDGE_SCORES:
            if column in names:
                values = self.judge.setdefault(column, Counter())
                values.update(float(v) for v in batch.column(column).to_pylist() if v is not None and v == v)

    def by_condition(self) -> dict[str, SessionSignals]:
        out: dict[str, SessionSignals] = {}
        for sid, s in self.per_session.items():
            c = out.setdefault(self.condition_of.get(sid, "?"), SessionSignals())
            c.answers += s.answers
            c.uniform += s.uniform
            c.upward += s.upward
            c.labels.update(s.labels)
        return out

    def tutor_by_condition(self) -> dict[str, TutorReplies]:
        out: dict[str, TutorReplies] = {}
        for sid, t in self.tutor.items():
            out.setdefault(self.condition_of.get(sid, "?"), TutorReplies()).merge(t)
        return out


def _entries(text: Any) -> list[dict]:
    try:
        data = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _one_label(entries: list[dict]) -> str | None:
    if len(entries) < 2:
        return None
    labels = {str(e.get("teaching_quality")) for e in entries}
    return labels.pop() if len(labels) == 1 else None


def uniform_label(signals_json: Any) -> str | None:
    """The one ``teaching_quality`` an extractor answer gives to every IU it lists (at least 2), or None."""
    return _one_label(_entries(signals_json))


def checks(inputs: SanityInputs) -> list[SanityWarning]:
    """The warnings the counts call for (pure; thresholds in the module docstring)."""
    out: list[SanityWarning] = []
    answers = sum(s.answers for s in inputs.per_session.values())
    uniform = sum(s.uniform for s in inputs.per_session.values())
    read = f" (of the first {inputs.turn_rows:,} turn rows)" if inputs.capped else ""
    tutors = {c: t for c, t in inputs.tutor_by_condition().items() if t.replies}
    bad_tutors = {c: how for c, t in tutors.items() if (how := t.degenerate())}
    tutor_fault = bool(tutors) and len(bad_tutors) == len(tutors)  # every condition's tutor is degenerate
    for c, how in sorted(bad_tutors.items()):
        t = tutors[c]
        out.append(SanityWarning(
            "degenerate_tutor", t.replies >= SHARE_MIN_ANSWERS, c,
            f"the tutor of condition {c} replied with {how} in {t.replies:,} of {t.replies:,} turns{read}: it teaches nothing, "
            "so no result of this condition says anything about tutoring (the tutor, not the simulator)",
            f"tutor of {c}: {how} in {t.replies:,} of {t.replies:,} turns", "tutor",
        ))  # fmt: skip
    small = answers < SHARE_MIN_ANSWERS
    if answers >= MIN_ANSWERS and (uniform == answers if small else uniform / answers >= UNIFORM_WARN_SHARE):
        labels = Counter()
        for s in inputs.per_session.values():
            labels.update(s.labels)
        top = ", ".join(f"{lab!r} {n:,}" for lab, n in labels.most_common(3))
        evidence = f" (only {answers} answers: little evidence, but all of them)" if small else ""
        nothing_taught = tutor_fault and set(labels) == {"not_mentioned"}
        why = (f"; the tutors' replies were degenerate ({', '.join(sorted(set(bad_tutors.values())))}), so not_mentioned is "
               "the right label: the tutor, not the extractor" if nothing_taught else
               ": a working extractor labels the IUs a turn touched and leaves the rest not_mentioned")
        out.append(SanityWarning(
            "uniform_labels", not small and uniform / answers >= UNIFORM_SEVERE_SHARE, "run",
            f"the extractor gave one label to every IU in {uniform:,} of {answers:,} answers{read} ({top}){evidence}{why}",
            f"extractor: one label for every IU in {uniform:,} of {answers:,} answers", "tutor" if nothing_taught else "extractor",
        ))  # fmt: skip
    by_condition = inputs.by_condition()
    conditions = {c: s for c, s in by_condition.items() if s.answers >= SHARE_MIN_ANSWERS}
    few = ""
    if not conditions:  # a small run: frozen in EVERY condition (two or more) still speaks, as evidence
        conditions = {c: s for c, s in by_condition.items() if s.answers >= MIN_ANSWERS}
        if len(conditions) < 2 or any(s.upward for s in conditions.values()):
            conditions = {}  # one condition that moved nothing may be its tutor: too little to say more
        few = f" (only {sum(s.answers for s in conditions.values())} answers: little evidence, but all of them)"
    frozen = sorted(c for c, s in conditions.items() if s.upward == 0)
    every = bool(conditions) and len(frozen) == len(conditions)
    blame_tutor = tutor_fault and all(c in bad_tutors for c in frozen)
    if every and len(frozen) > 1:  # one warning: the simulator (or, when every tutor is degenerate, the tutors)
        answers_of = ", ".join(f"{c} {conditions[c].answers:,}" for c in frozen)
        who = ("the tutors, not the simulator: every condition's tutor replies were degenerate" if blame_tutor else
               "the simulator, not the tutors")
        out.append(SanityWarning(
            "frozen_states", not few, "run",
            f"no knowledge state moved in any of the {len(frozen)} conditions (extractor answers: {answers_of}){read}{few}: {who}",
            f"no state moved in any of {len(frozen)} conditions", "tutor" if blame_tutor else "simulator",
        ))  # fmt: skip
    else:
        for c in frozen:
            out.append(SanityWarning(
                "frozen_states", every, c, f"no knowledge state moved in condition {c} over {conditions[c].answers:,} extractor answers{read}"
                + (" (its tutor's replies were degenerate)" if c in bad_tutors else ""),
                f"no state moved in {c}", "tutor" if c in bad_tutors else "simulator",
            ))  # fmt: skip
    judged = {column: values for column, values in inputs.judge.items() if values}
    few_judged = max((sum(v.values()) for v in judged.values()), default=0) < JUDGE_MIN_SCORED
    if few_judged and len(judged) >= 2 and all(len(v) == 1 and sum(v.values()) >= JUDGE_SMALL_SCORED for v in judged.values()):
        # a small run: one value on EVERY one of the judge's scales is evidence a working judge rarely gives
        n = min(sum(v.values()) for v in judged.values())
        said = ", ".join(f"{JUDGE_SCORES[c]} {next(iter(v)):g}" for c, v in judged.items())
        out.append(SanityWarning(
            "constant_judge", False, "run",
            f"the judge gave one value on every scale to every one of {n:,} judged conversations ({said}) "
            f"(only {n} conversations: little evidence, but all of them)",
            f"judge: one value on every scale for all {n:,}", "tutor" if tutor_fault else "judge",
        ))  # fmt: skip
    for column, values in judged.items():
        n = sum(values.values())
        if n >= JUDGE_MIN_SCORED and len(values) == 1:
            value = next(iter(values))
            deserved = ("; every condition's tutor replies were degenerate, so one score for every conversation may be "
                        "deserved" if tutor_fault else "")
            out.append(SanityWarning(
                "constant_judge", n >= JUDGE_SEVERE_SCORED and not tutor_fault, "run",
                f"the judge gave {JUDGE_SCORES[column]} {value:g} to every one of {n:,} judged conversations{deserved}",
                f"judge: {JUDGE_SCORES[column]} {value:g} for all {n:,}", "tutor" if tutor_fault else "judge",
            ))  # fmt: skip
    return out


@dataclass
class SanityReport:
    warnings: list[SanityWarning]
    inputs: SanityInputs

    def heading(self) -> str:
        """What a page says over the warnings: the component(s) their evidence points at."""
        return warnings_heading(self.warnings)

    @property
    def severe(self) -> list[SanityWarning]:
        return [w for w in self.warnings if w.severe]

    def to_dict(self) -> dict[str, Any]:
        a = sum(s.answers for s in self.inputs.per_session.values())
        return {"warnings": [{"check": w.check, "severe": w.severe, "scope": w.scope, "text": w.text, "short": w.short,
                              "component": w.component} for w in self.warnings],
                "extractor_answers": a, "uniform_answers": sum(s.uniform for s in self.inputs.per_session.values()),
                "turn_rows_read": self.inputs.turn_rows, "capped": self.inputs.capped,
                "judged": {c: sum(v.values()) for c, v in self.inputs.judge.items()}}


def warnings_heading(warnings: Iterable[SanityWarning]) -> str:
    """"The simulator may not be working.", "The tutor may not be working." or both, after the
    components the warnings name (a page's banner says this over them)."""
    names = {"simulator" if COMPONENT_HEADING.get(w.component) == "SIMULATOR" else "tutor" for w in warnings}
    who = " or the ".join(sorted(names, key=("simulator", "tutor").index)) or "simulator"
    return f"The {who} may not be working."


def check_batches(turns: Iterable[pa.RecordBatch | pa.Table], sessions: Iterable[pa.RecordBatch | pa.Table],
                  max_turn_rows: int = MAX_TURN_ROWS) -> SanityReport:
    """The checks over turn batches (read until ``max_turn_rows``) and ``sessions``: session
    batches (every session) with ``condition`` and the judges' scores, iterated after the turns."""
    inputs = read_turns(turns, max_turn_rows)
    for batch in sessions:
        inputs.add_sessions(batch)
    return SanityReport(checks(inputs), inputs)


def read_turns(turns: Iterable[pa.RecordBatch | pa.Table], max_turn_rows: int = MAX_TURN_ROWS) -> SanityInputs:
    """The checks' inputs from the turn batches (read until ``max_turn_rows``); the session rows
    are added after (:meth:`SanityInputs.add_sessions`), e.g. in a pass that reads them anyway."""
    inputs = SanityInputs()
    for batch in turns:
        if inputs.turn_rows >= max_turn_rows:
            inputs.capped = True
            break
        room = max_turn_rows - inputs.turn_rows
        inputs.add_turns(batch.slice(0, room) if batch.num_rows > room else batch)
        if batch.num_rows > room:
            inputs.capped = True
            break
    return inputs


def scan_turns(turns: Any) -> Iterator[pa.RecordBatch]:
    """The turn batches the checks read from a committed turns table: with the messages for the
    first :data:`MAX_TUTOR_REPLIES` rows, then the same scan on without them (the message columns
    are most of a turns file: reading them for every row put a 10k-session report near 1 GiB)."""
    seen = 0
    for batch in turns.scan(TURN_COLUMNS):
        yield batch
        seen += batch.num_rows
        if seen >= MAX_TUTOR_REPLIES:
            break
    else:
        return
    lean = [c for c in TURN_COLUMNS if c not in ("user_message", "assistant_message")]
    for batch in turns.scan(lean):
        if seen >= batch.num_rows:
            seen -= batch.num_rows
            continue
        yield batch.slice(seen) if seen else batch
        seen = 0


def check_run(run: RunReader, attach: Callable[[pa.Table], pa.Table] | None = None,
              max_turn_rows: int = MAX_TURN_ROWS) -> SanityReport:
    """The checks of a run directory's counted rows; ``attach``: the run's ``RunScores.attach``
    (the judges' scores live in scores/)."""
    turns = scan_turns(run.turns) if run.turns is not None else iter(())

    def sessions() -> Iterator[pa.Table]:
        for batch in run.sessions.scan(["session_id", "condition", *JUDGE_SCORES]):  # (rows may carry the scores themselves)
            table = pa.Table.from_batches([batch])
            yield attach(table) if attach is not None else table

    return check_batches(turns, sessions(), max_turn_rows)


__all__ = [
    "COMPONENT_HEADING", "JUDGE_MIN_SCORED", "JUDGE_SCORES", "JUDGE_SEVERE_SCORED", "JUDGE_SMALL_SCORED", "MAX_TURN_ROWS", "MIN_ANSWERS",
    "MAX_TUTOR_REPLIES", "SHARE_MIN_ANSWERS", "UNIFORM_SEVERE_SHARE", "UNIFORM_WARN_SHARE", "SanityInputs", "TutorReplies", "warnings_heading", "SanityReport", "SanityWarning", "check_batches", "check_run", "checks",
    "read_turns", "scan_turns", "uniform_label",
]  # fmt: skip
