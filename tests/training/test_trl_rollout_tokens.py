"""The TRL rollout's token bookkeeping without TRL or torch: a character-level chat template and a
scripted policy. The policy's tokens (mask 1) are exactly its replies, the learner's (mask 0) are
the template's rendering of the learner's messages, every completion is its own episode."""

from __future__ import annotations

import json

from ray_knowsim.training import EnvironmentConfig
from ray_knowsim.training.adapters.trl import KnowSimRollout, episode_prompts
from ray_knowsim.training.threaded import EnvironmentThread

REPLIES = ["Let us look at what a fraction is.", "Now compare two fractions with a picture."]


class CharTemplate:
    """Tokens are characters; the template is prefix-stable like ChatML."""

    pad_token_id, eos_token_id = 0, 0

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        text = "".join(f"<{m['role']}>{m['content']}</>" for m in messages) + ("<assistant>" if add_generation_prompt else "")
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=False):
        text = "".join(chr(i) for i in ids)
        return text.replace("</>", "") if skip_special_tokens else text  # "</>" plays the end-of-turn token


class ScriptedRollout(KnowSimRollout):
    def _generate(self, model, tokenizer, context):
        turn = sum(1 for k in range(len(context)) if context[k:k + 11] == [ord(c) for c in "<assistant>"]) - 1
        text = REPLIES[turn % len(REPLIES)] + "</>"
        return [ord(c) for c in text], [-0.5] * len(text)


def test_completions_mask_the_learner_and_keep_episodes_apart():
    tok = CharTemplate()
    prompts = episode_prompts([{"task": "math", "item_id": "demo_math_01", "seed": 4}] * 2
                              + [{"task": "math", "item_id": "demo_math_02", "seed": 5}] * 2)
    assert json.loads(prompts[0]) == {"task": "math", "item_id": "demo_math_01", "seed": 4, "level": "novice",
                                      "simulator": "structured"}
    with EnvironmentThread(EnvironmentConfig(max_turns=2, early_stop="virtual")) as env:
        rollout = ScriptedRollout(env)

        class Trainer:
            model, processing_class = type("M", (), {"training": False, "eval": lambda s: None,
                                                     "train": lambda s, mode=True: None})(), tok

            class accelerator:
                unwrap_model = staticmethod(lambda m: m)

        out = rollout(prompts, Trainer())
        transcripts = {e["episode_id"]: e["transcript"] for e in rollout.episodes}
        assert env.env.open_episodes == 0  # finished episodes are closed
    assert len(out["completion_ids"]) == len(prompts) == len(set(out["knowsim_episode_id"]))
    for k, episode_id in enumerate(out["knowsim_episode_id"]):
        ids, mask, lps = out["completion_ids"][k], out["env_mask"][k], out["logprobs"][k]
        assert len(ids) == len(mask) == len(lps)
        policy = tok.decode([t for t, m in zip(ids, mask) if m])
        learner = tok.decode([t for t, m in zip(ids, mask) if not m])
        assert policy == "".join(r + "</>" for r in REPLIES)
        assert all(lp == -0.5 for lp, m in zip(lps, mask) if m) and all(lp == 0.0 for lp, m in zip(lps, mask) if not m)
        said = [t for s, t in transcripts[episode_id] if s == "user"]
        assert [t for s, t in transcripts[episode_id] if s == "assistant"] == REPLIES
        assert learner == f"<user>{said[1]}</><assistant>"  # the second learner message, as the template renders it
        assert tok.decode(out["prompt_ids"][k]).endswith(f"<user>{said[0]}</><assistant>")
        assert out["knowsim_reward"][k] == sum(out["knowsim_turn_gains"][k])
    # the same reset and the same tutor turns give the same episode; another reset another one
    assert out["completion_ids"][0] == out["completion_ids"][1] != out["completion_ids"][2]
