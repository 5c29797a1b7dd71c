"""One shard's conversations, run to the end on one event loop (no Ray inside): :mod:`.shard`
runs its sessions at once, each on its own clock; :mod:`.loop` is one conversation's turn loop
(learner, tutor, extractor, state update, termination); :mod:`.ask` sends a request and reads,
repairs and accounts the answer; :mod:`.kernel_steps` batches the state updates of whichever
sessions are ready into one kernel call; :mod:`.rows` builds the rows a session commits. The Ray
side (fan-out, commits, resume) is ``ray_knowsim.run``; what it hands a shard is :mod:`.types`."""
