"""Running an experiment on Ray. The layers of a run, top to bottom:

* :mod:`.fan_out` — ``run``: the Ray fan-out of shard tasks, resume, manifest, the scoring stage,
  the tables (named for what it does: "batch" meant three things);
* ``ray_knowsim.plan.build`` — everything ``run`` derives from the config before work starts;
* :mod:`.worker` — one shard inside a Ray worker (initial states, the loop, streamed commits).

Beside them: :mod:`.resume` (what is left to run), :mod:`.manifest`, :mod:`.progress`,
:mod:`.eta`, :mod:`.fail_fast`, :mod:`.collector` (fewer garbage collections while a shard runs), and
:mod:`.extractor` (a run config's extractor model outside a run).
"""
