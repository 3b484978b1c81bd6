"""Networking: listeners, connections, request framing and dispatch."""
