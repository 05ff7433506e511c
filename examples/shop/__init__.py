"""A small shop: FastAPI + SQLAlchemy + codity tasks (see examples/README.md)."""
