"""What an invocation of ``run`` has left to do, per session (pure: no Ray, no I/O).

Resume is per session, not per shard: the markers say which sessions are committed, with their
status, attempt and failure class, so the cut of the plan into shards (``engine.shard_size``,
the condition grouping a placement chooses) may differ from one invocation to the next without
redoing or double-counting anything. For every planned session:

* never committed -> run (attempt 1);
* committed ``ok`` -> done;
* committed ``failed`` with an **infra** failure -> rerun by default (the model was never heard:
  a rerun measures the same thing), with the same seeds;
* committed ``failed`` with a **model** failure -> kept as a result, unless the invocation asks
  for ``rerun_model_failures``; such a rerun is a new draw: it gets its own session seed (the
  same seeds would make a seeded model fail the same way again, and the response cache would
  replay the conversation up to the failure), and its row says ``attempt`` n and the earlier errors;
* a session that has run ``max_attempts`` times is not rerun again, whatever its class (a
  failure that keeps coming back is reported, not retried forever).

An invocation may also ask for a subset of the planned sessions (``wanted``: an adaptive run's
round, docs/adaptive.md): the others are neither run nor counted; the plan, its hash and its
shards stay the full design's, so a later invocation adds the rest to the same run directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Mapping

from ray_knowsim.io.commits import SessionEntry
from ray_knowsim.schema.failures import INFRA, MODEL, failure_class


@dataclass(frozen=True)
class Attempt:
    """Which run of a session a task makes: 1 = first; a rerun carries the earlier runs' errors.
    ``reseed``: the rerun draws a new session seed (a model failure's rerun)."""

    attempt: int = 1
    previous_errors: tuple[str, ...] = ()
    reseed: bool = False


@dataclass(frozen=True)
class ResumePolicy:
    rerun_model_failures: bool = False
    max_attempts: int = 3


@dataclass
class Work:
    """The sessions an invocation runs, by shard of the current plan, and what it leaves alone."""

    shards: dict[int, dict[str, Attempt]] = field(default_factory=dict)  # shard index -> session id -> attempt
    ok: int = 0  # committed ok
    new: int = 0  # never committed: run now
    rerun: dict[str, int] = field(default_factory=lambda: {INFRA: 0, MODEL: 0})  # failed, rerun now
    kept: dict[str, int] = field(default_factory=lambda: {INFRA: 0, MODEL: 0})  # failed, kept as results
    exhausted: list[str] = field(default_factory=list)  # failed at max_attempts: not rerun
    skipped_shards: int = 0  # shards of the plan with nothing to run

    @property
    def sessions(self) -> int:
        return sum(len(s) for s in self.shards.values())

    @property
    def committed(self) -> int:
        """Sessions whose committed row stands (ok, or a failure not rerun now)."""
        return self.ok + sum(self.kept.values()) + len(self.exhausted)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "new": self.new, "rerun": dict(self.rerun), "kept_failed": dict(self.kept),
                "exhausted": len(self.exhausted), "shards_to_run": len(self.shards), "skipped_shards": self.skipped_shards}


def next_attempt(entry: SessionEntry | None, policy: ResumePolicy) -> tuple[Attempt | None, str]:
    """(the attempt to run, or None; why): the rule of the module docstring for one session."""
    if entry is None:
        return Attempt(1), "new"
    if entry.status == "ok":
        return None, "ok"
    cls = entry.failure_class or failure_class(entry.error) or MODEL
    if entry.attempt >= policy.max_attempts:
        return None, "exhausted"
    if cls == INFRA or policy.rerun_model_failures:
        errors = (*entry.previous_errors, entry.error or "failed")
        return Attempt(entry.attempt + 1, errors, reseed=cls == MODEL), f"rerun_{cls}"
    return None, f"kept_{cls}"


def plan_work(plan, entries: Mapping[str, SessionEntry], policy: ResumePolicy,
              wanted: Collection[str] | None = None) -> Work:
    """Walk the plan's shards (``plan``: :class:`ray_knowsim.plan.sessions.Plan`) against the
    committed ``entries`` (session id -> the entry that counts); ``wanted``: only these planned
    sessions (None: all of them)."""
    work = Work()
    for k in range(plan.n_shards):
        todo: dict[str, Attempt] = {}
        for sid in plan.shard_session_ids(k):
            if wanted is not None and sid not in wanted:
                continue
            attempt, why = next_attempt(entries.get(sid), policy)
            if why == "ok":
                work.ok += 1
            elif why == "new":
                work.new += 1
            elif why == "exhausted":
                work.exhausted.append(sid)
            elif why.startswith("rerun_"):
                work.rerun[why[len("rerun_"):]] += 1
            else:
                work.kept[why[len("kept_"):]] += 1
            if attempt is not None:
                todo[sid] = attempt
        if todo:
            work.shards[k] = todo
        else:
            work.skipped_shards += 1
    return work


__all__ = ["Attempt", "ResumePolicy", "Work", "next_attempt", "plan_work"]
