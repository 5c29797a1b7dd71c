"""Self-hosted open-weight models: vLLM async engines in Ray actors (see docs/cluster.md).

* :mod:`.config` — the model entry (pydantic; no Ray, no vLLM);
* :mod:`.actor` — the engine actor (vLLM imported only inside it);
* :mod:`.pool` — start/stop a model's replicas; the ChatModel the shards call;
* :mod:`.placement` — fit the run's models on the cluster's GPUs, group conditions when they do not all fit.
"""

from ray_knowsim.engine.vllm.config import VLLMModelConfig

__all__ = ["VLLMModelConfig"]
