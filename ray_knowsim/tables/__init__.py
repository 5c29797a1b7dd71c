"""A run's tables from its committed rows: the reductions (:mod:`.reduce`), the outcome counts
(:mod:`.outcomes`) and their table and terminal lines (:mod:`.outcome_tables`), the cost
(:mod:`.cost`) and the simulator's sanity checks (:mod:`.sanity`). The readers they use are
``ray_knowsim.io``; the report, the viewer and compare read the same functions."""
