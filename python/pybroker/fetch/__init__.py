"""Fetch-side state kept between requests (fetch sessions)."""
