"""A command that needs an optional part says which extra installs it, in one line."""

import click
import pytest

from ldpsurvey.cli import extras


@pytest.mark.parametrize(("module", "missing", "extra"), [
    ("numpy", "numpy", "sim"),
    ("ldpsurvey.aggregator", "flask", "server"),
    ("ldpsurvey.analysis.regression", "pandas", "analysis"),  # a submodule of a listed package
    ("pandas", "pandas", "analysis"),
    ("formulaic", "formulaic", "analysis"),
    ("ldpsurvey.xlsform", "pyxform", "xlsform"),
    ("ldpsurvey.xlsform", "openpyxl", "xlsform"),
])
def test_a_missing_optional_module_names_its_extra(monkeypatch, module, missing, extra):
    def absent(name):
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    monkeypatch.setattr(extras.importlib, "import_module", absent)
    with pytest.raises(click.ClickException, match=f"'{extra}' extra .*{missing} is not "
                                                   f"installed.*ldp-survey\\[{extra}\\]"):
        extras.load(module)


def test_an_unlisted_missing_module_is_not_hidden(monkeypatch):
    def absent(name):
        raise ModuleNotFoundError("No module named 'nowhere'", name="nowhere")

    monkeypatch.setattr(extras.importlib, "import_module", absent)
    with pytest.raises(ModuleNotFoundError):
        extras.load("somewhere")


def test_an_installed_module_is_returned():
    assert extras.load("json").dumps([1]) == "[1]"
