"""kafkacoord: Kafka's controller and group coordinator, with all state stored on Kafka."""

from kafkacoord.compiled import install_guard

__version__ = "0.1.0"

# Before any other kafkacoord module: a stale compiled build must not shadow a source.
BUILD = install_guard()
