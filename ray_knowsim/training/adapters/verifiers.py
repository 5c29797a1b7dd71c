"""A verifiers v1 environment (Prime Intellect's ``verifiers`` 0.4, ``verifiers.v1``): KnowSim
episodes whose tutor is the run's assistant agent, the policy being evaluated or trained.

* :class:`KnowSimTaskset` (plugin id ``knowsim-tutoring``: the top-level ``knowsim_tutoring``
  module exports it and the env) yields one :class:`KnowSimTask` per item x knowledge level x seed
  of a benchmark run config (default: the packaged demo items on the offline model). A task is
  an episode's reset; its ``prompt`` is None because the learner opens the conversation.
* :class:`KnowSimEnv` owns one :class:`TrainingEnvironment` for all the episodes it runs (built
  in ``start()`` on the serving event loop, so concurrent episodes share the models' limiters and
  the kernel's batched step). ``run(task, agents)`` resets an episode and relays: the learner's
  message is the assistant's next user turn, the assistant's reply is the episode's ``step``,
  until the method ends the episode (its stopping rules, ``max_turns``, a failure).
* The learner is the environment's own simulator, not an agent of the run: its messages enter
  the assistant's trace as user turns, which are never sampled and so never trained; the
  extractor, the knowledge state and the IU graph never enter any agent's context. The policy
  sees exactly the benchmark's tutor prompt (the strategy's system prompt + the conversation).
* ``finalize`` records the episode's benchmark metrics on the assistant's trace: named rewards
  (``rewards``: default ``kg`` with weight 1, ``dc`` and ``co`` with weight 0, so the trace's
  reward is the KG and the others are visible beside it), every numeric episode metric and the
  per-turn components (``gain_turn_<k>``, ``overload_turn_<k>``, ``redundant_turn_<k>``) as
  metrics, and the stop reason, ids and states in ``trace.info["knowsim"]``.
* An episode the simulator cannot score (an extractor or learner failure) records every named
  reward as None, verifiers' own mark of an unscored signal, AND fails the episode with the
  reason: ``Trace.reward`` reads a None reward as nothing (0.0), so a trainer that did not drop
  the episode would learn the outage as the policy's fault. A failed episode (``ok`` False) is
  what verifiers' resume redoes and trainers drop.
* A tutor that breaks the episode off (an empty or oversized reply, its own turn limit) is
  scored on the turns it took: the benchmark's metrics of the trajectory so far (KG = the sum of
  its turn gains; 0 when it never completed a turn).
"""

from __future__ import annotations

import math
import os
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from ray_knowsim.training.environment import TrainingEnvironment
from ray_knowsim.training.errors import InvalidAction, TrainingEnvError
from ray_knowsim.training.rewards import episode_reward
from ray_knowsim.training.schema import EarlyStop, EnvironmentConfig, KnowledgeLevel, Observation, ResetRequest

#: the verifiers plugin id (``--env.taskset.id``, ``vf-eval knowsim-tutoring``): module knowsim_tutoring
TASKSET_ID = "knowsim-tutoring"


class KnowSimTaskData(vf.TaskData):
    """One episode's reset: a benchmark item at a knowledge level, a learner simulator, a seed."""

    task: str
    item_id: str
    level: KnowledgeLevel = "novice"
    seed: int = Field(0, ge=0)
    simulator: str = "structured"
    strategy: str | None = None

    def reset_request(self) -> ResetRequest:
        return ResetRequest(task=self.task, item_id=self.item_id, level=self.level, seed=self.seed,
                            simulator=self.simulator, strategy=self.strategy)


class KnowSimTask(vf.Task[KnowSimTaskData, vf.State, vf.TaskConfig]):
    """An episode to run; it scores nothing itself (the env's ``finalize`` does, from the episode)."""

    @property
    def key(self) -> str:
        d = self.data
        return f"{d.task}/{d.item_id}/{d.level}/{d.simulator}/{d.strategy or '-'}/seed={d.seed}"


