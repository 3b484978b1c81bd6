"""Kafka's Java client security properties (what a `--command-config
client.properties` holds) turned into confluent-kafka / librdkafka's.

  sasl.jaas.config=...PlainLoginModule|ScramLoginModule required username="u" password="p";
      -> sasl.username / sasl.password
  ssl.truststore.location (PEM)        -> ssl.ca.location
  ssl.keystore.location (PEM: key and chain in one file) -> ssl.certificate.location and
                                          ssl.key.location; ssl.key.password stays
  ssl.keystore.location (PKCS12)       -> ssl.keystore.location (+ ssl.keystore.password)
  ssl.endpoint.identification.algorithm="" -> none
security.protocol and sasl.mechanism have the same names in both."""

from __future__ import annotations

from pybroker.security.sasl import jaas_options

#: Java-only keys dropped once mapped (librdkafka would refuse them)
_DROPPED = ("sasl.jaas.config", "ssl.truststore.type", "ssl.truststore.password",
            "ssl.keystore.type", "ssl.truststore.location", "ssl.login.callback.handler.class",
            "sasl.login.callback.handler.class", "sasl.client.callback.handler.class")


def to_librdkafka(props: dict[str, str]) -> dict[str, str]:
    out = dict(props)
    jaas = out.get("sasl.jaas.config")
    if jaas:
        options = jaas_options(jaas)
        if "username" in options:
            out.setdefault("sasl.username", options["username"])
        if "password" in options:
            out.setdefault("sasl.password", options["password"])
    truststore = out.get("ssl.truststore.location")
    if truststore and out.get("ssl.truststore.type", "PEM").upper() == "PEM":
        out.setdefault("ssl.ca.location", truststore)
    keystore_type = out.get("ssl.keystore.type", "JKS").upper()
    if out.get("ssl.keystore.location") and keystore_type == "PEM":
        location = out.pop("ssl.keystore.location")
        out.setdefault("ssl.certificate.location", location)
        out.setdefault("ssl.key.location", location)
    if out.get("ssl.endpoint.identification.algorithm", None) == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    for key in _DROPPED:
        out.pop(key, None)
    return out
