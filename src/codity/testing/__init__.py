"""Test helpers for applications that use codity (docs/PYTHON_API.md, "Testing")."""
