"""The model-backend registry: a backend is its config-entry class plus a builder of its ChatModel.

A run config's ``models.<key>: {backend: NAME, ...}`` is validated by the entry class registered
under NAME, and :func:`ray_knowsim.backends.model_set.build_models` makes the model with its builder.
Nothing else branches on backend names: what the planner and the cost accounting assume of a
backend is its registered :class:`BackendProfile`. Each built-in (``offline``, ``http``, ``vllm``) is a
folder of this package that registers itself (``backends/<name>/__init__.py``: its entry class, its
builder and its check before spending); code outside the package registers the same way
(``docs/extending.md``) and is imported through the run config's ``plugins`` list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from pydantic import BaseModel

from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.registry import Registry


@dataclass
class BuildContext:
    """What a builder may use: the model key, the run's IU graphs, and a place to defer waits."""

    key: str
    graphs: Mapping[str, IUGraph]
    wait_s: float = 900
    # Called after every model is built (e.g. wait for engine pools that start in parallel).
    after: list[Callable[[], None]] = field(default_factory=list)
    # The driver's running engine pools by model key: reused across condition groups, filled by
    # builders that start one, shut down by the runner in a ``finally``.
    pools: dict[str, Any] = field(default_factory=dict)


#: a real chat model's completion lengths per request (tokens, ceil(chars / 4)): the planner's prior
#: for a backend that names none and that no earlier run has measured. Measured on the KnowSim
#: authors' recorded real-model answers (knowsim-ref/examples, 4 conversations: 39 learner messages,
#: 435 extractor IU entries, 8 ratings, 2 termination verdicts) by
#: :func:`ray_knowsim.preflight.priors.measured_priors` (168.5, 118.3, 320.5, 201.5);
#: tests/preflight/test_priors.py keeps them within 10 % of it. The learner's includes an assumed
#: private thought as long as its message (the release keeps the message only). The assistant's
#: reply length is each strategy's own (``TutorStrategy.reply_tokens``; a backend's
#: ``reply_length`` names the field)
TYPICAL_COMPLETION = {"user_sim": 170.0, "judge": 320.0, "judge_termination": 200.0, "extractor_per_iu": 118.0}


@dataclass(frozen=True)
class BackendProfile:
    """What the planner (``run --dry-run``, preflight/estimate.py) and the cost accounting assume of a
    backend before a run measured it. The defaults describe a remote chat model."""

    latency_s: float = 1.0  # per request, before generation
    tokens_per_s: float = 60.0  # generation speed; 0: generating costs no time
    in_process: bool = False  # requests run one at a time in the shard's own process (no overlap)
    free: bool = False  # costs nothing when its entry names no price
    completion_tokens: Mapping[str, Any] = field(default_factory=lambda: TYPICAL_COMPLETION)
    #: the field of each tutor strategy (ray_knowsim.strategies.base.TutorStrategy) that holds its
    #: expected reply length under this backend, in the unit of ``count_tokens``
    reply_length: str = "reply_tokens"
    count_tokens: Callable[[str], int] | None = None  # its own token count (None: ceil(chars / 4))
    token_count_name: str = ""  # how count_tokens counts, for the estimate's notes


@dataclass(frozen=True)
class Backend:
    name: str
    entry: type[BaseModel]  # pydantic class with ``backend: Literal[name]``; forbids unknown keys
    build: Callable[[Any, BuildContext], ChatModel]
    # Entry fields that change how fast or how safely a model is reached, not what it answers:
    # they stay out of the config hash, so tuning them keeps a run directory resumable.
    operational: frozenset[str] = frozenset()
    # Whether identical requests may be answered from the run's response cache.
    cacheable: bool = True
    # The NAME(S) of the environment variables the entry needs (API key, hub token), never values.
    secret_env: Callable[[Any], str | list[str] | None] = lambda entry: None
    # Further names of secret settings to record in the manifest (``(entry, key) -> names``).
    secret_names: Callable[[Any, str], list[str]] = lambda entry, key: []
    # A test double (answers from facts handed to it, not a real model): reports say so on top.
    double: bool = False
    profile: BackendProfile = BackendProfile()
    # The check before a run spends anything (preflight/checks.py): ``async (entry, key, limiter)
    # -> Capacity`` — does the endpoint answer, serve the model, and how long a context does it
    # hold; a chat request it sends goes under ``limiter`` (the endpoint's quota, or None).
    # None: nothing to check (an in-process model).
    probe: Callable[[Any, str, Any], Awaitable[Any]] | None = None


ALWAYS_OPERATIONAL = frozenset({"price"})

BACKENDS: Registry[Backend] = Registry("model backend", builtins=("ray_knowsim.backends.offline", "ray_knowsim.backends.http", "ray_knowsim.backends.vllm"))


def register_backend(
    name: str,
    entry: type[BaseModel],
    *,
    operational: set[str] | frozenset[str] = frozenset(),
    cacheable: bool = True,
    secret_env: Callable[[Any], str | list[str] | None] | None = None,
    secret_names: Callable[[Any, str], list[str]] | None = None,
    double: bool = False,
    profile: BackendProfile | None = None,
    probe: Callable[[Any, str, Any], Awaitable[Any]] | None = None,
) -> Callable[[Callable[[Any, BuildContext], ChatModel]], Callable[[Any, BuildContext], ChatModel]]:
    """``@register_backend("name", MyEntry)`` on ``def build(entry, ctx) -> ChatModel``."""

    def add(build: Callable[[Any, BuildContext], ChatModel]) -> Callable[[Any, BuildContext], ChatModel]:
        BACKENDS.register(
            name,
            # a price changes what a run costs, never what it answers: always out of the hash
            Backend(name, entry, build, frozenset(operational) | ALWAYS_OPERATIONAL, cacheable,
                    secret_env or (lambda e: None), secret_names or (lambda e, k: []), double,
                    profile or BackendProfile(), probe),
        )
        return build

    return add


__all__ = ["BACKENDS", "TYPICAL_COMPLETION", "Backend", "BackendProfile", "BuildContext", "register_backend"]
