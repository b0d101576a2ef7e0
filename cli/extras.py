"""Optional parts of ldp-survey are imported lazily, with a clear message when missing."""

import importlib
from types import ModuleType

import click

EXTRAS = {"ldpsurvey.aggregator": "server", "gunicorn": "server", "numpy": "sim",
          "formulaic": "analysis"}


def load(module: str) -> ModuleType:
    """Import `module`, or stop with one line naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        extra = EXTRAS[module]
        raise click.ClickException(
            f"this command needs the '{extra}' extra ({exc.name} is not installed): "
            f"pip install 'ldp-survey[{extra}]'") from None
