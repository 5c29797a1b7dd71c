"""What talks to a Ray cluster as a cluster: joining or starting one, checking that every worker runs
the driver's code, surviving a lost node, leases on cluster-lived actors, and the one bounded fan-out
of Ray tasks with its shared-filesystem check."""
