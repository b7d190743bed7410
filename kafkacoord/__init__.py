"""kafkacoord: Kafka's controller and group coordinator, with all state stored on Kafka."""

__version__ = "0.1.0"
