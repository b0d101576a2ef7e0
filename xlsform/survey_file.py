"""The survey file an import writes: TOML, headed by a comment naming its source."""

from typing import Any

import tomli_w


def survey_toml(definition: dict[str, Any], source: str) -> str:
    """`definition` as a survey file's TOML text, its first lines saying where it came from
    and what to run next."""
    source = " ".join(source.splitlines())  # a comment holds one line
    return (f"# Imported from {source} by `ldp-survey survey import`. Edit it, then:\n"
            "#   ldp-survey survey check FILE      what it asks of respondents\n"
            "#   ldp-survey survey preview FILE    the form as respondents will see it\n\n"
            + tomli_w.dumps(definition))
