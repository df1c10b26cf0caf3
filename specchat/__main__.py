"""`python -m specchat` runs the command-line interface, under the name `specchat` (its help
and its shell completion read the same as the installed command's)."""

from specchat.cli import main

main(prog_name="specchat")
