"""The registry of mechanisms (shared/mechanisms/registry.py): every declaration complete, one
meaning of a field's type and bounds across the mechanisms that share it, and every field a
scheme writes to a manifest declared."""

import pytest

from ldpsurvey.shared import parse_definition
from ldpsurvey.shared.mechanisms import registry
from ldpsurvey.shared.mechanisms.protocol import PARAM_TYPES

from helpers import EVERY_TYPE


@pytest.mark.parametrize("declared", registry.DECLARATIONS,
                         ids=lambda d: f"{d.key}:{d.name}:{'+'.join(d.types)}")
def test_each_declaration_is_complete(declared):
    """Words, question types, fields each with a type and a meaning, and either a builder or
    (auto) a chooser with what it compares."""
    assert declared.words and declared.types and declared.params
    assert set(declared.types) <= set(registry.QUESTION_TYPES)
    assert (declared.build is None) == (declared.choose is not None)
    assert declared.choose is None or declared.measure
    for param in declared.params:
        assert param.meaning, param.name
        assert param.type in PARAM_TYPES or param.schema is not None, param.name


def test_a_field_shared_by_mechanisms_has_one_type_and_bounds():
    schemas = {}
    for declared in registry.DECLARATIONS:
        for param in declared.params:
            assert schemas.setdefault(param.name, param.json_schema()) == param.json_schema(), (
                param.name, declared.name)


def test_each_type_has_one_default_and_names_are_unique():
    for kind in registry.QUESTION_TYPES:
        assert sum(d.default for d in registry.DECLARATIONS if kind in d.types) == 1, kind
        for key in ("mechanism", "design", "disclosed"):
            names = registry.names(kind, key)
            assert len(names) == len(set(names)), (kind, key)


def test_every_field_a_scheme_writes_is_declared():
    """What a manifest holds of each question beyond id, text, type, options and mechanism is
    a field of the declaration its scheme was built from (so the OpenAPI description and the
    manifest's reader know it), and each scheme has words."""
    for question in parse_definition(EVERY_TYPE).questions:
        name = question.scheme.name
        key = next(d.key for d in registry.DECLARATIONS if d.name == name)
        declared = registry.declared(question.type, name, key)
        written = set(question.as_dict()) - {"id", "text", "type", "options", "mechanism"}
        assert written <= declared.field_names, (name, written - declared.field_names)
        assert registry.WORDS[name]


def test_auto_chooses_among_its_types_mechanisms():
    """What `auto` compared and chose are mechanisms its question's type offers."""
    autos = [q for q in parse_definition(EVERY_TYPE).questions if q.auto is not None]
    assert autos
    for question in autos:
        offered = set(registry.names(question.type)) - {"auto"}
        assert question.auto.chosen in offered and set(question.auto.variances) <= offered
