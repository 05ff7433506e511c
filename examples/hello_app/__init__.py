"""An example project: job handlers that live outside codity and plug in with `--app`."""
