"""Request/response frames: headers plus the compiled body codecs, cached per version.

A request frame (without its 4-byte size prefix) is a header then the body:

* header v1: api_key int16, api_version int16, correlation_id int32,
  client_id nullable int16-length string;
* header v2 (flexible versions): v1 + tagged fields;
* header v0 (only an 8-byte ApiVersions v0 request): no client_id.

A response frame is int32 size, correlation_id int32, [tagged fields if the
version is flexible, except ApiVersions whose response header is always v0], body.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from pybroker import _core
from pybroker.protocol.codec import (
    Decoder,
    Encoder,
    PreEncoded,
    compile_decoder,
    compile_encoder,
    uuid_of,
)
from pybroker.protocol.errors import (
    EncodeError,
    MalformedRequestError,
    UnknownApiError,
    UnsupportedVersionError,
)
from pybroker.protocol.messages import APIS
from pybroker.protocol.schema import Api
from pybroker.protocol.types import INT32, ZERO_UUID, read_uvarint

_HEADER = struct.Struct(">hhih")
_HEADER_V0 = struct.Struct(">hhi")
_REQUEST_PREFIX = struct.Struct(">ihhi")
_SIZE_AND_CORRELATION = struct.Struct(">ii")
_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError, MemoryError)
_ENCODE_ERRORS = (struct.error, TypeError, AttributeError, ValueError, OverflowError)


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


_request_decoders: dict[tuple[int, int], Decoder] = {}
_response_encoders: dict[tuple[int, int], Encoder] = {}
_request_encoders: dict[tuple[int, int], Encoder] = {}
_response_decoders: dict[tuple[int, int], Decoder] = {}
#: per (api key, version) as a request frame needs them: the body's decoder and whether
#: the header has tagged fields; the response's encoder and whether its header has them
#: (one lookup per request, issue 26)
_request_bodies: dict[tuple[int, int], tuple[Decoder, bool]] = {}
_response_bodies: dict[tuple[int, int], tuple[Encoder, bool]] = {}


def _api(api_key: int, api_version: int) -> Api:
    api = APIS.get(api_key)
    if api is None:
        raise KeyError(f"undeclared api key {api_key}")
    if not api.supports(api_version):
        span = f"{api.min_version}-{api.max_version}"
        raise ValueError(f"{api.name} v{api_version} is outside {span}")
    return api


def _compiled(cache: dict[tuple[int, int], Any], compile_fn: Callable[..., Any],
              request: bool, api_key: int, api_version: int) -> Any:
    """The codec for one side of (api_key, api_version), compiled on first use."""
    fn = cache.get((api_key, api_version))
    if fn is None:
        api = _api(api_key, api_version)
        fields = api.request if request else api.response
        fn = compile_fn(fields, api_version, api.is_flexible(api_version))
        cache[api_key, api_version] = fn
    return fn


def request_decoder(api_key: int, api_version: int) -> Decoder:
    """The compiled request body decoder ``(buf, pos) -> (dict, pos)``."""
    return _compiled(_request_decoders, compile_decoder, True, api_key, api_version)


#: request bodies decoded in Rust, each mirroring the generated decoder of its message
#: (declared once, in protocol/messages; the tests check the two agree at every
#: version): a Fetch comes with every follower round trip and consumer poll (issue 26)
#: (named at import: an extension built before it fails here, at start, not at a Fetch)
_FetchRequestDecoder = _core.FetchRequestDecoder
_NATIVE_REQUEST_DECODERS: dict[int, Callable[[int], Decoder]] = {
    1: lambda version: _FetchRequestDecoder(version, uuid_of, ZERO_UUID),
}


def body_decoder(api_key: int, api_version: int) -> Decoder:
    """The decoder decode_request uses for a request body: the native one where there
    is one, else the compiled one."""
    native = _NATIVE_REQUEST_DECODERS.get(api_key)
    if native is not None:
        return native(api_version)
    return request_decoder(api_key, api_version)


def response_encoder(api_key: int, api_version: int) -> Encoder:
    """The compiled response body encoder ``(out, body, parts) -> out``."""
    return _compiled(_response_encoders, compile_encoder, False, api_key, api_version)


_element_encoders: dict[tuple[int, int, str], Callable[[dict[str, Any]], PreEncoded]] = {}


def response_element_encoder(api_key: int, api_version: int, field: str
                             ) -> Callable[[dict[str, Any]], PreEncoded]:
    """Encodes one element of the response's top-level struct array `field` on its own,
    as the response encoder would write it there (PreEncoded: cache it, put it in the
    array in place of the dict). Only for elements without records (no file parts)."""
    key = (api_key, api_version, field)
    fn = _element_encoders.get(key)
    if fn is None:
        api = _api(api_key, api_version)
        found = next((f for f in api.response if f.name == field and f.is_struct_array),
                     None)
        if found is None:
            raise KeyError(f"{api.name} has no struct array {field!r}")
        enc = compile_encoder(found.fields, api_version, api.is_flexible(api_version))

        def fn(value: dict[str, Any]) -> PreEncoded:
            parts: list[Any] = []
            out = enc(bytearray(), value, parts)
            if parts:
                raise EncodeError(f"{api.name} {field}: an element with records cannot be "
                                  "encoded on its own")
            return PreEncoded(bytes(out), value)

        _element_encoders[key] = fn
    return fn


def request_encoder(api_key: int, api_version: int) -> Encoder:
    return _compiled(_request_encoders, compile_encoder, True, api_key, api_version)


def response_decoder(api_key: int, api_version: int) -> Decoder:
    return _compiled(_response_decoders, compile_decoder, False, api_key, api_version)


def decode_request_header(buf: memoryview) -> tuple[RequestHeader, int]:
    """Parse header v0/v1 fields (not the v2 tagged fields); returns (header, body pos)."""
    n = len(buf)
    if n < 10:
        if n == 8:
            api_key, api_version, correlation_id = _HEADER_V0.unpack_from(buf, 0)
            if api_key == 18 and api_version == 0:
                return RequestHeader(api_key, api_version, correlation_id, None), 8
        raise MalformedRequestError("request header truncated")
    api_key, api_version, correlation_id, client_len = _HEADER.unpack_from(buf, 0)
    pos = 10
    client_id = None
    if client_len >= 0:
        end = pos + client_len
        if end > n:
            raise MalformedRequestError("client id past end of frame")
        try:
            client_id = str(buf[pos:end], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedRequestError("client id is not UTF-8") from exc
        pos = end
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def decode_request(buf: memoryview | bytes) -> tuple[RequestHeader, dict[str, Any]]:
    """Decode one request frame (no size prefix) into its header and body dict.

    Raises UnknownApiError / UnsupportedVersionError (with ``.header``) or
    MalformedRequestError. Records fields are memoryview slices of ``buf``.
    """
    if not isinstance(buf, memoryview):
        buf = memoryview(buf)
    header, pos = decode_request_header(buf)
    api_key, api_version = header.api_key, header.api_version
    known = _request_bodies.get((api_key, api_version))
    if known is None:
        api = APIS.get(api_key)
        if api is None:
            raise UnknownApiError(header)
        if not api.supports(api_version):
            raise UnsupportedVersionError(header)
        known = _request_bodies[api_key, api_version] = (
            body_decoder(api_key, api_version), api.is_flexible(api_version))
    dec, flexible = known
    try:
        if flexible:
            # the header's tagged-field count, nearly always 0: read inline when it is
            # one byte, as the generated decoders read theirs (a call per request)
            count = buf[pos]
            if count & 0x80:
                count, pos = read_uvarint(buf, pos)
            else:
                pos += 1
            for _ in range(count):
                _tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                pos += size
            if pos > len(buf):
                raise MalformedRequestError("header tagged field past end of frame")
        body, pos = dec(buf, pos)
    except MalformedRequestError as exc:
        exc.header = header
        raise
    except _DECODE_ERRORS as exc:
        raise MalformedRequestError(f"bad request body: {exc}", header) from exc
    return header, body


def _finish(out: bytearray, parts: list[Any]) -> list[Any]:
    """Patch the frame size into ``out``/``parts`` and return the final parts list."""
    if not parts:
        INT32.pack_into(out, 0, len(out) - 4)
        return [bytes(out)]
    parts.append(out)
    size = -4
    kept: list[Any] = []
    for p in parts:
        if type(p) is bytearray:
            if p:
                size += len(p)
                kept.append(p)
        else:
            size += p.length
            kept.append(p)
    INT32.pack_into(kept[0], 0, size)
    return [bytes(p) if type(p) is bytearray else p for p in kept]


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: dict[str, Any]
) -> list[Any]:
    """One complete response frame, size prefix included, as a list of parts.

    Parts are ``bytes`` or record objects with an int ``.length`` (file slices to
    be sent with sendfile); the size prefix counts both.
    """
    known = _response_bodies.get((api_key, api_version))
    if known is None:
        known = _response_bodies[api_key, api_version] = (
            response_encoder(api_key, api_version),
            # ApiVersions' response header is v0 whatever the version
            api_key != 18 and APIS[api_key].is_flexible(api_version))
    enc, tagged_header = known
    out = bytearray(_SIZE_AND_CORRELATION.pack(0, correlation_id))
    if tagged_header:
        out.append(0)
    parts: list[Any] = []
    try:
        out = enc(out, body, parts)
    except _ENCODE_ERRORS as exc:
        name = APIS[api_key].name
        raise EncodeError(f"{name} v{api_version} response: {exc}") from exc
    return _finish(out, parts)


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: dict[str, Any],
) -> list[Any]:
    """One complete request frame, size prefix included (for broker-to-broker calls)."""
    enc = request_encoder(api_key, api_version)
    out = bytearray(_REQUEST_PREFIX.pack(0, api_key, api_version, correlation_id))
    if client_id is None:
        out += b"\xff\xff"
    else:
        raw = client_id.encode()
        out += struct.pack(">h", len(raw)) + raw
    if APIS[api_key].is_flexible(api_version):
        out.append(0)
    parts: list[Any] = []
    try:
        out = enc(out, body, parts)
    except _ENCODE_ERRORS as exc:
        raise EncodeError(f"{APIS[api_key].name} v{api_version} request: {exc}") from exc
    return _finish(out, parts)


def decode_response(
    api_key: int, api_version: int, buf: memoryview | bytes
) -> tuple[int, dict[str, Any]]:
    """Decode a response frame (no size prefix); returns (correlation_id, body).

    Like clients do, an ApiVersions response with a non-zero error code is read as v0.
    """
    if not isinstance(buf, memoryview):
        buf = memoryview(buf)
    if api_key == 18 and len(buf) >= 6 and buf[4:6] != b"\x00\x00":
        api_version = 0  # an ApiVersions error response always has a v0 body
    dec = response_decoder(api_key, api_version)
    try:
        (correlation_id,) = INT32.unpack_from(buf, 0)
        pos = 4
        if APIS[api_key].response_header_version(api_version) == 1:
            count, pos = read_uvarint(buf, pos)
            for _ in range(count):
                _tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                pos += size
        body, pos = dec(buf, pos)
    except MalformedRequestError:
        raise
    except _DECODE_ERRORS as exc:
        raise MalformedRequestError(f"bad response body: {exc}") from exc
    return correlation_id, body


__all__ = [
    "RequestHeader",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "request_decoder",
    "request_encoder",
    "response_decoder",
    "response_encoder",
]
