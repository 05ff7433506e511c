"""The built-in handlers. Importing this package registers them in the default registry."""

from __future__ import annotations

from codity.worker.handlers import basic, email_send, http_request, report

__all__ = ["basic", "email_send", "http_request", "report"]
