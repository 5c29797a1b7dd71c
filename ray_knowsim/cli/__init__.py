"""The ``ray-knowsim`` command line: one module per subcommand, each with ``register(subparsers)``
(its flags and help, which ``docs/commands.md`` is generated from) and ``main(args)`` (its exit
code). A subcommand parses, calls the package's own entry point and prints; the work lives below
(``run/``, ``compare/``, ``report/``, ...), so each command is also usable from Python.
:mod:`.main` builds the parser."""
