"""A real training smoke test: TRL's GRPO trainer (trl 1.16, the `trl` extra in .venv-llm) with
SmolLM2-135M as the tutor policy and the offline simulator as the learner, a few optimisation
steps on CPU. The rewards the trainer sees are the episodes' KG, the masks cover exactly the
policy's own tokens, and nothing leaks between episodes."""

from __future__ import annotations

import pytest

from tests.doubles.llm_cpu import smollm2_dir  # noqa: F401

pytestmark = [pytest.mark.llm_cpu, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _needs_trl():
    # A fixture, not a module-level skip: outside .venv-llm the test is deselected (marker llm_cpu),
    # never counted as skipped; inside it, a missing trl is a skip, which scripts/test.sh fails on.
    pytest.importorskip("trl", reason="needs the trl extra: scripts/setup_llm_cpu.sh installs it into .venv-llm")

RESETS = [{"task": "math", "item_id": "demo_math_01", "level": "novice", "seed": 1},
          {"task": "expertqa", "item_id": "demo_open_01", "level": "intermediate", "seed": 2}]


def test_grpo_trains_a_tutor_on_knowsim_rewards(smollm2_dir, tmp_path, monkeypatch):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from ray_knowsim.training import EnvironmentConfig
    from ray_knowsim.training.adapters.trl import KnowSimRollout, episode_prompts
    from ray_knowsim.training.threaded import EnvironmentThread

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    seen: list[list] = []

    def reward(completions, knowsim_reward, **_):
        seen.append(list(knowsim_reward))
        return list(knowsim_reward)

    with EnvironmentThread(EnvironmentConfig(max_turns=2, early_stop="virtual")) as env:
        rollout = KnowSimRollout(env, max_new_tokens=24)
        args = GRPOConfig(
            output_dir=str(tmp_path), use_cpu=True, max_steps=2, per_device_train_batch_size=2, num_generations=2,
            max_completion_length=512, learning_rate=1e-4, logging_steps=1, report_to=[], save_strategy="no",
            bf16=False, beta=0.0, seed=0, dataloader_num_workers=0,
        )  # fmt: skip
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[reward], args=args,
                              train_dataset=Dataset.from_dict({"prompt": episode_prompts(RESETS)}), rollout_func=rollout)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        trainer.train()
        transcripts = {e["episode_id"]: e["transcript"] for e in rollout.episodes}

    # the rewards that reached the trainer are the episodes' own
    assert seen and [r for batch in seen for r in batch] == [e["reward"] for e in rollout.episodes]
    assert all(isinstance(r, float) for batch in seen for r in batch)
    assert [h for h in trainer.state.log_history if "reward" in h], "no reward was logged"
    assert trainer.state.global_step == 2
    # masks: the policy's tokens decode to the tutor turns the environment received; the masked rest
    # holds the learner's messages of THIS episode only (nothing leaks between episodes)
    assert len({e["episode_id"] for e in rollout.episodes}) == len(rollout.episodes) >= 4
    for e in rollout.episodes:
        ids, mask = e["completion_ids"], e["env_mask"]
        assert len(ids) == len(mask) and 1 in mask
        if len(e["tutor_turns"]) == 2:  # a whole episode (an empty first reply ends it at once)
            assert 0 in mask
        transcript = transcripts[e["episode_id"]]
        learner = [text for speaker, text in transcript if speaker == "user"]
        tutor = [text for speaker, text in transcript if speaker == "assistant"]
        assert tutor == e["tutor_turns"]
        masked = tokenizer.decode([t for t, m in zip(ids, mask) if m == 0])
        for text in learner[1:]:  # the opening is in the prompt, the later messages in the masked part
            assert text.strip()[:40] in masked
        others = [t for o in rollout.episodes if o["reset"] != e["reset"] for s, t in transcripts[o["episode_id"]] if s == "user"]
        assert not any(t.strip()[:40] in masked for t in others if t not in learner)
        policy = tokenizer.decode([t for t, m in zip(ids, mask) if m == 1], skip_special_tokens=True)
        for turn in tutor:
            assert turn in policy
    # and the optimiser stepped (unless every group's rewards tied, which gives no gradient)
    rewards = [e["reward"] for e in rollout.episodes]
    if len(set(rewards)) > 1:
        assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
