"""pybroker: a Kafka-protocol broker."""

from importlib.metadata import PackageNotFoundError, version

try:
    # kept in one place, the Cargo workspace's version, which maturin writes into the
    # package metadata of every wheel, sdist and editable install
    __version__ = version("pybroker")
except PackageNotFoundError:  # pragma: no cover - imported from a tree never installed
    __version__ = "0+unknown"
