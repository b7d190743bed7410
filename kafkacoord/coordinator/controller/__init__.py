"""Pure, I/O-free controller (docs/architecture.md#controller).

Algorithms:

- :mod:`~kafkacoord.coordinator.controller.placement`: replica assignment for new
  topics and partitions (Kafka's ``AdminUtils.assignReplicasToBrokers``).
- :mod:`~kafkacoord.coordinator.controller.election`: partition leader election
  strategies (Kafka's ``PartitionLeaderElectionAlgorithms``).
- :mod:`~kafkacoord.coordinator.controller.leader_rebalance`: the auto leader rebalance check
  (Kafka's ``checkAndTriggerAutoLeaderRebalance``).

The state machine:

- :mod:`~kafkacoord.coordinator.controller.image`: :class:`MetadataImage`, the replayed
  ``__kc_metadata`` (also what node agents and the CLI read).
- :mod:`~kafkacoord.coordinator.controller.states`: partition and replica state machines.
- :mod:`~kafkacoord.coordinator.controller.batch`: the records of one handler, each
  stamped with the controller's epoch.
- :mod:`~kafkacoord.coordinator.controller.partition_change`: every change to a partition
  (Kafka's ``PartitionChangeBuilder``): elections, the epoch rules, the fencing fast path.
- :mod:`~kafkacoord.coordinator.controller.records`: every record of ``__kc_metadata``.
- Managers, one concern each: ``nodes`` (lifecycle, sessions, controlled shutdown),
  ``partitions`` (elections, ISR), ``topic_creation``, ``topic_deletion``,
  ``internal_topics`` (the group shards' topic), ``reassignments`` (KIP-455),
  ``leadership`` (ElectLeaders, auto rebalance).
- :mod:`~kafkacoord.coordinator.controller.shard`: :class:`ControllerShard`, the
  runtime's ``Shard``; :mod:`~kafkacoord.coordinator.controller.config` its settings.

Nothing here touches the network, the clock or storage; callers pass in state and get
decisions back.
"""
