"""One module per `specchat` subcommand beyond the small ones in cli.py.

Like cli.py, these sit at the top of the dependency graph: they may import the
chat, models and tui layers, and import anything heavy inside the command body.
"""