class KnowSimTasksetConfig(vf.TasksetConfig):
    id: str = TASKSET_ID
    run_config: str | None = None
    """Benchmark run config (YAML) whose items, graphs, learner/extractor models, rules and
    prompts the episodes use; None: the packaged demo on the offline model."""
    overrides: list[str] = Field(default_factory=list)
    """KEY=VALUE assignments applied to the run config."""
    items: list[str] | None = None
    """``"<task>/<item_id>"`` keys to draw from (None: every item of the run config)."""
    levels: list[KnowledgeLevel] = Field(default_factory=lambda: ["novice", "intermediate", "advanced"], min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    """One task per seed (the learner's initial state and sampling derive from it)."""
    simulator: str = "structured"
    strategy: str | None = None
    """Tutor prompt framing (None: the env's ``strategy``)."""

    def environment_config(self, **fields: Any) -> EnvironmentConfig:
        return EnvironmentConfig(run_config=self.run_config, overrides=list(self.overrides), **fields)


class KnowSimTaskset(vf.Taskset[KnowSimTask, KnowSimTasksetConfig]):
    """Item x level x seed, in the run config's item order."""

    def load(self) -> Iterator[KnowSimTask]:
        from ray_knowsim.training.build import item_keys

        known = item_keys(self.config.environment_config())
        wanted = self.config.items if self.config.items is not None else known
        unknown = [k for k in wanted if k not in known]
        if unknown:
            raise ValueError(f"items {unknown} are not in the run config; it has {known}")
        for key in wanted:
            task, item_id = key.split("/", 1)
            for level in self.config.levels:
                for seed in self.config.seeds:
                    data = KnowSimTaskData(task=task, item_id=item_id, level=level, seed=seed,
                                           simulator=self.config.simulator, strategy=self.config.strategy)
                    yield KnowSimTask(data.model_copy(update={"id": KnowSimTask(data).key}), self.config.task)


class KnowSimEnvConfig(vf.EnvConfig):
    assistant: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime={"type": "subprocess"})
    """The tutor: the run's model (the policy) on verifiers' tool-less chat loop, on the host (it
    executes nothing); its turns are the episode's tutor turns."""
    taskset: KnowSimTasksetConfig = KnowSimTasksetConfig()
    max_turns: int | None = Field(None, ge=1, le=200)
    """Tutor turns at most (None: the run config's)."""
    min_turns: int = Field(1, ge=1)
    early_stop: EarlyStop = "stop"
    strategy: str = "minimal"
    max_message_chars: int = Field(16_000, ge=1)
    max_episodes: int = Field(4096, ge=1)
    rewards: dict[str, float] = Field(default_factory=lambda: {"kg": 1.0, "dc": 0.0, "co": 0.0}, min_length=1)
    """Episode metrics recorded as named rewards, with their weights (the trace's reward is the
    weighted sum): any numeric metric of ``rewards.episode.metrics`` (kg, nkg, dc, ic, co, po, ...)."""

    def environment_config(self) -> EnvironmentConfig:
        return self.taskset.environment_config(
            max_turns=self.max_turns, min_turns=self.min_turns, early_stop=self.early_stop, strategy=self.strategy,
            max_message_chars=self.max_message_chars, max_episodes=self.max_episodes)  # fmt: skip


