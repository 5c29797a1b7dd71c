"""The contract between the run machinery (``plan/`` plans, ``run/`` fans out to Ray workers) and one
shard's simulation loop.

The engine plans sessions, groups them into :class:`ShardSpec`s and, inside a Ray worker, calls

    async def run_shard(shard: ShardSpec, models: RoleModels, ctx: ShardContext)
        -> AsyncIterator[SessionResult]

which yields one :class:`SessionResult` per planned session, each AS SOON AS that session ends
(the worker commits them in small batches as they arrive), in the order the sessions finish.

Plain dataclasses, no Ray and no I/O: everything here pickles, so the engine ships it to workers,
and a test can build it by hand. Three promises the loop must keep for resume to be exact:

* every session's result depends only on its own :class:`SessionSpec` (its seeds, initial state,
  item, graph) and the context, never on which other sessions share its shard, on the order in
  which answers arrive, or on how many requests are in flight;
* every planned session comes back exactly once, as ``status="ok"`` or ``status="failed"`` with
  ``error`` naming what failed (``<role>_<reason>``, never a silent default);
* the order of the results carries no meaning (the worker sorts rows into the plan's order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Literal, Mapping, Protocol

from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.chat import ChatRequest, with_fields
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.items import Item, item_key
from ray_knowsim.schema.results import SessionRow, TurnRow
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS
from ray_knowsim.rules.config import RuleConfig

#: a name in :data:`ray_knowsim.simulators.SIMULATORS` ("structured", "zero-shot", ...)
Simulator = str
#: a name in :data:`ray_knowsim.strategies.STRATEGIES` ("simple"/"minimal", "socratic", ...)
Strategy = str
EarlyStopMode = Literal["virtual", "stop"]


# per-request seed offsets, so each role and turn samples independently but reproducibly
_ROLE_SEED = {"user_sim": 1, "assistant": 2, "extractor": 3, "judge": 4}
SEED_MODULUS = 2**31 - 1  # every request seed is below it (servers take 32-bit signed seeds)


def request_seed(session_seed: int, role: str, turn: int) -> int:
    """The sampling seed of one request of a session (a judge's "turn" is its slot)."""
    return (session_seed * 1_000_003 + turn * 16 + _ROLE_SEED[role]) % SEED_MODULUS


def request_id(session_id: str, role: str, turn: int) -> str:
    return f"{session_id}#{turn}:{role}"


@dataclass(frozen=True)
class SessionSpec:
    """One planned conversation: item x knowledge level x condition x trial."""

    session_id: str  # "<task>/<item_id>/<level>/<condition>/<trial>"
    task: str
    item_id: str
    knowledge_level: str
    condition: str  # unique condition name, e.g. "gpt-x:adaptive" or "baseline:zero-shot-cot"
    assistant_model: str  # key into RoleModels.assistants
    assistant_strategy: Strategy
    simulator: Simulator
    trial: int  # 0-based
    seed: int  # hash(run seed, session_id): LLM sampling seeds, anything per session
    init_seed: int  # hash(run seed, task/item/level/trial): the same for every condition (paired)
    # The initial knowledge state {"IUk: concept": {"state": ...}}; the engine fills it in before
    # run_shard (init-cache hit verbatim, else sampled from random.Random(init_seed)).
    initial_ks: Mapping[str, Any] | None = None

    @property
    def item_key(self) -> str:
        return item_key(self.task, self.item_id)


@dataclass(frozen=True)
class ShardSpec:
    """A group of sessions run by one task (all at once, each on its own clock), with everything they read."""

    shard_id: str  # "shard-000012": stable for a run's plan (files and markers are named by it)
    index: int
    sessions: tuple[SessionSpec, ...]
    items: Mapping[str, Item]  # item_key -> Item, for this shard's sessions only
    graphs: Mapping[str, IUGraph]  # item_key -> validated IU graph

    def item_of(self, s: SessionSpec) -> Item:
        return self.items[s.item_key]

    def graph_of(self, s: SessionSpec) -> IUGraph:
        return self.graphs[s.item_key]


@dataclass(frozen=True)
class RoleSettings:
    """How one role is asked (the model itself is in :class:`RoleModels`); a run config resolves
    them over the role's defaults (:mod:`ray_knowsim.schema.roles`)."""

    model: str  # model key from the run config ("" for the assistant: it comes per session)
    temperature: float
    max_tokens: int
    # Tries an unreadable answer gets (sim/ask.py): each repair repeats the request with the latest
    # refused reply and its complaint; 1 = no repair. A truncated answer gets one more call with the
    # whole max_tokens on top. Transport errors are retried by the HTTP client only, never here.
    attempts: int
    repair_temperature: float | None = None  # of the repair rounds; None: ``temperature``

    def apply(self, request: ChatRequest) -> ChatRequest:
        """``request`` with this role's temperature and token limit (the run config's, or the spec's)."""
        return with_fields(request, temperature=self.temperature, max_tokens=self.max_tokens)


@dataclass(frozen=True)
class ShardContext:
    """Run-wide settings every shard shares."""

    run_id: str
    config_hash: str
    rules: RuleConfig
    max_turns: int
    early_stop: EarlyStopMode  # "virtual": always run max_turns, record the stop; "stop": end there
    roles: Mapping[str, RoleSettings]  # "user_sim", "assistant", "extractor" (judges: ray_knowsim.score)
    prompts: str = DEFAULT_PROMPTS  # prompt set (templates at the newest pinned version not newer than this)
    connectable: str = "reference"  # definition of connectable unknowns shown to the learner (spec §12.7)
    plugins: tuple[str, ...] = ()  # modules the worker imports first (they register strategies, simulators)
    # Optional progress hook, called at most once per event-loop iteration after sessions finished
    # turns, with {"turns": session-turns finished since the last call, "live": sessions still
    # running, "kernel": {"calls", "sessions", "max"} so far (sessions stepped per kernel call)};
    # the engine forwards it to the progress display and the shard's summary.
    on_turn: Callable[[dict[str, Any]], None] | None = field(default=None, compare=False)
    # model key -> Price (ray_knowsim.schema.price) for the session's cost_usd; a key without a
    # price leaves cost_usd empty for the sessions that used it
    prices: Mapping[str, Any] = field(default_factory=dict)
    # "stop" mode never ends a session before this many turns (a training episode's guard, so a
    # policy is not rewarded for a stop the rules fire on turn 1); benchmark runs keep 0
    min_turns: int = 0
    # which invocation of the run (its index in the manifest's ``invocations``) the shard runs
    # under: its spend journal says so (io/spend.py)
    invocation: int = 0


@dataclass
class RoleModels:
    """The ChatModels of a shard, one per role; assistants keyed by the condition's model key.
    (The judges are not part of the simulation: see ``ray_knowsim.score``.)

    The same objects serve every shard of the worker: they share HTTP rate limiters (a named Ray
    actor per endpoint) and vLLM engine actors; the engine wraps them to count calls and tokens.
    """

    user_sim: ChatModel
    extractor: ChatModel
    assistants: Mapping[str, ChatModel]

    def assistant(self, key: str) -> ChatModel:
        try:
            return self.assistants[key]
        except KeyError:
            raise KeyError(f"no assistant model {key!r}; have {sorted(self.assistants)}") from None


@dataclass
class SessionResult:
    """One finished (or explicitly failed) session: its row and its trajectory."""

    session: SessionRow
    turns: list[TurnRow] = field(default_factory=list)


class ShardFn(Protocol):
    def __call__(self, shard: ShardSpec, models: RoleModels, ctx: ShardContext) -> AsyncIterator[SessionResult]: ...


__all__ = [
    "EarlyStopMode",
    "RoleModels",
    "RoleSettings",
    "SessionResult",
    "SessionSpec",
    "ShardContext",
    "ShardFn",
    "ShardSpec",
    "Simulator",
    "Strategy",
    "item_key",
    "request_id",
    "request_seed",
]
