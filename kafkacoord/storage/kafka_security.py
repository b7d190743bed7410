"""What makes the embedded Kafka broker a secured one (``KafkaBroker(secure=True)``).

The client listener is SASL_SSL (SCRAM-SHA-512 and SCRAM-SHA-256) with a certificate for
127.0.0.1 and localhost signed by a CA made in the data dir; Kafka's StandardAuthorizer
denies what no ACL allows. Inter-broker traffic (the transaction coordinator's markers, a
single node's only inter-broker requests) uses the same listener as the ``admin`` super
user. The KRaft controller listener is on loopback with mutual TLS: the broker registers
with its controller there and needs ClusterAction, which a PLAINTEXT listener could only
give to ``User:ANONYMOUS``, making every local process a super user. The server's own
certificate is the only one the CA signs (its key is not kept), so its subject is the
controller listener's one principal.

Three SCRAM users get random passwords when the log dir is formatted: ``admin`` (the
super user), ``kafkacoord`` (kafkacoord's principal) and ``user`` (an ordinary client).
The passwords are kept in ``scram-users.json`` (mode 0600) for later starts; each user
also gets a Kafka client properties file, ``client-<user>.properties``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import EmbeddedBrokerError
from .kafka_certs import write_private, write_server_pki
from .kafka_config import KafkaClientConfig

ADMIN = "admin"
KAFKACOORD = "kafkacoord"
USER = "user"
USERS = (ADMIN, KAFKACOORD, USER)
MECHANISM = "SCRAM-SHA-512"  # what clients and inter-broker traffic use
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
LISTENER = "SASL_SSL"
BROKER_CN = "kafkacoord-embedded-kafka"  # the server certificate's subject
USERS_FILE = "scram-users.json"
CA_FILE = "ca.pem"
KEYSTORE_FILE = "server-keystore.pem"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_SCRAM_SERVER_ONLY = f"{_SCRAM_MODULE} required;"


def properties_file(user: str) -> str:
    return f"client-{user}.properties"


@dataclass(frozen=True)
class KafkaSecurity:
    """The users, passwords and PEM files of a secured broker's data dir."""

    data_dir: Path
    passwords: Mapping[str, str]

    @classmethod
    def load(cls, data_dir: Path) -> KafkaSecurity | None:
        """The security a data dir was formatted with; None if it was formatted without."""
        try:
            raw = json.loads((data_dir / USERS_FILE).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise EmbeddedBrokerError(f"cannot read {data_dir / USERS_FILE}: {exc}") from exc
        return cls(data_dir, {user: str(raw[user]) for user in USERS})

    @classmethod
    def create(cls, data_dir: Path) -> KafkaSecurity:
        """New random passwords and a new CA and server certificate, before formatting."""
        passwords = {user: secrets.token_hex(24) for user in USERS}
        write_server_pki(data_dir / CA_FILE, data_dir / KEYSTORE_FILE, BROKER_CN)
        write_private(data_dir / USERS_FILE, json.dumps(passwords, indent=2).encode())
        return cls(data_dir, passwords)

    @property
    def ca_path(self) -> Path:
        return self.data_dir / CA_FILE

    def format_args(self) -> list[str]:
        """``kafka-storage format`` arguments creating every user under both mechanisms."""
        return [
            arg
            for user in USERS
            for mechanism in MECHANISMS
            for arg in ("--add-scram", f"{mechanism}=[name={user},password={self.passwords[user]}]")
        ]

    def server_properties(self, bootstrap: str, controller: str) -> dict[str, str]:
        """The broker settings that differ from the plaintext broker's."""
        listener = LISTENER.lower()
        return {
            "listeners": f"{LISTENER}://{bootstrap},CONTROLLER://{controller}",
            "advertised.listeners": f"{LISTENER}://{bootstrap}",
            "inter.broker.listener.name": LISTENER,
            "listener.security.protocol.map": f"{LISTENER}:SASL_SSL,CONTROLLER:SSL",
            "listener.name.controller.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            # Server side of both mechanisms; the SHA-512 one also logs the broker in as admin.
            f"listener.name.{listener}.scram-sha-512.sasl.jaas.config": self.jaas(ADMIN),
            f"listener.name.{listener}.scram-sha-256.sasl.jaas.config": _SCRAM_SERVER_ONLY,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.data_dir / KEYSTORE_FILE),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_path),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{ADMIN};User:CN={BROKER_CN}",
            "allow.everyone.if.no.acl.found": "false",
        }

    def jaas(self, user: str) -> str:
        return f'{_SCRAM_MODULE} required username="{user}" password="{self.passwords[user]}";'

    def client_settings(self, user: str) -> dict[str, str]:
        """Kafka client settings (Java spellings) for ``user``."""
        return {
            "security.protocol": LISTENER,
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": self.jaas(user),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_path),
        }

    def client_properties(self, user: str) -> str:
        """A Kafka client properties file for ``user`` (``--command-config``)."""
        return "".join(f"{key}={value}\n" for key, value in self.client_settings(user).items())

    def client_config(self, user: str) -> KafkaClientConfig:
        """The same settings as every kafkacoord client reads them."""
        source = str(self.data_dir / properties_file(user))
        return KafkaClientConfig.of(self.client_settings(user), source=source)

    def write_client_properties(self) -> dict[str, Path]:
        """``client-<user>.properties`` for every user (mode 0600: they hold passwords)."""
        paths = {user: self.data_dir / properties_file(user) for user in USERS}
        for user, path in paths.items():
            write_private(path, self.client_properties(user).encode())
        return paths
