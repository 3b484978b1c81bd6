"""pybroker: a Kafka-protocol broker."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """`__version__`, read from the package metadata when first asked for:
    importlib.metadata's imports (email, zipfile, csv...) are a good part of a broker's
    start, which never needs the version."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        # kept in one place, the Cargo workspace's version, which maturin writes into the
        # package metadata of every wheel, sdist and editable install
        found = version("pybroker")
    except PackageNotFoundError:  # pragma: no cover - imported from a tree never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found
