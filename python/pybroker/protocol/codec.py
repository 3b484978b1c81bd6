"""Compiles message declarations into straight-line decoder/encoder functions.

For each (field list, version, flexible) the compiler writes Python source with
no schema interpretation left in it: runs of fixed-width fields become one
precompiled ``struct.Struct`` call, strings are sliced from the buffer, arrays
check their count against the remaining bytes before allocating, records come
out as ``memoryview`` slices of the request (no copy). The source is ``exec``-ed
once and cached by the caller (``pybroker.protocol.frame``).

Decoder: ``decode(buf: memoryview, pos: int) -> (dict, pos)``; raises struct.error,
IndexError, ValueError or MalformedRequestError on bad input (the frame layer
maps all of them to MalformedRequestError).

Encoder: ``encode(out: bytearray, body: dict, parts: list) -> bytearray``. It
appends to ``out``; a records object that is not bytes-like (a file slice with
``.length``) is written as a length prefix, then ``out`` and the object are
appended to ``parts`` and a fresh bytearray is returned to continue with.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from pybroker.protocol.errors import MalformedRequestError
from pybroker.protocol.schema import Field
from pybroker.protocol.types import (
    FIXED,
    INT16,
    ZERO_UUID,
    INT32,
    read_uvarint,
    read_varint,
    uvarint_bytes,
    varint_bytes,
)

Decoder = Callable[[memoryview, int], tuple[dict[str, Any], int]]


class PreEncoded(bytes):
    """One element of a struct array, already encoded for the response's api version
    (struct_element_encoder): the encoder appends its bytes as they are. For parts of
    a response that rarely change and are sent often (Metadata's per-topic entries).
    `value` is the element it encodes; element["field"] reads it, so code that filters
    a response's elements (the authorizer's merge) works on either form."""

    value: dict[str, Any]

    def __new__(cls, data: bytes, value: dict[str, Any]) -> PreEncoded:
        obj = super().__new__(cls, data)
        obj.value = value
        return obj

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return self.value[key]
        return super().__getitem__(key)


Encoder = Callable[[bytearray, dict[str, Any], list[Any]], bytearray]

_BYTES_LIKE = (bytes, bytearray, memoryview)


def _lit(value: Any) -> str:
    """``value`` as generated source (the uuid default as a shared constant: a UUID's
    repr would be parsed again on every call)."""
    return "_ZERO_UUID" if value == ZERO_UUID else repr(value)


def _encode_records_len(value: Any) -> int:
    if isinstance(value, memoryview):
        return value.nbytes
    return len(value)


#: decoded topic ids, by their 16 bytes: every Fetch v13+ names its topics by id, and
#: uuid.UUID's constructor (pure Python, with its checks) was a visible part of decoding
#: one (issue 26). Bounded: emptied when full, so ids a client makes up cost no memory
_UUIDS: dict[bytes, uuid.UUID] = {}
_UUIDS_MAX = 4096


def uuid_of(raw: bytes) -> uuid.UUID:
    """The UUID of 16 bytes (a shared, immutable instance)."""
    found = _UUIDS.get(raw)
    if found is None:
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
        found = _UUIDS[raw] = uuid.UUID(bytes=raw)
    return found


class _Compiler:
    """Accumulates generated functions and their constants in one namespace."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {
            "_Mal": MalformedRequestError,
            "_I16": INT16,
            "_I32": INT32,
            "_uv": read_uvarint,
            "_vi": read_varint,
            "_uvb": uvarint_bytes,
            "_vib": varint_bytes,
            "_unpack_from": struct.unpack_from,
            "_pack": struct.pack,
            "_BL": _BYTES_LIKE,
            "_PRE": PreEncoded,
            "_rlen": _encode_records_len,
            "_UUID": uuid.UUID,
            "_uuid": uuid_of,
            "_ZERO_UUID": ZERO_UUID,
        }
        self.src: list[str] = []
        self.count = 0
        self.memo: dict[tuple[int, int, bool, str], str] = {}

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value: Any, prefix: str = "_k") -> str:
        name = self.fresh(prefix)
        self.ns[name] = value
        return name

    def finish(self, name: str) -> Any:
        code = "\n".join(self.src)
        exec(compile(code, f"<pybroker.protocol {name}>", "exec"), self.ns)  # noqa: S102
        return self.ns[name]

    # ---------------------------------------------------------------- sizes

    def min_size(self, f: Field, version: int, flexible: bool) -> int:
        """Smallest wire size of one value of ``f`` (used to bound array counts)."""
        if f.is_struct_array or f.is_array:
            return 1 if flexible else 4
        if f.is_struct:
            if f.is_nullable(version):
                return 1  # the null marker
            return self.struct_min_size(f.fields, version, flexible)
        return self.type_min_size(f.type, flexible)

    def type_min_size(self, typ: str, flexible: bool) -> int:
        if typ in FIXED:
            return FIXED[typ].size
        if typ == "string":
            return 1 if flexible else 2
        if typ in ("bytes", "records"):
            return 1 if flexible else 4
        return 1  # varints

    def struct_min_size(self, fields: Sequence[Field], version: int, flexible: bool) -> int:
        size = 1 if flexible else 0
        for f in fields:
            if f.present(version) and not f.is_tagged(version, flexible):
                size += self.min_size(f, version, flexible)
        return size

    # ---------------------------------------------------------------- decoding

    def decoder(self, fields: Sequence[Field], version: int, flexible: bool) -> str:
        key = (id(fields), version, flexible, "d")
        if key in self.memo:
            return self.memo[key]
        fn = self.fresh("_d")
        self.memo[key] = fn
        body: list[str] = []
        values: list[tuple[str, str]] = []
        run: list[tuple[Field, str]] = []
        tagged: list[tuple[Field, str]] = []

        def flush() -> None:
            if not run:
                return
            fmt = ">" + "".join(FIXED[f.type].code for f, _ in run)
            s = self.const(struct.Struct(fmt), "_S")
            names = ", ".join(v for _, v in run) + ("," if len(run) == 1 else "")
            body.append(f"{names} = {s}.unpack_from(buf, pos)")
            body.append(f"pos += {struct.calcsize(fmt)}")
            run.clear()

        for f in fields:
            if not f.present(version):
                values.append((f.name, _lit(f.default(version))))
                continue
            var = self.fresh("v")
            values.append((f.name, var))
            if f.is_tagged(version, flexible):
                tagged.append((f, var))
            elif f.type in FIXED and f.type != "uuid":
                run.append((f, var))
            else:
                flush()
                self.dec_field(body, "", f, version, flexible, var)
        flush()
        if flexible:
            self.dec_tagged(body, tagged, version)
        ret = ", ".join(f"{name!r}: {expr}" for name, expr in values)
        body.append(f"return {{{ret}}}, pos")
        self.src.append(f"def {fn}(buf, pos, end):")
        self.src.extend("    " + line for line in body)
        self.src.append("")
        return fn

    def dec_tagged(self, body: list[str], tagged: list[tuple[Field, str]], version: int) -> None:
        for f, var in tagged:
            body.append(f"{var} = {_lit(f.default(version))}")
        # the count of tagged fields is nearly always 0 (one byte): read inline, as the
        # compact lengths are, the varint call only for a count over 127
        body.append("nt = buf[pos]")
        body.append("pos += 1")
        body.append("if nt & 128: nt, pos = _uv(buf, pos - 1)")
        if not tagged:
            body.append("for _ in range(nt):")
            body.append("    _t, pos = _uv(buf, pos)")
            body.append("    sz, pos = _uv(buf, pos)")
            body.append("    pos += sz")
            body.append("if pos > end: raise _Mal('tagged field past end')")
            return
        body.append("for _ in range(nt):")
        body.append("    tag, pos = _uv(buf, pos)")
        body.append("    sz, pos = _uv(buf, pos)")
        body.append("    te = pos + sz")
        body.append("    if te > end: raise _Mal('tagged field past end')")
        kw = "if"
        for f, var in sorted(tagged, key=lambda t: t[0].tag or 0):
            body.append(f"    {kw} tag == {f.tag}:")
            self.dec_field(body, "        ", f, version, True, var)
            kw = "elif"
        body.append("    pos = te")

    def dec_len(self, body: list[str], ind: str, wide: bool, flexible: bool, n: str) -> None:
        """Read a length/count into ``n``: -1 means null (compact lengths are shifted)."""
        if flexible:
            body.append(f"{ind}{n} = buf[pos]")
            body.append(f"{ind}pos += 1")
            body.append(f"{ind}if {n} & 128: {n}, pos = _uv(buf, pos - 1)")
            body.append(f"{ind}{n} -= 1")
        else:
            body.append(f"{ind}{n}, = {'_I32' if wide else '_I16'}.unpack_from(buf, pos)")
            body.append(f"{ind}pos += {4 if wide else 2}")

    def dec_null(self, body: list[str], ind: str, nullable: bool, var: str, n: str) -> str:
        """Emit the null branch; returns the indent of the non-null branch."""
        body.append(f"{ind}if {n} < 0:")
        if nullable:
            body.append(f"{ind}    {var} = None")
        else:
            body.append(f"{ind}    raise _Mal('null in a non-nullable field')")
        body.append(f"{ind}else:")
        return ind + "    "

    def dec_field(
        self, body: list[str], ind: str, f: Field, version: int, flexible: bool, var: str
    ) -> None:
        nullable = f.is_nullable(version)
        if f.is_struct:
            fn = self.decoder(f.fields, version, flexible)
            if nullable:  # Kafka's nullable struct: an int8 marker, -1 null, 1 present
                body.append(f"{ind}if pos >= end: raise _Mal('truncated')")
                body.append(f"{ind}if buf[pos] == 0xFF:")
                body.append(f"{ind}    {var} = None")
                body.append(f"{ind}    pos += 1")
                body.append(f"{ind}else:")
                body.append(f"{ind}    {var}, pos = {fn}(buf, pos + 1, end)")
                return
            body.append(f"{ind}{var}, pos = {fn}(buf, pos, end)")
            return
        if not f.is_array:
            self.dec_prim(body, ind, f.type, nullable, flexible, var)
            return
        n = self.fresh("n")
        self.dec_len(body, ind, True, flexible, n)
        ind2 = self.dec_null(body, ind, nullable, var, n)
        if f.is_struct_array:
            msize = self.struct_min_size(f.fields, version, flexible)
        else:
            msize = self.type_min_size(f.element_type, flexible)
        body.append(f"{ind2}if {n} * {max(msize, 1)} > end - pos: raise _Mal('array too long')")
        elem = f.element_type
        if not f.is_struct_array and elem in FIXED and elem != "uuid":
            code, size = FIXED[elem].code, FIXED[elem].size
            body.append(f"{ind2}{var} = list(_unpack_from('>%d{code}' % {n}, buf, pos))")
            body.append(f"{ind2}pos += {n} * {size}")
            return
        x = self.fresh("x")
        body.append(f"{ind2}{var} = []")
        body.append(f"{ind2}for _ in range({n}):")
        if f.is_struct_array:
            fn = self.decoder(f.fields, version, flexible)
            body.append(f"{ind2}    {x}, pos = {fn}(buf, pos, end)")
        else:
            self.dec_prim(body, ind2 + "    ", elem, False, flexible, x)
        body.append(f"{ind2}    {var}.append({x})")

    def dec_prim(
        self, body: list[str], ind: str, typ: str, nullable: bool, flexible: bool, var: str
    ) -> None:
        if typ == "uuid":  # a uuid.UUID, the one type of ids past the codec
            body.append(f"{ind}if pos + 16 > end: raise _Mal('uuid past end of frame')")
            body.append(f"{ind}{var} = _uuid(bytes(buf[pos:pos + 16]))")
            body.append(f"{ind}pos += 16")
            return
        if typ in FIXED:
            s = self.const(struct.Struct(">" + FIXED[typ].code), "_S")
            body.append(f"{ind}{var}, = {s}.unpack_from(buf, pos)")
            body.append(f"{ind}pos += {FIXED[typ].size}")
            return
        if typ in ("uvarint", "varint", "varlong"):
            fn = "_uv" if typ == "uvarint" else "_vi"
            body.append(f"{ind}{var}, pos = {fn}(buf, pos)")
            return
        n = self.fresh("n")
        self.dec_len(body, ind, typ != "string", flexible, n)
        ind2 = self.dec_null(body, ind, nullable, var, n)
        body.append(f"{ind2}e = pos + {n}")
        body.append(f"{ind2}if e > end: raise _Mal('{typ} past end of frame')")
        if typ == "string":
            body.append(f"{ind2}{var} = str(buf[pos:e], 'utf-8')")
        elif typ == "bytes":
            body.append(f"{ind2}{var} = bytes(buf[pos:e])")
        else:  # records: zero-copy slice of the request buffer
            body.append(f"{ind2}{var} = buf[pos:e]")
        body.append(f"{ind2}pos = e")

    # ---------------------------------------------------------------- encoding

    def encoder(self, fields: Sequence[Field], version: int, flexible: bool) -> str:
        key = (id(fields), version, flexible, "e")
        if key in self.memo:
            return self.memo[key]
        fn = self.fresh("_e")
        self.memo[key] = fn
        body: list[str] = ["g = d.get"]
        run: list[Field] = []
        tagged: list[Field] = []

        def flush() -> None:
            if not run:
                return
            fmt = ">" + "".join(FIXED[f.type].code for f in run)
            s = self.const(struct.Struct(fmt), "_S")
            args = ", ".join(f"g({f.name!r}, {_lit(f.default(version))})" for f in run)
            body.append(f"out += {s}.pack({args})")
            run.clear()

        for f in fields:
            if not f.present(version):
                continue
            if f.is_tagged(version, flexible):
                tagged.append(f)
            elif f.type in FIXED and f.type != "uuid":
                run.append(f)
            else:
                flush()
                v = self.fresh("v")
                dflt = f.default(version)
                # encode-side defaults: no fresh list/dict per call ([] -> (), {} -> None)
                expr = "()" if dflt == [] else "None" if isinstance(dflt, dict) else _lit(dflt)
                body.append(f"{v} = g({f.name!r}, {expr})")
                self.enc_field(body, "", f, version, flexible, v, "out")
        flush()
        if flexible:
            self.enc_tagged(body, tagged, version)
        body.append("return out")
        self.src.append(f"def {fn}(out, d, parts):")
        self.src.extend("    " + line for line in body)
        self.src.append("")
        return fn

    def enc_tagged(self, body: list[str], tagged: list[Field], version: int) -> None:
        if not tagged:
            body.append("out.append(0)")
            return
        body.append("tg = []")
        for f in sorted(tagged, key=lambda t: t.tag or 0):
            if f.type == "records":
                raise ValueError("records cannot be a tagged field")
            v = self.fresh("v")
            dflt = f.default(version)
            body.append(f"{v} = g({f.name!r}, {_lit(dflt)})")
            if dflt is None:
                body.append(f"if {v} is not None:")
            else:
                body.append(f"if {v} is not None and {v} != {_lit(dflt)}:")
            t = self.fresh("t")
            body.append(f"    {t} = bytearray()")
            self.enc_field(body, "    ", f, version, True, v, t)
            body.append(f"    tg.append(({f.tag}, {t}))")
        # none to send (nearly always): the count 0 without the varint call
        body.append("if not tg: out.append(0)")
        body.append("else:")
        body.append("    out += _uvb(len(tg))")
        body.append("    for tag, t in tg:")
        body.append("        out += _uvb(tag)")
        body.append("        out += _uvb(len(t))")
        body.append("        out += t")

    def enc_len(
        self, body: list[str], ind: str, wide: bool, flexible: bool, n: str, o: str
    ) -> None:
        """Write length ``n`` (not null) in classic or compact form."""
        if flexible:
            body.append(f"{ind}if {n} < 127: {o}.append({n} + 1)")
            body.append(f"{ind}else: {o} += _uvb({n} + 1)")
        else:
            body.append(f"{ind}{o} += {'_I32' if wide else '_I16'}.pack({n})")

    def enc_null(self, body: list[str], ind: str, wide: bool, flexible: bool, null: bool,
                 o: str) -> None:
        """Write a null (or, for non-nullable fields, an empty) length."""
        if flexible:
            body.append(f"{ind}{o}.append({0 if null else 1})")
        else:
            raw = (b"\xff" if null else b"\x00") * (4 if wide else 2)
            body.append(f"{ind}{o} += {raw!r}")

    def enc_field(
        self, body: list[str], ind: str, f: Field, version: int, flexible: bool, v: str, o: str
    ) -> None:
        nullable = f.is_nullable(version)
        if f.is_struct:
            fn = self.encoder(f.fields, version, flexible)
            if nullable:  # Kafka's nullable struct: an int8 marker, -1 null, 1 present
                body.append(f"{ind}if {v} is None:")
                body.append(f"{ind}    {o}.append(0xFF)")
                body.append(f"{ind}else:")
                body.append(f"{ind}    {o}.append(1)")
                body.append(f"{ind}    {o} = {fn}({o}, {v}, parts)")
                return
            body.append(f"{ind}{o} = {fn}({o}, {v} if {v} is not None else {{}}, parts)")
            return
        if not f.is_array:
            self.enc_prim(body, ind, f.type, nullable, flexible, v, o)
            return
        body.append(f"{ind}if {v} is None:")
        self.enc_null(body, ind + "    ", True, flexible, nullable, o)
        body.append(f"{ind}else:")
        ind2 = ind + "    "
        n = self.fresh("n")
        body.append(f"{ind2}{n} = len({v})")
        self.enc_len(body, ind2, True, flexible, n, o)
        elem = f.element_type
        x = self.fresh("x")
        if f.is_struct_array:
            fn = self.encoder(f.fields, version, flexible)
            body.append(f"{ind2}for {x} in {v}:")
            body.append(f"{ind2}    if {x}.__class__ is _PRE: {o} += {x}")
            body.append(f"{ind2}    else: {o} = {fn}({o}, {x}, parts)")
        elif elem in FIXED and elem != "uuid":
            body.append(f"{ind2}{o} += _pack('>%d{FIXED[elem].code}' % {n}, *{v})")
        else:
            body.append(f"{ind2}for {x} in {v}:")
            self.enc_prim(body, ind2 + "    ", elem, False, flexible, x, o)

    def enc_prim(
        self, body: list[str], ind: str, typ: str, nullable: bool, flexible: bool, v: str, o: str
    ) -> None:
        if typ == "uuid":  # a uuid.UUID only: raw bytes here would be a caller's bug
            body.append(f"{ind}{o} += {v}.bytes")
            return
        if typ in FIXED:
            s = self.const(struct.Struct(">" + FIXED[typ].code), "_S")
            body.append(f"{ind}{o} += {s}.pack({v})")
            return
        if typ in ("uvarint", "varint", "varlong"):
            body.append(f"{ind}{o} += {'_uvb' if typ == 'uvarint' else '_vib'}({v})")
            return
        wide = typ != "string"
        body.append(f"{ind}if {v} is None:")
        self.enc_null(body, ind + "    ", wide, flexible, nullable, o)
        n = self.fresh("n")
        if typ == "string":
            b = self.fresh("b")
            body.append(f"{ind}else:")
            body.append(f"{ind}    {b} = {v}.encode()")
            body.append(f"{ind}    {n} = len({b})")
            self.enc_len(body, ind + "    ", False, flexible, n, o)
            body.append(f"{ind}    {o} += {b}")
        elif typ == "bytes":
            body.append(f"{ind}else:")
            body.append(f"{ind}    {n} = len({v})")
            self.enc_len(body, ind + "    ", True, flexible, n, o)
            body.append(f"{ind}    {o} += {v}")
        else:  # records
            body.append(f"{ind}elif isinstance({v}, _BL):")
            body.append(f"{ind}    {n} = _rlen({v})")
            self.enc_len(body, ind + "    ", True, flexible, n, o)
            body.append(f"{ind}    {o} += {v}")
            body.append(f"{ind}else:")
            body.append(f"{ind}    {n} = {v}.length")
            self.enc_len(body, ind + "    ", True, flexible, n, o)
            body.append(f"{ind}    parts.append({o})")
            body.append(f"{ind}    parts.append({v})")
            body.append(f"{ind}    {o} = bytearray()")


def compile_decoder(fields: Sequence[Field], version: int, flexible: bool) -> Decoder:
    """A function ``(buf, pos) -> (dict, pos)`` for ``fields`` at ``version``."""
    c = _Compiler()
    top = c.decoder(tuple(fields), version, flexible)
    c.src.append("def decode(buf, pos):")
    c.src.append(f"    return {top}(buf, pos, len(buf))")
    return c.finish("decode")  # type: ignore[no-any-return]


def compile_encoder(fields: Sequence[Field], version: int, flexible: bool) -> Encoder:
    """A function ``(out, body, parts) -> out`` for ``fields`` at ``version``."""
    c = _Compiler()
    top = c.encoder(tuple(fields), version, flexible)
    return c.finish(top)  # type: ignore[no-any-return]


def generated_source(fields: Sequence[Field], version: int, flexible: bool) -> str:
    """The source the compiler writes (for debugging and tests)."""
    c = _Compiler()
    c.decoder(tuple(fields), version, flexible)
    c.encoder(tuple(fields), version, flexible)
    return "\n".join(c.src)
