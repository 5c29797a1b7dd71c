"""A TRL ``rollout_func`` (GRPOTrainer, trl 1.16): multi-turn tutoring episodes as completions.

Each dataset prompt is a reset (:func:`episode_prompts`: JSON of a :class:`ResetRequest`'s
fields); the trainer's sampler puts each prompt ``num_generations`` times in a batch, so that many
episodes run with the same learner (same seed, same initial state) and differ only by the policy's turns — the
group GRPO compares. One completion is one whole episode as one token stream:

* ``prompt_ids``: the benchmark's tutor prompt for the first reply, chat-templated;
* ``completion_ids``: the policy's reply tokens of every turn, each followed by the template's
  rendering of the learner's next message;
* ``env_mask``: 1 on the policy's own tokens, 0 on the learner's (the extractor's text never
  enters the stream), so only the tutor's tokens are trained; ``logprobs``: the sampling
  log-probabilities of the policy's tokens (0 on the learner's);
* extra fields for the reward functions: ``knowsim_reward`` (the episode's KG: the sum of its turn
  gains; None when the episode ended unscored), ``knowsim_episode_id``, ``knowsim_turn_gains``,
  ``knowsim_tutor_turns``.

The policy generates with the trainer's own model (``trainer.model``; transformers ``generate``),
which is what a CPU smoke test or a small run wants; with vLLM generation, write the same loop
around the trainer's vLLM client.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any, Mapping, Sequence

from ray_knowsim.training.errors import InvalidAction
from ray_knowsim.training.schema import ResetRequest
from ray_knowsim.training.threaded import EnvironmentThread


def episode_prompts(resets: Sequence[Mapping[str, Any]]) -> list[str]:
    """Dataset prompts, one per reset (validated now, so a bad one fails before training starts)."""
    return [json.dumps(ResetRequest(**r).model_dump(exclude_none=True), sort_keys=True) for r in resets]


def knowsim_reward(completions: Sequence[Any], knowsim_reward: Sequence[float | None], **_: Any) -> list[float | None]:
    """The reward function that passes the episodes' KG through (None: unscored)."""
    return list(knowsim_reward)


def _ids(encoded: Any) -> list[int]:
    if isinstance(encoded, Mapping) or hasattr(encoded, "input_ids"):
        encoded = encoded["input_ids"]
    return [int(t) for t in encoded]


class KnowSimRollout:
    """``GRPOTrainer(..., rollout_func=KnowSimRollout(env), reward_funcs=[knowsim_reward])``."""

    def __init__(self, env: EnvironmentThread, *, max_new_tokens: int = 64, temperature: float = 1.0,
                 keep: int = 1024) -> None:
        self.env, self.max_new_tokens, self.temperature = env, max_new_tokens, temperature
        # the latest episodes run, for inspection (ids, transcripts, turns, rewards, tokens)
        self.episodes: deque[dict[str, Any]] = deque(maxlen=keep)
        self._count = 0

    def _template(self, tokenizer: Any, messages: list[dict[str, str]], generation: bool) -> list[int]:
        return _ids(tokenizer.apply_chat_template(messages, add_generation_prompt=generation, tokenize=True))

    def _generate(self, model: Any, tokenizer: Any, context: list[int]) -> tuple[list[int], list[float]]:
        import torch

        with torch.no_grad():
            out = model.generate(
                torch.tensor([context], device=model.device), attention_mask=torch.ones(1, len(context), dtype=torch.long,
                                                                                        device=model.device),
                max_new_tokens=self.max_new_tokens, do_sample=True, temperature=self.temperature, top_k=0, top_p=1.0,
                output_scores=True, return_dict_in_generate=True,
                pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
            )  # fmt: skip
        new = out.sequences[0, len(context):].tolist()
        logprobs = [float(torch.log_softmax(score[0].float(), dim=-1)[tok]) for score, tok in zip(out.scores, new)]
        return new, logprobs

    def episode(self, model: Any, tokenizer: Any, reset: Mapping[str, Any]) -> dict[str, Any]:
        """One episode as one completion (see the module docstring)."""
        self._count += 1
        obs = self.env.reset(dict(reset), episode_id=f"trl-{id(self):x}-{self._count}")
        prompt_ids = self._template(tokenizer, obs.prompt_messages, True)
        completion, logprobs, mask, gains, turns = [], [], [], [], []
        reward: float | None = None
        while True:
            new, lps = self._generate(model, tokenizer, prompt_ids + completion)
            completion += new
            logprobs += lps
            mask += [1] * len(new)
            reply = tokenizer.decode(new, skip_special_tokens=True).strip()
            try:
                obs = self.env.step(obs.episode_id, reply)
            except InvalidAction:  # an empty or oversized reply ends the episode: what it gained so far
                transcript = self.env.transcript(obs.episode_id)
                self.env.close_episode(obs.episode_id)
                reward = sum(gains, 0.0)
                break
            turns.append(reply)
            if obs.rewards.turn is not None:
                gains.append(obs.rewards.turn.gain)
            if obs.done:
                reward = None if obs.reward is None else obs.rewards.episode.metrics["kg"] if obs.rewards.episode else None
                transcript = self.env.transcript(obs.episode_id)
                self.env.close_episode(obs.episode_id)  # the environment keeps no finished episode for us
                break
            before = self._template(tokenizer, obs.prompt_messages[:-1], False)
            after = self._template(tokenizer, obs.prompt_messages, True)
            if after[: len(before)] != before:
                raise RuntimeError("the chat template is not prefix-stable; the learner's turn cannot be cut out of it")
            learner = after[len(before):]  # the learner's message as the template renders it, and the reply prompt
            completion += learner
            logprobs += [0.0] * len(learner)
            mask += [0] * len(learner)
        record = {"episode_id": obs.episode_id, "reset": dict(reset), "transcript": transcript, "tutor_turns": turns,
                  "turn_gains": gains,
                  "reward": reward, "prompt_ids": prompt_ids, "completion_ids": completion, "env_mask": mask}
        self.episodes.append(record)
        return {**record, "logprobs": logprobs}

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = trainer.processing_class
        was_training = model.training
        model.eval()
        try:
            # one completion per prompt entry: the trainer's sampler already repeats each prompt
            # num_generations times in the batch (checked against trl 1.16's RepeatSampler)
            runs = [self.episode(model, tokenizer, json.loads(_text(p))) for p in prompts]
        finally:
            model.train(was_training)
        return {
            "prompt_ids": [r["prompt_ids"] for r in runs],
            "completion_ids": [r["completion_ids"] for r in runs],
            "logprobs": [r["logprobs"] for r in runs],
            "env_mask": [r["env_mask"] for r in runs],
            "knowsim_reward": [r["reward"] for r in runs],
            "knowsim_episode_id": [r["episode_id"] for r in runs],
            "knowsim_turn_gains": [r["turn_gains"] for r in runs],
            "knowsim_tutor_turns": [r["tutor_turns"] for r in runs],
        }


def _text(prompt: Any) -> str:
    """A dataset prompt as given (a string) or as TRL may pass a conversational one (its last content)."""
    if isinstance(prompt, str):
        return prompt
    return prompt[-1]["content"]


__all__ = ["KnowSimRollout", "episode_prompts", "knowsim_reward"]
