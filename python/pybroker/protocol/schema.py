"""The declaration language for Kafka messages: ``Field``, ``Array``, ``Struct``, ``Api``.

Every API is declared once, as data, in ``pybroker.protocol.messages``; the codec
(``pybroker.protocol.codec``) compiles a decoder/encoder per (api, version,
direction) from it. Conventions:

* Field names are Kafka's JSON schema names in snake_case (``TopicData`` ->
  ``topic_data``, ``V3AndBelowTopics`` -> ``v3_and_below_topics``).
* Versions are strings as in Kafka's schemas: ``"3+"``, ``"0-7"``, ``"5"``, ``"none"``.
* ``type`` is a primitive name from ``types.py`` (``"int32"``, ``"string"``,
  ``"records"``, ...), ``"[]<primitive>"`` for an array of primitives, ``"[]"``
  for an array of structs (use ``Array``) or ``"{}"`` for a struct (use ``Struct``).
  Compact encodings are chosen by the codec for flexible versions.
* Default: ``default`` if given, else None where the field is nullable in that
  version, else the type's zero ("" / 0 / False / b"" / [] / a dict of defaults).
* ``tag`` makes the field a tagged field in ``tagged_versions`` (default: its
  versions) of flexible versions; it is then omitted from the wire when equal to
  its default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pybroker.protocol.types import FIXED, PRIMITIVES, VARIABLE

MAX_VERSION = 0x7FFF
_MISSING: Any = object()

VersionRange = tuple[int, int] | None


def parse_versions(spec: str | None) -> VersionRange:
    """``"3+"`` -> (3, 32767); ``"0-7"`` -> (0, 7); ``"5"`` -> (5, 5); ``"none"``/None -> None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    return int(spec), int(spec)


def in_range(version: int, versions: VersionRange) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


class Field:
    """One field of a message or of a nested struct."""

    __slots__ = ("name", "type", "versions", "nullable", "explicit_default", "tag",
                 "tagged_versions", "fields")

    def __init__(
        self,
        name: str,
        type: str,
        versions: str,
        *,
        nullable: str | None = None,
        default: Any = _MISSING,
        tag: int | None = None,
        tagged_versions: str | None = None,
        fields: Sequence[Field] = (),
    ) -> None:
        element = type[2:] if type.startswith("[]") else type
        if type in ("[]", "{}"):
            if not fields:
                raise ValueError(f"{name}: struct types need fields")
        elif element not in PRIMITIVES:
            raise ValueError(f"{name}: unknown type {type!r}")
        self.name = name
        self.type = type
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        self.explicit_default = default
        self.tag = tag
        self.tagged_versions = (
            parse_versions(tagged_versions or versions) if tag is not None else None
        )
        self.fields: tuple[Field, ...] = tuple(fields)

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r})"

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def is_struct_array(self) -> bool:
        return self.type == "[]"

    @property
    def is_struct(self) -> bool:
        return self.type == "{}"

    @property
    def element_type(self) -> str:
        """The primitive element type of a primitive array, else the type itself."""
        return self.type[2:] if self.type.startswith("[]") else self.type

    @property
    def has_declared_default(self) -> bool:
        """A ``default=`` was given (else the default is null or the type's zero)."""
        return self.explicit_default is not _MISSING

    def present(self, version: int) -> bool:
        return in_range(version, self.versions)

    def is_nullable(self, version: int) -> bool:
        return in_range(version, self.nullable)

    def is_tagged(self, version: int, flexible: bool) -> bool:
        return flexible and self.tag is not None and in_range(version, self.tagged_versions)

    def default(self, version: int) -> Any:
        """Default value in ``version`` (a fresh object for lists and dicts)."""
        if self.explicit_default is not _MISSING:
            return self.explicit_default
        if self.is_nullable(version):
            return None
        if self.is_array:
            return []
        if self.is_struct:
            return {f.name: f.default(version) for f in self.fields}
        if self.type in FIXED:
            return FIXED[self.type].zero
        return VARIABLE[self.type]


def Array(name: str, versions: str, fields: Sequence[Field], **kw: Any) -> Field:  # noqa: N802
    """An array of structs whose element has ``fields``."""
    return Field(name, "[]", versions, fields=fields, **kw)


def Struct(name: str, versions: str, fields: Sequence[Field], **kw: Any) -> Field:  # noqa: N802
    """A single nested struct."""
    return Field(name, "{}", versions, fields=fields, **kw)


class Api:
    """An API: key, name, supported version range, flexible versions, request and response."""

    def __init__(
        self,
        *,
        key: int,
        name: str,
        valid_versions: tuple[int, int],
        flexible_versions: str | None,
        request: Sequence[Field],
        response: Sequence[Field],
    ) -> None:
        self.key = key
        self.name = name
        self.min_version, self.max_version = valid_versions
        self.flexible_versions = parse_versions(flexible_versions)
        self.request: tuple[Field, ...] = tuple(request)
        self.response: tuple[Field, ...] = tuple(response)
        self._check(self.request)
        self._check(self.response)

    def __repr__(self) -> str:
        return f"Api({self.key}, {self.name!r}, {self.min_version}-{self.max_version})"

    def is_flexible(self, version: int) -> bool:
        return in_range(version, self.flexible_versions)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def request_header_version(self, version: int) -> int:
        """1 (client id) for classic versions, 2 (+ tagged fields) for flexible ones."""
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """0 (correlation id) or 1 (+ tagged fields); ApiVersions always answers with 0."""
        if self.key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0

    def _check(self, fields: Sequence[Field]) -> None:
        names = set()
        tags = set()
        for f in fields:
            if f.name in names:
                raise ValueError(f"{self.name}: duplicate field {f.name}")
            names.add(f.name)
            if f.tag is not None:
                if f.tag in tags:
                    raise ValueError(f"{self.name}: duplicate tag {f.tag}")
                tags.add(f.tag)
            if f.fields:
                self._check(f.fields)
