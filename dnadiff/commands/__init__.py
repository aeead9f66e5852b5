"""One module per `dnadiff` subcommand: `HELP`, `add_arguments(parser)`, `run(args) -> exit code`.

Modules import heavy libraries inside `run`, so `dnadiff --help` stays fast.
"""
