"""``python -m ray_knowsim ...``: the ``ray-knowsim`` command run by this interpreter on the
``ray_knowsim`` it finds first (from a checkout's root: that checkout, the same copy Ray's
workers import there; see docs/cluster.md, "Which code runs")."""

if __name__ == "__main__":
    import sys

    from ray_knowsim.cli.main import main

    sys.exit(main())
