"""Shared test helpers (imported by the test modules; not collected)."""
