"""The mechanisms: the protocol every question type's randomizer provides, the registry that picks
one, and one module per mechanism or design."""
