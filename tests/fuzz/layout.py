"""Where the structure of a valid request frame is: lengths, counts, tagged sections, ints.

A small interpreter of the declarations, written apart from the compiled codec so
that the mutations it guides do not share the codec's assumptions. It walks a frame
the project's encoder produced (no size prefix) and lists its ``Slot``s:

* ``len16`` / ``len32``: a classic string length or bytes/records/array length/count
  (-1 = null), ``width`` 2 or 4;
* ``ulen``: a compact (flexible) length: unsigned varint of length + 1, 0 = null;
* ``tags``: the count varint opening a tagged-field section;
* ``int``: a fixed-width integer field (``type`` is its primitive name);
* ``records``: the bytes of a records field (after its length; ``type`` is the
  length's kind), where record batches live;
* ``api_key`` / ``api_version``: the header's first two int16s.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pybroker.protocol import APIS, Field
from pybroker.protocol.types import FIXED, read_uvarint

INT_TYPES = ("int8", "int16", "uint16", "int32", "uint32", "int64")
LENGTH_KINDS = ("len16", "len32", "ulen")


@dataclass(frozen=True)
class Slot:
    kind: str
    offset: int
    width: int
    type: str = ""


class LayoutError(Exception):
    """The frame does not follow its declaration (a bug in the encoder or here)."""


class _Walker:
    def __init__(self, frame: bytes, version: int, flexible: bool) -> None:
        self.buf = frame
        self.version = version
        self.flexible = flexible
        self.pos = 0
        self.slots: list[Slot] = []

    def _int(self, fmt: str, size: int, kind: str = "", typ: str = "") -> int:
        if kind:
            self.slots.append(Slot(kind, self.pos, size, typ))
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return int(value)

    def _uvarint(self, kind: str = "") -> int:
        start = self.pos
        value, self.pos = read_uvarint(self.buf, self.pos)
        if kind:
            self.slots.append(Slot(kind, start, self.pos - start))
        return value

    def length(self, wide: bool) -> int:
        """A length or count in this version's form; -1 for null."""
        if self.flexible:
            return self._uvarint("ulen") - 1
        if wide:
            return self._int(">i", 4, "len32")
        return self._int(">h", 2, "len16")

    def header(self, flexible: bool) -> None:
        self._int(">h", 2, "api_key")
        self._int(">h", 2, "api_version")
        self.pos += 4  # correlation id
        n = self._int(">h", 2, "len16")  # client id: always int16-length
        self.pos += max(n, 0)
        if flexible:
            self.tags(())

    def fields(self, fields: tuple[Field, ...]) -> None:
        tagged = []
        for f in fields:
            if not f.present(self.version):
                continue
            if f.is_tagged(self.version, self.flexible):
                tagged.append(f)
            else:
                self.field(f)
        if self.flexible:
            self.tags(tagged)

    def tags(self, tagged: list[Field] | tuple[Field, ...]) -> None:
        by_tag = {f.tag: f for f in tagged}
        count = self._uvarint("tags")
        for _ in range(count):
            tag = self._uvarint()
            size = self._uvarint()
            end = self.pos + size
            f = by_tag.get(tag)
            if f is not None:
                self.field(f)
            self.pos = end

    def field(self, f: Field) -> None:
        if f.is_struct:
            # Kafka's nullable struct: an int8 marker first, -1 null, 1 present
            if f.is_nullable(self.version) and self._int(">b", 1) < 0:
                return
            self.fields(f.fields)
            return
        if f.is_array:
            n = self.length(True)
            for _ in range(max(n, 0)):
                if f.is_struct_array:
                    self.fields(f.fields)
                else:
                    self.primitive(f.element_type)
            return
        self.primitive(f.type)

    def primitive(self, typ: str) -> None:
        if typ in FIXED:
            fixed = FIXED[typ]
            if typ in INT_TYPES:
                self.slots.append(Slot("int", self.pos, fixed.size, typ))
            self.pos += fixed.size
        elif typ in ("varint", "varlong", "uvarint"):
            self._uvarint()
        else:
            n = self.length(typ != "string")
            if typ == "records" and n > 0:
                self.slots.append(Slot("records", self.pos, n, self.slots[-1].kind))
            self.pos += max(n, 0)


def layout(frame: bytes) -> list[Slot]:
    """The slots of a valid request frame (without its size prefix), in frame order."""
    api_key, version = struct.unpack_from(">hh", frame)
    api = APIS[api_key]
    flexible = api.is_flexible(version)
    walker = _Walker(frame, version, flexible)
    if len(frame) == 8 and api_key == 18 and version == 0:
        return [Slot("api_key", 0, 2), Slot("api_version", 2, 2)]  # header v0, no client id
    walker.header(flexible)
    walker.fields(api.request)
    if walker.pos != len(frame):
        raise LayoutError(f"{api.name} v{version}: walked {walker.pos} of {len(frame)} bytes")
    return walker.slots
