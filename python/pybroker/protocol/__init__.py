"""pybroker.protocol: Kafka's wire protocol, every API declared once as data.

* ``APIS``: api key -> ``Api`` (``.key``, ``.name``, ``.min_version``,
  ``.max_version``, ``.is_flexible(version)``, ``.request``/``.response`` fields).
* ``decode_request(frame) -> (RequestHeader, body dict)`` for a frame without its
  size prefix; raises ``UnknownApiError``, ``UnsupportedVersionError`` (both carry
  ``.header``) or ``MalformedRequestError``.
* ``encode_response(api_key, api_version, correlation_id, body) -> parts``: the
  whole frame with its size prefix, as ``bytes`` pieces and record objects.
* ``encode_request`` / ``decode_response``: the client side, for broker-to-broker
  calls and tests.

Bodies are dicts keyed by Kafka's field names in snake_case; nested arrays are
lists of dicts. Decoded requests hold every field of the schema (defaults for
fields absent in that version); response dicts may omit fields (defaults apply)
and extra keys are ignored. The codec does no I/O.
"""

from pybroker.protocol.errors import (
    EncodeError,
    MalformedRequestError,
    ProtocolError,
    UnknownApiError,
    UnsupportedVersionError,
)
from pybroker.protocol.frame import (
    RequestHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from pybroker.protocol.messages import APIS
from pybroker.protocol.schema import Api, Array, Field, Struct

__all__ = [
    "APIS",
    "Api",
    "Array",
    "EncodeError",
    "Field",
    "MalformedRequestError",
    "ProtocolError",
    "RequestHeader",
    "Struct",
    "UnknownApiError",
    "UnsupportedVersionError",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
]
