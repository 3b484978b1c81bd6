"""Exceptions raised by the protocol codec.

The server maps them to behaviour: an unknown API key or an unsupported version
closes the connection (except ApiVersions, answered with error 35 and a v0
body); a malformed body is answered by closing the connection too.
"""

from __future__ import annotations

from typing import Any


class ProtocolError(Exception):
    """Base class of every error the codec raises."""


class MalformedRequestError(ProtocolError):
    """The frame is truncated, has a bad length, bad UTF-8 or an illegal null.

    ``header`` is the parsed request header when it could be read, else None.
    """

    def __init__(self, message: str = "malformed request", header: Any = None) -> None:
        super().__init__(message)
        self.header = header


class UnknownApiError(ProtocolError):
    """The request's API key is not declared in ``APIS``; ``header`` is available."""

    def __init__(self, header: Any) -> None:
        super().__init__(f"unknown api key {header.api_key}")
        self.header = header


class UnsupportedVersionError(ProtocolError):
    """The API is known but the version is outside its declared range."""

    def __init__(self, header: Any) -> None:
        super().__init__(f"unsupported version {header.api_version} of api key {header.api_key}")
        self.header = header


class EncodeError(ProtocolError, ValueError):
    """A body dict holds a value the field's wire type cannot carry."""