class KnowSimEnv(vf.Env[KnowSimEnvConfig]):
    """KnowSim episodes with the run's model as the tutor (see the module docstring)."""

    def __init__(self, config: KnowSimEnvConfig) -> None:
        super().__init__(config)
        self.environment: TrainingEnvironment | None = None

    async def start(self) -> None:
        _uv_on_path()
        self.environment = TrainingEnvironment.from_config(self.config.environment_config())

    async def stop(self) -> None:
        environment, self.environment = self.environment, None
        if environment is not None:
            await environment.aclose()

    async def setup(self, agents: vf.Agents) -> None:
        agents.assistant.trainable = True  # the policy; the learner is no agent, so nothing else can train

    async def run(self, task: KnowSimTask, agents: vf.Agents) -> None:
        env = self.environment
        if env is None:
            raise RuntimeError("KnowSimEnv runs episodes inside env.serving() (its start() builds the environment)")
        obs = await env.reset(task.data.reset_request(), episode_id=f"vf-{uuid.uuid4().hex}")
        if obs.done:  # the learner failed before the tutor's first turn: nothing for the policy to do
            raise RuntimeError(f"knowsim episode {obs.episode_id} ended before the tutor's first turn (unscored): "
                               f"{obs.metadata.error}: {obs.metadata.error_detail}")
        system = obs.prompt_messages[0]["content"] if obs.prompt_messages[0]["role"] == "system" else None
        # the learner opens: the tutor's task has no prompt, only the benchmark's tutor system prompt
        tutor_task = type(task)(task.data.model_copy(update={"prompt": None, "system_prompt": system}), task.config)
        turns: list[dict[str, Any]] = []
        ended_by, detail = "episode_done", None
        try:
            async with agents.assistant.interaction(tutor_task) as tutor:
                while not obs.done:
                    answer = await tutor.turn(obs.learner_message)
                    if answer.terminated:  # the agent's own limit or failure ended its side
                        ended_by = "tutor_stopped"
                        break
                    try:
                        obs = await env.step(obs.episode_id, answer.last_reply)
                    except InvalidAction as exc:  # an empty or oversized reply: the episode ends here
                        ended_by, detail = "invalid_action", str(exc)
                        break
                    if obs.rewards.turn is not None:
                        turns.append(obs.rewards.turn.model_dump())
                tutor.trace.info["knowsim"] = self._outcome(env, obs, turns, ended_by, detail)
        finally:
            try:
                await env.close(obs.episode_id)  # a broken-off episode is cancelled; a done one forgotten
            except TrainingEnvError:
                pass

    @staticmethod
    def _outcome(env: TrainingEnvironment, obs: Observation, turns: list[dict[str, Any]], ended_by: str,
                 detail: str | None) -> dict[str, Any]:
        """What ``finalize`` scores, kept on the assistant's trace (``info["knowsim"]``)."""
        meta = obs.metadata
        if obs.done:
            scored = obs.reward is not None
            metrics = obs.rewards.episode.metrics if scored and obs.rewards.episode is not None else None
        else:  # the tutor broke off: the benchmark's metrics of the turns it took
            scored = True
            partial = episode_reward(env.episode(obs.episode_id), env.ctx)
            metrics = partial.metrics if partial is not None else {"kg": 0.0, "turns": 0}
        return {
            "episode_id": obs.episode_id, "session_id": meta.session_id, "scored": scored, "ended_by": ended_by,
            "ended_detail": detail, "stop_reason": meta.stop_reason, "error": meta.error,
            "error_detail": meta.error_detail, "turns": turns, "metrics": metrics, "rules_hash": meta.rules_hash,
            "models": meta.models, "initial_states": meta.initial_states, "states": meta.states,
        }  # fmt: skip

    async def finalize(self, task: KnowSimTask, episode: vf.Episode) -> None:
        (trace,) = (t for t in episode.traces if t.agent.name == "assistant")
        outcome = trace.info.get("knowsim")
        if outcome is None:
            raise RuntimeError("the assistant's trace has no knowsim outcome (the episode did not finish its run)")
        for k, turn in enumerate(outcome["turns"], 1):
            trace.record_metric(f"gain_turn_{k}", turn["gain"])
            trace.record_metric(f"overload_turn_{k}", float(turn["overload"]))
            trace.record_metric(f"redundant_turn_{k}", float(turn["redundant"]))
        if not outcome["scored"]:
            for name in self.config.rewards:
                trace.rewards[name] = None  # verifiers' "unscored", never 0
            raise RuntimeError(f"knowsim episode {outcome['episode_id']} is unscored: {outcome['error']}: "
                               f"{outcome['error_detail']}")
        metrics = outcome["metrics"]
        for name, value in metrics.items():
            if _number(value) is not None:
                trace.record_metric(name, _number(value))
            elif value is None or isinstance(value, float):  # an undefined metric (no early stop: kg_es)
                trace.metrics[name] = None
        numeric = sorted(k for k, v in metrics.items() if _number(v) is not None)
        for name, weight in self.config.rewards.items():
            if name not in metrics and outcome["ended_by"] == "episode_done":
                raise ValueError(f"rewards names {name!r}, which is no episode metric; the numeric ones are {numeric}")
            value = _number(metrics.get(name))
            if value is None:  # undefined here (a tutor that broke off before any turn has only kg)
                trace.rewards[name] = None
            else:
                trace.record_reward(name, value, weight)


def _uv_on_path() -> None:
    """Put the extra's ``uv`` on PATH when it is not there (a venv's python run without activating
    the venv): the null harness runs its chat loop through ``uv``, and verifiers, finding none,
    would ``pip install --user`` one or download it."""
    if shutil.which("uv") is not None:
        return
    try:
        from uv import find_uv_bin
    except ImportError:
        return
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(find_uv_bin()), os.environ.get("PATH", "")])


def _number(value: Any) -> float | None:
    """A metric's value as a float; None for what is not a finite number (None, NaN, a string)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None

__all__ = ["TASKSET_ID", "KnowSimEnv", "KnowSimEnvConfig", "KnowSimTask", "KnowSimTaskData", "KnowSimTaskset",
           "KnowSimTasksetConfig"]
