"""What the conformance suite is parametrized over: every (question type, mechanism or design)
the scheme registry offers, each with its example question from helpers.EVERY_TYPE (the one
survey that takes all of them through every surface at once; a question declaring a name the
registry does not offer is refused when EVERY_TYPE is published).

`registered` is the one place that reads the registry: point it at another registry and every
test of tests/conformance follows. An entry without an example fails the suite
(test_registry.py).
"""

import pytest

from helpers import EVERY_TYPE


def registered() -> dict[tuple[str, str], dict | None]:
    """{(type, mechanism or design): its example question (the first of EVERY_TYPE declaring
    it, None if none does)}, for every name a question's `mechanism`, `design` or `disclosed`
    may declare. A question declaring none has its type's default: forced response for yes/no
    and choice, else the first of the type module's MECHANISMS."""
    from ldpsurvey.shared.mechanisms import disclosed, forced_response, registry
    from ldpsurvey.shared.mechanisms.square_wave import SQUARE_WAVE

    offered = {"yes_no": [forced_response.NAME, *registry.DESIGNS],
               "choice": [forced_response.NAME, *(name for name in registry.CHOICE_MECHANISMS
                                                  if name != forced_response.NAME)],
               **{kind: list(module.MECHANISMS) for kind, module in registry.TYPES.items()}}
    for kind in disclosed.TYPES:
        offered[kind].append(disclosed.NAME)

    def declared(question: dict) -> tuple[str, str]:
        kind = question["type"]
        if question.get("disclosed"):
            return kind, disclosed.NAME
        if question.get("distribution"):  # `auto` asking for the distribution: square wave
            return kind, SQUARE_WAVE
        return kind, question.get("design", question.get("mechanism", offered[kind][0]))

    examples: dict[tuple[str, str], dict] = {}
    for question in EVERY_TYPE["questions"]:
        examples.setdefault(declared(question), question)
    return {(kind, name): examples.get((kind, name)) for kind, names in offered.items()
            for name in names}


def each_entry(test):
    """Run `test` once per registry entry (its id "type-name"), given the entry's example
    question (None where EVERY_TYPE has none: the test then fails on it)."""
    entries = registered()
    return pytest.mark.parametrize("question", list(entries.values()),
                                   ids=["-".join(entry) for entry in entries])(test)
