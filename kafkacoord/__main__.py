"""``python -m kafkacoord``: the command line."""

from kafkacoord.coordinator.cli import main

main()
