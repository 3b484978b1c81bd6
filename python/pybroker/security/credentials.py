"""SCRAM credentials in the metadata store: /config/users/<user>, one entry per
mechanism in Kafka's stored form (pybroker.security.scram)."""

from __future__ import annotations

from pybroker.security.scram import MECHANISMS, ScramCredential
from pybroker.security.store import SecurityStore, desanitize, sanitize


def user_path(user: str) -> str:
    return "users/" + sanitize(user)


async def lookup(store: SecurityStore, user: str, mechanism: str) -> ScramCredential | None:
    text = (await store.entity_config(user_path(user))).get(mechanism)
    if not text:
        return None
    try:
        return ScramCredential.from_string(text)
    except (KeyError, ValueError):
        return None


async def describe(store: SecurityStore, user: str) -> dict[str, ScramCredential]:
    config = await store.entity_config(user_path(user))
    out = {}
    for mechanism in MECHANISMS:
        if mechanism in config:
            try:
                out[mechanism] = ScramCredential.from_string(config[mechanism])
            except (KeyError, ValueError):
                continue
    return out


async def users(store: SecurityStore) -> list[str]:
    """Every user with a SCRAM credential."""
    out = []
    for name in await store.entities("users"):
        user = desanitize(name)
        if await describe(store, user):
            out.append(user)
    return out


async def alter(store: SecurityStore, user: str, set_: dict[str, ScramCredential],
                delete: list[str]) -> None:
    """Upsert and delete one user's credentials (its other configs, quotas, stay)."""
    path = user_path(user)
    config = await store.entity_config(path)
    for mechanism in delete:
        config.pop(mechanism, None)
    for mechanism, credential in set_.items():
        config[mechanism] = credential.to_string()
    await store.set_entity_config(path, config)
