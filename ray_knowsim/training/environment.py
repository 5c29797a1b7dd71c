"""KnowSim as a training environment: an episode is one benchmark session whose tutor is the policy.

``reset`` starts the benchmark's own session loop (:func:`ray_knowsim.sim.loop.run_session`) for
an item, a knowledge level, a simulator and a seed, with an :class:`ExternalTutor` in the
assistant's place, and returns the learner's opening; ``step`` hands the policy's message to the
loop, which runs the extractor, the state update (one kernel call across every episode whose
extraction is ready: :class:`ray_knowsim.sim.kernel_steps.OpenKernelBatcher`), the stopping rules and
the learner's next turn, and returns what that turn did. Nothing of the method is reimplemented
here: the rewards are the rules' per-turn counters and the benchmark's own metric functions
(:mod:`ray_knowsim.training.rewards`), so the reward is the benchmark.

Every episode is an asyncio task on the environment's event loop; episodes share nothing but the
models (an HTTP endpoint's limiter, a vLLM pool with session-affine routing) and the kernel's
batch, whose steps depend only on each session's own state. One episode's failure (a dead
endpoint, an unreadable extraction) ends that episode, unscored (reward None, with the reason),
and touches no other.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from pydantic import ValidationError

from ray_knowsim.llm.accounting import Accounting
from ray_knowsim.rules.init_state import states_to_ks
from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.items import Item, item_key
from ray_knowsim.schema.states import STATE_NAMES, state_value
from ray_knowsim.sim.kernel_steps import OpenKernelBatcher
from ray_knowsim.sim.loop import run_session
from ray_knowsim.sim.session import LiveSession, start_session
from ray_knowsim.sim.types import RoleModels, SessionSpec, ShardContext
from ray_knowsim.simulators import SIMULATORS
from ray_knowsim.strategies import get_strategy
from ray_knowsim.training.errors import (
    EnvironmentFull,
    EpisodeBusy,
    EpisodeDone,
    EpisodeExpired,
    InvalidAction,
    InvalidReset,
    UnknownEpisode,
)
from ray_knowsim.training.rewards import episode_reward, observation_metadata, turn_reward
from ray_knowsim.training.schema import EnvironmentConfig, Observation, ResetRequest, Rewards, TutorAction
from ray_knowsim.training.tutor import ExternalTutor

#: ids of ended episodes remembered (to answer "done" or "expired" rather than "unknown")
ENDED_MEMORY = 65_536
ASSISTANT_KEY = "policy"


@dataclass
class Episode:
    id: str
    live: LiveSession
    tutor: ExternalTutor
    task: asyncio.Task | None = None
    request: ChatRequest | None = None  # the loop's pending tutor request (None: not waiting)
    busy: bool = False
    reported: int = 0  # state updates already reported
    last_used: float = field(default_factory=time.monotonic)

    @property
    def over(self) -> bool:
        return self.task is not None and self.task.done()


class TrainingEnvironment:
    """Episodes of KnowSim sessions with an external tutor, all on the calling event loop.

    Build one with :meth:`from_config` (models from a benchmark run config) or directly from a
    shard context, the items and graphs, and the learner's and extractor's models."""

    def __init__(self, config: EnvironmentConfig, ctx: ShardContext, items: Mapping[str, Item],
                 graphs: Mapping[str, IUGraph], user_sim: Any, extractor: Any) -> None:
        self.config = config
        self.ctx = replace(ctx, early_stop=config.early_stop, min_turns=config.min_turns,
                           max_turns=config.max_turns or ctx.max_turns)
        self.items, self.graphs = dict(items), dict(graphs)
        self.user_sim, self.extractor = user_sim, extractor
        self.kernel = OpenKernelBatcher(self.ctx.rules, max_turns=self.ctx.max_turns)
        self.rules_hash = hashlib.sha256(self.ctx.rules.model_dump_json().encode()).hexdigest()[:16]
        self._episodes: dict[str, Episode] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()  # id -> "done" | "expired" | "closed"
        self._owned: list[Any] = []  # models built here (from_config), closed with the environment
        self.pools: dict[str, Any] = {}  # what those models hold on the cluster (engine pools, limiter leases)
        get_strategy(config.strategy)  # an unknown default strategy is a config error, now

    @classmethod
    def from_config(cls, config: EnvironmentConfig | None = None, *, pools: Mapping[str, Any] | None = None,
                    **fields: Any) -> "TrainingEnvironment":
        """Items, graphs, rules, prompts and the learner's and extractor's models from the config's
        benchmark run config, built by the run's own builders (:mod:`ray_knowsim.backends.model_set`).
        ``pools``: running vLLM engine pools by model key to use instead of starting them (one pool
        for several environments: :func:`ray_knowsim.training.build.shared_engine_pools`); they are
        borrowed, never shut down here."""
        from ray_knowsim.training.build import build_parts

        config = config or EnvironmentConfig(**fields)
        borrowed = dict(pools or {})
        held: dict[str, Any] = dict(borrowed)
        ctx, items, graphs, user_sim, extractor = build_parts(config, held)
        env = cls(config, ctx, items, graphs, user_sim, extractor)
        env._owned = [user_sim] if user_sim is extractor else [user_sim, extractor]  # closed by aclose
        # held as long as the environment (a dropped limiter lease ends the limiter); only its own
        env.pools = {key: p for key, p in held.items() if key not in borrowed}
        return env

    # -- the API ------------------------------------------------------------------------------

    async def reset(self, request: ResetRequest | Mapping[str, Any] | None = None, **fields: Any) -> Observation:
        """Start an episode; its observation holds the learner's opening (or, when the learner
        fails at once, the unscored end)."""
        req = _parse(ResetRequest, request, fields, InvalidReset)
        self._expire()
        if sum(1 for e in self._episodes.values() if not e.over) >= self.config.max_episodes:
            raise EnvironmentFull(f"{self.config.max_episodes} episodes are open (max_episodes); close some first")
        episode_id = req.episode_id or uuid.uuid4().hex
        if episode_id in self._episodes or episode_id in self._ended:
            raise InvalidReset(f"episode id {episode_id!r} is already used")
        live = self._start(req, episode_id)
        ep = Episode(episode_id, live, ExternalTutor())
        self._episodes[episode_id] = ep
        models = RoleModels(user_sim=self.user_sim, extractor=self.extractor, assistants={ASSISTANT_KEY: ep.tutor})
        if live.structured:
            self.kernel.open(episode_id, live.index, live.knowledge.initial)
        ep.task = asyncio.ensure_future(self._run(ep, models))
        ep.busy = True
        try:
            await self._advance(ep)
        finally:
            ep.busy = False
        return self._observe(ep)

    async def step(self, episode_id: str, action: TutorAction | Mapping[str, Any] | str) -> Observation:
        """Hand the policy's tutor message to the episode; returns what the turn did."""
        ep = self._get(episode_id)
        if ep.busy:
            raise EpisodeBusy(f"episode {episode_id!r} is already stepping; wait for its observation")
        if ep.over:
            raise EpisodeDone(f"episode {episode_id!r} is over; reset a new one")
        message = self._message(action)
        ep.busy = True
        try:
            assert ep.request is not None, "a live episode waits for its tutor"
            ep.request = None
            ep.tutor.reply(message)
            await self._advance(ep)
        finally:
            ep.busy = False
            ep.last_used = time.monotonic()
        return self._observe(ep)

    def episode(self, episode_id: str) -> LiveSession:
        """The episode's live session (transcript, trajectory, turn rows), for inspection."""
        return self._get(episode_id).live

    async def close(self, episode_id: str) -> None:
        """Forget an episode (a live one is cancelled: unscored, nothing recorded)."""
        ep = self._episodes.pop(episode_id, None)
        if ep is None:
            self._get(episode_id)  # raises the right error
            return
        await self._stop(ep)
        self._remember(episode_id, "closed")

    async def aclose(self) -> None:
        """Close every episode, then the models this environment built (their HTTP sessions),
        then what they hold on the cluster (vLLM engine actors stopped, limiter leases let go)."""
        for episode_id in list(self._episodes):
            await self.close(episode_id)
        owned, self._owned = self._owned, []
        for model in owned:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()
        if self.pools:
            from ray_knowsim.backends.model_set import shutdown_pools

            await asyncio.to_thread(shutdown_pools, self.pools)  # blocking Ray calls

    @property
    def open_episodes(self) -> int:
        return sum(1 for e in self._episodes.values() if not e.over)

    # -- inside -------------------------------------------------------------------------------

    def _start(self, req: ResetRequest, episode_id: str) -> LiveSession:
        key = item_key(req.task, req.item_id)
        item, graph = self.items.get(key), self.graphs.get(key)
        if item is None or graph is None:
            known = sorted(self.items)
            raise InvalidReset(f"unknown item {key!r}; the environment has {len(known)}: {known[:20]}")
        try:
            SIMULATORS.get(req.simulator)
            strategy = req.strategy or self.config.strategy
            get_strategy(strategy)
        except Exception as exc:  # RegistryError: names what is registered
            raise InvalidReset(str(exc)) from None
        from ray_knowsim.plan.sessions import derive_seed

        session_id = req.session_id or f"{req.task}/{req.item_id}/{req.level}/policy:{strategy}/{episode_id}"
        init_seed = req.init_seed if req.init_seed is not None else derive_seed(req.seed, f"init/{key}/{req.level}")
        spec = SessionSpec(
            session_id=session_id, task=req.task, item_id=req.item_id, knowledge_level=req.level,
            condition=f"policy:{strategy}", assistant_model=ASSISTANT_KEY, assistant_strategy=strategy,
            simulator=req.simulator, trial=0, seed=req.seed, init_seed=init_seed,
            initial_ks=self._initial_ks(req, graph),
        )  # fmt: skip
        return start_session(spec, item, graph, self.ctx.rules)

    @staticmethod
    def _initial_ks(req: ResetRequest, graph: IUGraph) -> dict[str, Any] | None:
        if req.initial_states is None:
            return None
        from ray_knowsim.schema.graph import build_index

        index = build_index(graph, req.item_id)
        unknown = sorted(set(req.initial_states) - set(index.labels))
        if unknown:
            raise InvalidReset(f"initial_states names IUs the graph lacks: {unknown[:10]}; it has {list(index.labels)}")
        bad = {k: v for k, v in req.initial_states.items() if v not in STATE_NAMES}
        if bad:
            raise InvalidReset(f"initial_states: unknown state names {bad}; use {list(STATE_NAMES)}")
        states = {v: state_value(req.initial_states.get(index.label_of(v))) for v in index.ids}
        return states_to_ks(index, states)

    async def _run(self, ep: Episode, models: RoleModels) -> None:
        try:
            await run_session(ep.live, models, self.ctx, self.kernel if ep.live.structured else None,
                              ep.id if ep.live.structured else None)
        finally:
            self.kernel.close(ep.id)

    async def _advance(self, ep: Episode) -> None:
        """Wait until the loop asks for the next tutor message, or the episode ends."""
        assert ep.task is not None
        asked = asyncio.ensure_future(ep.tutor.requests.get())
        await asyncio.wait({asked, ep.task}, return_when=asyncio.FIRST_COMPLETED)
        if asked.done():
            ep.request = asked.result()
            return
        asked.cancel()
        ep.task.result()  # a bug in the loop (not a model failure) is raised, never scored
        self._remember(ep.id, "done")

    def _observe(self, ep: Episode) -> Observation:
        live = ep.live
        traj = live.knowledge.trajectory
        turn = None
        if live.structured and traj is not None and len(traj.metrics) > ep.reported:
            turn = turn_reward(traj.updates[-1], traj.metrics[-1])
            ep.reported = len(traj.metrics)
        over = ep.over
        scored = live.status != "failed" and live.structured
        episode = episode_reward(live, self.ctx) if over and scored else None
        if over and not scored:
            reward = None
        else:
            reward = turn.gain if turn is not None else 0.0
        waiting = ep.request is not None and not over
        return Observation(
            episode_id=ep.id, turn=live.turns_done,
            learner_message=live.transcript[-1][1] if waiting else None,
            prompt_messages=[dict(m) for m in ep.request.messages] if waiting and ep.request else [],
            done=over, reward=reward, rewards=Rewards(turn=turn, episode=episode),
            metadata=observation_metadata(live, self.ctx, ep.id, self.rules_hash,
                                          {"user_sim": _name(self.user_sim), "extractor": _name(self.extractor),
                                           "assistant": ExternalTutor.name}),
        )  # fmt: skip

    def _message(self, action: TutorAction | Mapping[str, Any] | str) -> str:
        if isinstance(action, str):
            action = {"message": action}
        action = _parse(TutorAction, action, {}, InvalidAction)
        if len(action.message) > self.config.max_message_chars:
            raise InvalidAction(f"the tutor message has {len(action.message)} characters; at most "
                                f"{self.config.max_message_chars} (max_message_chars)")
        return action.message

    def _get(self, episode_id: str) -> Episode:
        self._expire()
        ep = self._episodes.get(episode_id) if isinstance(episode_id, str) else None
        if ep is not None:
            ep.last_used = time.monotonic()
            return ep
        why = self._ended.get(episode_id) if isinstance(episode_id, str) else None
        if why == "expired":
            raise EpisodeExpired(f"episode {episode_id!r} expired after {self.config.episode_ttl_s:g} s idle")
        if why == "closed":
            raise EpisodeDone(f"episode {episode_id!r} was closed")
        if why == "done":
            raise EpisodeDone(f"episode {episode_id!r} is over; reset a new one")
        raise UnknownEpisode(f"no episode {episode_id!r}")

    def _expire(self) -> None:
        now = time.monotonic()
        stale = [e for e in self._episodes.values() if not e.busy and now - e.last_used > self.config.episode_ttl_s]
        for ep in stale:
            del self._episodes[ep.id]
            if ep.task is not None and not ep.task.done():
                ep.task.cancel()
            self.kernel.close(ep.id)
            self._remember(ep.id, "done" if ep.over else "expired")
        over = [e.id for e in self._episodes.values() if e.over]
        for episode_id in over[: max(0, len(over) - self.config.max_episodes)]:  # oldest first: dicts keep order
            del self._episodes[episode_id]  # an ended episode is kept for inspection, a bounded while

    async def _stop(self, ep: Episode) -> None:
        if ep.task is not None and not ep.task.done():
            ep.task.cancel()
            await asyncio.gather(ep.task, return_exceptions=True)
        self.kernel.close(ep.id)

    def _remember(self, episode_id: str, why: str) -> None:
        self._ended[episode_id] = why
        self._ended.move_to_end(episode_id)
        while len(self._ended) > ENDED_MEMORY:
            self._ended.popitem(last=False)


def _name(model: Any) -> str:
    return str(getattr(model, "name", type(model).__name__))


def _parse(cls: Any, value: Any, fields: Mapping[str, Any], error: type[Exception]) -> Any:
    if isinstance(value, cls) and not fields:
        return value
    data = dict(value.model_dump() if isinstance(value, cls) else (value or {})) | dict(fields)
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
        raise error(f"malformed {cls.__name__}: {problems}") from None
    except TypeError as exc:
        raise error(f"malformed {cls.__name__}: {exc}") from None


__all__ = ["ASSISTANT_KEY", "Episode", "TrainingEnvironment"]
