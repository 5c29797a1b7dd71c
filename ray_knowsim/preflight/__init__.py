"""Before a run spends anything: the checks of every model entry against its endpoint
(:mod:`.checks`), the dry run's estimate of requests, tokens, time and cost (:mod:`.estimate`),
and the design checks of the conditions (:mod:`.design`)."""
