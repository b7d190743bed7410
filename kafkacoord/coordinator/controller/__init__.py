"""Pure, I/O-free controller algorithms (DESIGN.md §5).

Submodules:

- :mod:`~kafkacoord.coordinator.controller.placement`: replica assignment for new
  topics and partitions (Kafka's ``AdminUtils.assignReplicasToBrokers``).
- :mod:`~kafkacoord.coordinator.controller.election`: partition leader election
  strategies (Kafka's ``PartitionLeaderElectionAlgorithms``).
- :mod:`~kafkacoord.coordinator.controller.rebalance`: the auto leader rebalance check
  (Kafka's ``checkAndTriggerAutoLeaderRebalance``).

Nothing here touches the network, the clock or storage; callers pass in state and get
decisions back.
"""
