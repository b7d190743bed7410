"""Leader elections on demand: ``ElectLeaders`` and the auto leader rebalance
(Kafka's ``checkAndTriggerAutoLeaderRebalance``).

``ElectLeaders`` answers per partition like Kafka's: ELECTION_NOT_NEEDED when the
preferred replica already leads (preferred) or a leader exists (unclean),
PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION. Asked for every partition, it leaves out those that need no
election.

The auto rebalance runs on the ``leader-rebalance`` timer every
``leader_imbalance_check_interval_ms``: for each broker whose imbalance ratio is above
``leader_imbalance_per_broker_percentage``, a preferred election for its partitions whose
preferred replica is live and in the ISR, that are not being reassigned and whose topic
is not being deleted (:func:`.leader_rebalance.partitions_to_rebalance`). At most
``max_rebalance_elections_per_run`` elections per run; a full run continues
``rebalance_continue_delay_ms`` later.
"""

from __future__ import annotations

from typing import Final

from kafkacoord.codecs.models import PartitionValue, Trigger, TriggerKind
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol.controller_api import (
    ElectLeaders,
    PartitionResult,
    PartitionResults,
)

from .batch import Batch
from .config import ControllerConfig
from .image import TP
from .leader_rebalance import leader_imbalance, partitions_to_rebalance
from .partition_change import partition_change
from .partitions import PartitionManager, existing_partition

__all__ = ["REBALANCE_TIMER", "LeadershipManager"]

REBALANCE_TIMER: Final = "leader-rebalance"


class LeadershipManager:
    """``ElectLeaders`` and the periodic auto leader rebalance."""

    def __init__(self, config: ControllerConfig, partitions: PartitionManager) -> None:
        self.config = config
        self.partitions = partitions

    # -- ElectLeaders --------------------------------------------------------------------------

    def elect_leaders(self, batch: Batch, body: ElectLeaders) -> PartitionResults:
        every = body.partitions is None
        keys: list[TP]
        if body.partitions is None:
            keys = [
                (v.topic, v.partition)
                for v in batch.image.all_partitions()
                if not self.partitions.is_deleting(batch, v.topic)
            ]
        else:
            keys = list(dict.fromkeys((ref.topic, ref.partition) for ref in body.partitions))
        results: list[PartitionResult] = []
        for topic, partition in keys:
            try:
                current = existing_partition(batch, topic, partition)
                if body.election_type == "preferred":
                    self._preferred(batch, current)
                else:
                    self._unclean(batch, current)
            except ProtocolError as exc:
                if every and exc.code is ErrorCode.ELECTION_NOT_NEEDED:
                    continue
                results.append(
                    PartitionResult(
                        topic=topic, partition=partition, error=exc.code, message=exc.message
                    )
                )
            else:
                results.append(PartitionResult(topic=topic, partition=partition))
        return PartitionResults(results=results)

    @staticmethod
    def _preferred(batch: Batch, current: PartitionValue) -> None:
        name = f"{current.topic}-{current.partition}"
        if not current.replicas:
            raise ProtocolError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"{name} has no replicas")
        preferred = current.replicas[0]
        if current.leader == preferred:
            raise ProtocolError(
                ErrorCode.ELECTION_NOT_NEEDED,
                f"preferred replica {preferred} already leads {name}",
            )
        change = partition_change(batch, current)
        if not change.elect_preferred(batch.live()):
            raise ProtocolError(
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                f"preferred replica {preferred} of {name} is not live or not in the ISR "
                f"{list(current.isr)}",
            )
        change.put()

    def _unclean(self, batch: Batch, current: PartitionValue) -> None:
        name = f"{current.topic}-{current.partition}"
        if current.leader >= 0:
            raise ProtocolError(
                ErrorCode.ELECTION_NOT_NEEDED, f"{name} has a leader ({current.leader})"
            )
        if not self.partitions.elect_offline(batch, current, batch.live(), unclean=True):
            raise ProtocolError(
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"no replica of {name} is live (replicas {list(current.replicas)})",
            )

    # -- auto leader rebalance -----------------------------------------------------------------

    def rebalance_leaders(self, batch: Batch) -> bool:
        """One rebalance run; ``True`` when it stopped at the cap (more may be needed)."""
        image = batch.image
        assignment: dict[TP, tuple[int, ...]] = {}
        leaders: dict[TP, int | None] = {}
        isr: dict[TP, tuple[int, ...]] = {}
        for value in image.iter_partitions():
            if self.partitions.is_deleting(batch, value.topic):
                continue  # neither counted nor moved
            key = (value.topic, value.partition)
            assignment[key] = value.replicas
            leaders[key] = value.leader if value.leader >= 0 else None
            isr[key] = value.isr
        cap = self.config.max_rebalance_elections_per_run
        chosen = partitions_to_rebalance(
            assignment, leaders, isr, batch.live(),
            threshold_percent=self.config.leader_imbalance_per_broker_percentage,
            in_flight=image.reassigning(), max_partitions=cap,
        )  # fmt: skip
        live = batch.live()
        # Each election's cause: its preferred leader's imbalance (computed only when some
        # election is due: it walks every partition again).
        ratios = leader_imbalance(assignment, leaders) if chosen else {}
        triggers: dict[int, Trigger] = {}
        for topic, partition in chosen:
            current = batch.partition(topic, partition)
            if current is None or not current.replicas:
                continue
            preferred = current.replicas[0]
            trigger = triggers.get(preferred)
            if trigger is None:
                trigger = triggers[preferred] = Trigger(
                    TriggerKind.LEADER_REBALANCE, node_id=preferred,
                    imbalance=ratios.get(preferred),
                )  # fmt: skip
            with batch.because(trigger):
                change = partition_change(batch, current)
                if change.elect_preferred(live):
                    change.put()
        return len(chosen) >= cap
