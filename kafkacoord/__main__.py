"""``python -m kafkacoord``: the command line."""

from kafkacoord.cli.main import main

main()
