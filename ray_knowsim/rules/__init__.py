"""The KnowSim learner model as deterministic rules, in plain Python that reads like the spec:
the per-turn state update (:mod:`.update`: prerequisite ceiling, cognitive load, sigmoid dropoff
with carry-forward, monotonicity), its settings and presets (:mod:`.config`), the initial state
(:mod:`.init_state`), graph facts (:mod:`.prerequisites`), per-turn counters and failure modes
(:mod:`.turn_metrics`), the virtual early stop (:mod:`.termination`), the conversation metrics
(:mod:`.final_metrics`) and a whole trajectory (:mod:`.trajectory`). The numba kernel
(``ray_knowsim.kernels``) is the batched form of the same update and is tested against it; the
reference replay (:mod:`.reference_record`, :mod:`.record_diff`) checks both against recorded runs.
Pure logic: no I/O, no Ray."""
