"""deploy/compose.yaml's Kafka, run without Docker: the ``kafka`` service's environment,
rendered into broker properties as the ``apache/kafka`` image renders it, starts the
project's Kafka version from its jars, and the ``events-topic`` one-shot's command runs
against it twice (its ``--if-not-exists`` makes a restart harmless).

Only the host name and ports change, so that the broker runs on 127.0.0.1 beside others.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient

from kafkacoord.storage.broker import free_port
from kafkacoord.storage.clients import base_config
from kafkacoord.storage.kafka_broker import KafkaBroker
from kafkacoord.storage.kafka_jars import KAFKA_VERSION, java_binary, kafka_classpath

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
SERVICES: dict[str, dict[str, Any]] = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())[
    "services"
]
# The image's kafka-propertiesSpec.json: KAFKA_* variables that are not broker properties.
# (It lists "KAFKA_HEAP_OPT", so KAFKA_HEAP_OPTS also lands as an unknown, ignored property.)
_NOT_PROPERTIES = {
    "KAFKA_VERSION", "KAFKA_HEAP_OPT", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL",
}  # fmt: skip


def property_name(variable: str) -> str:
    """The image's rule: ``_`` is ``.``, ``__`` is ``_``, ``___`` is ``-``, lower case."""
    dotted = re.sub(r"[^_]_[^_]", lambda m: m.group(0).replace("_", "."), variable)
    return dotted.replace("___", "-").replace("__", "_").lower()


def rendered_properties(environment: Mapping[str, str]) -> dict[str, str]:
    return {
        property_name(key.removeprefix("KAFKA_")): value
        for key, value in environment.items()
        if key.startswith("KAFKA") and key not in _NOT_PROPERTIES
    }


def test_the_image_rule_names_properties_as_kafka_does() -> None:
    assert property_name("LOG_DIRS") == "log.dirs"
    assert property_name("LISTENER_SECURITY_PROTOCOL_MAP") == "listener.security.protocol.map"
    assert property_name("CONFLUENT__SUPPORT___METRICS") == "confluent_support-metrics"


def _localised(properties: Mapping[str, str], ports: Mapping[str, int]) -> dict[str, str]:
    """Every ``kafka:PORT`` and ``://:PORT`` moved to 127.0.0.1 and a free port."""

    def move(value: str) -> str:
        for port, local in ports.items():
            value = re.sub(rf"(kafka|localhost)?:{port}\b", f"127.0.0.1:{local}", value)
        return value

    return {key: move(value) for key, value in properties.items()}


@pytest.fixture(scope="module")
def compose_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    kafka = SERVICES["kafka"]
    assert kafka["image"] == f"apache/kafka:{KAFKA_VERSION}"
    ports = {port: free_port() for port in ("9092", "9093", "9094")}
    properties = _localised(rendered_properties(kafka["environment"]), ports)
    data_dir = tmp_path_factory.mktemp("compose-kafka")
    properties["log.dirs"] = str(data_dir / "logs")
    broker = KafkaBroker(
        data_dir, port=ports["9092"], controller_port=ports["9093"], properties=properties
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def _events_topic_command(bootstrap: str) -> list[str]:
    """The one-shot's ``kafka-topics.sh`` command, run as the script runs it."""
    script, *args = SERVICES["events-topic"]["command"]
    assert script == "/opt/kafka/bin/kafka-topics.sh"
    args = [f"--bootstrap-server={bootstrap}" if a.startswith("--bootstrap") else a for a in args]
    tool = "org.apache.kafka.tools.TopicCommand"
    return [java_binary(), "-Xmx256m", "-cp", kafka_classpath(), tool, *args]


def test_compose_kafka_serves_and_its_one_shot_topic_command_is_idempotent(
    compose_kafka: KafkaBroker,
) -> None:
    for _ in range(2):  # the service restarts on failure: a second run must succeed too
        done = subprocess.run(
            _events_topic_command(compose_kafka.bootstrap),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    # The containers' listener and the Docker host's both serve the topic.
    host = compose_kafka.properties["advertised.listeners"].split("HOST://")[1].split(",")[0]
    for bootstrap in (compose_kafka.bootstrap, host):
        admin = AdminClient(base_config(bootstrap, "compose-kafka-test"))
        topic = admin.list_topics(topic="events", timeout=30).topics["events"]
        assert topic.error is None
        assert len(topic.partitions) == 6
