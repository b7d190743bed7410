"""How kafkacoord's clients reach a secured Kafka: a Kafka client properties file.

The file is the one Kafka's own tools take with ``--command-config`` (Java client
settings), so one file serves ``kafka-topics.sh`` and kafkacoord alike. It is read
for its security settings only (anything else is refused, not silently dropped) and
translated for each kind of client:

- librdkafka (the daemon's consumers, the controller's transactional producer, the
  CLI, node agents and group members): :meth:`KafkaClientConfig.librdkafka`;
- the group shards' batch producer, which speaks Kafka's protocol itself:
  :meth:`KafkaClientConfig.ssl_context` and :attr:`KafkaClientConfig.sasl`;
- Spark's Kafka connector, a Java client: :meth:`KafkaClientConfig.java`.

A :class:`Bootstrap` is a bootstrap string that carries its config. Every client is
built from a bootstrap (:func:`kafkacoord.storage.clients.base_config`), so a client
cannot be built without the credentials of the cluster it is pointed at.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from jproperties import Properties

__all__ = [
    "Bootstrap",
    "KafkaClientConfig",
    "KafkaConfigError",
    "SaslCredentials",
    "client_config_of",
]

PROTOCOLS: Final = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
MECHANISMS: Final = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"})

# Java settings with the same name and meaning in librdkafka.
_SAME: Final = frozenset({
    "ssl.key.password", "ssl.cipher.suites", "sasl.oauthbearer.scope",
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret", "sasl.oauthbearer.extensions",
})  # fmt: skip
# librdkafka's own spellings, accepted as they are.
_LIBRDKAFKA: Final = frozenset({
    "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location", "ssl.certificate.pem",
    "ssl.key.location", "ssl.key.pem", "sasl.mechanisms", "sasl.username", "sasl.password",
    "sasl.oauthbearer.method", "sasl.oauthbearer.config",
    "enable.sasl.oauthbearer.unsecure.jwt", "ssl.keystore.location", "ssl.keystore.password",
})  # fmt: skip
# Read and translated below.
_TRANSLATED: Final = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.jaas.config", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.certificates", "ssl.truststore.password",
    "ssl.keystore.type", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.endpoint.identification.algorithm", "ssl.protocol", "ssl.enabled.protocols",
    "sasl.login.callback.handler.class", "sasl.oauthbearer.token.endpoint.url",
})  # fmt: skip
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')
_JAAS_MODULE = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b")


class KafkaConfigError(ValueError):
    """A client properties file kafkacoord cannot use, with what to change."""


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """A username and password for SASL/PLAIN or SCRAM."""

    mechanism: str
    username: str
    password: str

    def __repr__(self) -> str:  # never a password in a log line
        return f"SaslCredentials({self.mechanism!r}, {self.username!r})"


@dataclass(frozen=True, slots=True)
class KafkaClientConfig:
    """The security settings of a Kafka client properties file (Java spellings)."""

    items: tuple[tuple[str, str], ...]
    source: str = "<settings>"

    @classmethod
    def load(cls, path: Path | str) -> KafkaClientConfig:
        file = Path(path)
        properties = Properties()
        try:
            with file.open("rb") as handle:
                properties.load(handle, "utf-8")
        except OSError as exc:
            raise KafkaConfigError(f"cannot read Kafka client config {file}: {exc}") from exc
        return cls.of({key: value.data for key, value in properties.items()}, source=str(file))

    @classmethod
    def of(cls, settings: Mapping[str, str], *, source: str = "<settings>") -> KafkaClientConfig:
        config = cls(
            tuple(sorted((k.strip(), str(v).strip()) for k, v in settings.items())), source
        )
        config.librdkafka()  # refuse a bad file where it is given, not at the first connection
        return config

    @property
    def settings(self) -> dict[str, str]:
        return dict(self.items)

    @property
    def protocol(self) -> str:
        return self.settings.get("security.protocol", "PLAINTEXT").upper()

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def mechanism(self) -> str | None:
        if not self.protocol.startswith("SASL_"):
            return None
        s = self.settings
        return (s.get("sasl.mechanism") or s.get("sasl.mechanisms") or "GSSAPI").upper()

    def __repr__(self) -> str:
        return f"KafkaClientConfig({self.source}, {self.protocol}, {self.mechanism})"

    def _fail(self, message: str) -> KafkaConfigError:
        return KafkaConfigError(f"{self.source}: {message}")

    # -- librdkafka ----------------------------------------------------------------------

    def librdkafka(self) -> dict[str, str]:
        """The settings for a librdkafka client (confluent_kafka)."""
        s = self.settings
        unknown = sorted(set(s) - _SAME - _LIBRDKAFKA - _TRANSLATED)
        if unknown:
            raise self._fail(
                f"not a security setting kafkacoord takes: {', '.join(unknown)} "
                "(kafkacoord reads only security.*, ssl.* and sasl.* from this file)"
            )
        if self.protocol not in PROTOCOLS:
            raise self._fail(f"security.protocol={self.protocol} is not one of {sorted(PROTOCOLS)}")
        out = {"security.protocol": self.protocol}
        out.update({k: v for k, v in s.items() if k in _SAME or k in _LIBRDKAFKA})
        if self.tls:
            out.update(self._trust(s))
            identity = self._identity(s)
            if identity:  # a Java keystore, translated: not librdkafka's PKCS#12 one
                out.pop("ssl.keystore.location", None)
                out.pop("ssl.keystore.password", None)
            out.update(identity)
            if s.get("ssl.endpoint.identification.algorithm", "https").lower() in ("", "none"):
                out["ssl.endpoint.identification.algorithm"] = "none"
        mechanism = self.mechanism
        if mechanism is not None:
            if mechanism not in MECHANISMS:
                raise self._fail(f"sasl.mechanism={mechanism} is not one of {sorted(MECHANISMS)}")
            out["sasl.mechanisms"] = mechanism
            out.pop("sasl.mechanism", None)
            out.update(self._jaas(mechanism))
        return out

    def _trust(self, s: dict[str, str]) -> dict[str, str]:
        if "ssl.truststore.certificates" in s:
            return {"ssl.ca.pem": s["ssl.truststore.certificates"]}
        location = s.get("ssl.truststore.location")
        if location is None:
            return {}  # the system's CAs, or librdkafka's ssl.ca.location given as is
        kind = s.get("ssl.truststore.type", "JKS").upper()
        if kind != "PEM":
            raise self._fail(
                f"ssl.truststore.type={kind}: kafkacoord's clients read PEM trust stores only; "
                "set ssl.truststore.type=PEM and point ssl.truststore.location at the CA's PEM "
                "file (Kafka's Java clients read PEM too)"
            )
        return {"ssl.ca.location": location}

    def _identity(self, s: dict[str, str]) -> dict[str, str]:
        if "ssl.keystore.key" in s:
            return {"ssl.key.pem": s["ssl.keystore.key"],
                    "ssl.certificate.pem": s.get("ssl.keystore.certificate.chain", "")}  # fmt: skip
        location = s.get("ssl.keystore.location")
        if location is None or ("ssl.keystore.password" in s and "ssl.keystore.type" not in s):
            return {}  # none, or librdkafka's PKCS#12 ssl.keystore.* given as they are
        kind = s.get("ssl.keystore.type", "JKS").upper()
        if kind == "PEM":  # one file with the key and its certificate chain
            return {"ssl.key.location": location, "ssl.certificate.location": location}
        if kind == "PKCS12":
            return {"ssl.keystore.location": location,
                    "ssl.keystore.password": s.get("ssl.keystore.password", "")}  # fmt: skip
        raise self._fail(
            f"ssl.keystore.type={kind}: use PEM (ssl.keystore.type=PEM, or "
            "ssl.keystore.key and ssl.keystore.certificate.chain) or PKCS12"
        )

    def _jaas(self, mechanism: str) -> dict[str, str]:
        s = self.settings
        jaas = s.get("sasl.jaas.config")
        if jaas is None:
            if mechanism != "OAUTHBEARER" and "sasl.username" not in s:
                raise self._fail(f"SASL {mechanism} needs sasl.jaas.config with a username "
                                 "and password")  # fmt: skip
            return {}
        module = _JAAS_MODULE.match(jaas)
        if module is None:
            raise self._fail(
                "sasl.jaas.config must read '<LoginModule> required key=\"value\" ...;'"
            )
        options = {
            m.group(1): (m.group(2) if m.group(2) is not None else m.group(3)).replace('\\"', '"')
            for m in _JAAS_OPTION.finditer(jaas[module.end() :])
        }
        if mechanism == "OAUTHBEARER":
            return self._oauthbearer(options)
        if "username" not in options or "password" not in options:
            raise self._fail(f"sasl.jaas.config for {mechanism} needs username and password")
        return {"sasl.username": options["username"], "sasl.password": options["password"]}

    def _oauthbearer(self, options: dict[str, str]) -> dict[str, str]:
        if "unsecuredLoginStringClaim_sub" in options:  # Kafka's unsecured JWTs, for tests
            subject = options["unsecuredLoginStringClaim_sub"]
            return {"enable.sasl.oauthbearer.unsecure.jwt": "true",
                    "sasl.oauthbearer.config": f"principal={subject}"}  # fmt: skip
        out = {"sasl.oauthbearer.method": "oidc"}
        if "clientId" in options:
            out["sasl.oauthbearer.client.id"] = options["clientId"]
        if "clientSecret" in options:
            out["sasl.oauthbearer.client.secret"] = options["clientSecret"]
        if "scope" in options:
            out["sasl.oauthbearer.scope"] = options["scope"]
        return out

    # -- the batch producer's own connections --------------------------------------------

    @property
    def sasl(self) -> SaslCredentials | None:
        """The username and password of SASL/PLAIN or SCRAM (None without SASL)."""
        mechanism = self.mechanism
        if mechanism is None:
            return None
        config = self.librdkafka()
        if "sasl.username" not in config:
            return None
        return SaslCredentials(mechanism, config["sasl.username"], config.get("sasl.password", ""))

    def ssl_context(self) -> ssl.SSLContext | None:
        """A TLS client context equal to librdkafka's settings (None without TLS)."""
        if not self.tls:
            return None
        config = self.librdkafka()
        context = ssl.create_default_context(
            cafile=config.get("ssl.ca.location"), cadata=config.get("ssl.ca.pem")
        )
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if config.get("ssl.endpoint.identification.algorithm") == "none":
            context.check_hostname = False
        if "ssl.certificate.location" in config:
            context.load_cert_chain(
                config["ssl.certificate.location"],
                config.get("ssl.key.location"),
                config.get("ssl.key.password"),
            )
        elif "ssl.certificate.pem" in config or "ssl.keystore.location" in config:
            raise self._fail(
                "the batch producer reads a client certificate from PEM files only: "
                "use ssl.keystore.type=PEM with ssl.keystore.location"
            )
        return context

    # -- Spark's Kafka connector ---------------------------------------------------------

    def java(self) -> dict[str, str]:
        """The settings as Kafka's Java client takes them (Spark's connector)."""
        return {k: v for k, v in self.items if k not in _LIBRDKAFKA}


class Bootstrap(str):
    """Kafka bootstrap servers that carry the client config which reaches them.

    A plain ``str`` everywhere a bootstrap is passed, so no signature changes; only
    :func:`client_config_of` looks inside. A new string made from it (a slice, an
    f-string) is a plain one again, and a client built from that fails to
    authenticate: loudly, never with weaker settings.
    """

    config: KafkaClientConfig | None

    def __new__(cls, servers: str, config: KafkaClientConfig | None = None) -> Bootstrap:
        self = super().__new__(cls, servers)
        self.config = config
        return self

    def __reduce__(self) -> tuple[type[Bootstrap], tuple[str, KafkaClientConfig | None]]:
        return Bootstrap, (str(self), self.config)


def client_config_of(bootstrap: str) -> KafkaClientConfig | None:
    """The client config ``bootstrap`` carries (None: plaintext, no credentials)."""
    return getattr(bootstrap, "config", None)
