"""`python -m specchat` runs the command-line interface."""

from specchat.cli import main

main()
