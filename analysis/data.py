"""An export and its codebook as a data frame with each question's mechanism."""

import json
from pathlib import Path

import pandas as pd

from ldpsurvey.shared import Mechanism, uniform_beta

from .errors import AnalysisError


def mechanism_of(question: dict) -> Mechanism:
    """What one report of a codebook question is given its true answer: its (alpha, beta),
    then for a concept question the instantaneous layer (irr_alpha, uniform beta), composed
    (shared.manifest.Question.reported_mechanism)."""
    mechanism = Mechanism(question["alpha"], tuple(question["beta"]))
    irr_alpha = question.get("irr_alpha")
    if irr_alpha is None:
        return mechanism
    return mechanism.then(Mechanism(irr_alpha, uniform_beta(len(question["options"]))))


def read_export(csv_path: str | Path, codebook_path: str | Path, *,
                codes: bool = False) -> tuple[pd.DataFrame, dict[str, Mechanism]]:
    """The default CSV export (labels; codes=True for one made with --codes) read with its
    codebook (JSON): one categorical column per question, its categories the option labels in
    code order (an openly answered number: a numeric column), and {question id: mechanism}
    (mechanism_of) of the randomized questions; openly answered (disclosed) ones have none: they
    are plain covariates and raking margins. Columns not in the codebook are
    kept as read (plain columns). AnalysisError for a cell that is no option of its question."""
    with open(codebook_path, encoding="utf-8") as handle:
        book = json.load(handle)
    frame = pd.read_csv(csv_path, dtype=str, keep_default_na=False, na_filter=False)
    mechanisms = {}
    for question in book["questions"]:
        qid = question["id"]
        if qid not in frame.columns:
            raise AnalysisError(f"the export has no column {qid!r} of the codebook")
        if question.get("disclosed") and question["type"] == "numeric":
            frame[qid] = pd.to_numeric(frame[qid], errors="coerce")
            if frame[qid].isna().any():
                raise AnalysisError(f"column {qid!r} holds a value that is no number")
            continue
        options = question["options"]
        cells = {str(o["code"]) if codes else o["csv_value"]: o["code"] for o in options}
        unknown = sorted(set(frame[qid]) - set(cells))
        if unknown:
            raise AnalysisError(f"column {qid!r} holds {unknown[0]!r}, no option of the question")
        frame[qid] = pd.Categorical.from_codes(frame[qid].map(cells).astype(int),
                                               categories=[o["label"] for o in options])
        if not question.get("disclosed"):  # an open answer is a plain covariate
            mechanisms[qid] = mechanism_of(question)
    return frame, mechanisms
