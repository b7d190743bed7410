"""Kafka log access and the local RocksDB state of kafkacoord's shards."""
