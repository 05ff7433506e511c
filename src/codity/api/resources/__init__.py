"""One module per resource; each exports `ROUTES: list[Route]`, concatenated in `routes.py`."""
