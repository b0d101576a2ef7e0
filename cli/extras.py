"""Optional parts of ldp-survey are imported lazily, with a clear message when missing."""

import importlib
from types import ModuleType

import click

# The extra that installs a module: looked up by the module asked for, or one of its packages,
# then by the module found missing (ldpsurvey.analysis.regression needs pandas, say).
EXTRAS = {"ldpsurvey.aggregator": "server", "gunicorn": "server", "numpy": "sim",
          "ldpsurvey.analysis": "analysis", "formulaic": "analysis", "pandas": "analysis",
          "pyreadstat": "exports", "openpyxl": "exports",
          "ldpsurvey.xlsform": "xlsform", "pyxform": "xlsform", "tomli_w": "xlsform"}


def extra_for(*modules: str) -> str | None:
    """The extra that installs the first of `modules` (or a package of it) EXTRAS names."""
    for module in modules:
        parts = module.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in EXTRAS:
                return EXTRAS[".".join(parts[:end])]
    return None


def load(module: str) -> ModuleType:
    """Import `module`, or stop with one line naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        extra = extra_for(module, exc.name or "")
        if extra is None:
            raise
        raise click.ClickException(
            f"this command needs the '{extra}' extra ({exc.name} is not installed): "
            f"pip install 'ldp-survey[{extra}]'") from None
