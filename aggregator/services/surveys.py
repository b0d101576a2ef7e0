"""Published surveys for researchers and pages: list, mint invitation tokens, the estimates
document, cross-tabs and the exports (their life, from draft to deletion: lifecycle.py)."""

import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from ldpsurvey.aggregator.exceptions import (
    InvalidParameter,
    NotInvitationOnly,
    SurveyClosed,
    SurveyNotFound,
    Unauthorized,
)
from ldpsurvey.aggregator.services import access, analyses, exports
from ldpsurvey.aggregator.services.budgets import Runner
from ldpsurvey.aggregator.store import counts as count_store
from ldpsurvey.aggregator.store import releases as release_store
from ldpsurvey.aggregator.store import responses as response_store
from ldpsurvey.aggregator.store import surveys as survey_store
from ldpsurvey.aggregator.store.accounts import KeyRecord
from ldpsurvey.aggregator.store.connection import Connection
from ldpsurvey.shared import DEFAULT_CONFIDENCE, Question, Survey, crosstab
from ldpsurvey.shared.http_contract import schedule_words
from ldpsurvey.shared.mechanisms.disclosed import DEFAULT_MIN_CELL
from ldpsurvey.shared.mechanisms.forced_response import NAME as FORCED_RESPONSE
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.stats.crosstab import size_problem
from ldpsurvey.shared.stats.shuffle import central_epsilon


def published(db: Connection, survey_id: str) -> survey_store.StoredSurvey:
    """The signed manifest, its signature and status. SurveyNotFound."""
    return survey_store.get_survey(db, survey_id)


def hosts_form(db: Connection, survey_id: str, origin: str) -> bool:
    """Whether `origin` is one of the published survey's form_origins, the origins its
    manifest signs to host a copy of its form (format /9); an unknown survey has none."""
    try:
        return origin in survey_store.published_survey(db, survey_id).form_origins
    except SurveyNotFound:
        return False


def status(db: Connection, survey_id: str, origin: str | None) -> tuple[str, bool]:
    """A published survey's status (open or closed), and whether a page at `origin` (a
    browser's Origin) is at one of its form_origins, so may read it: one read of the survey.
    SurveyNotFound."""
    stored = survey_store.get_survey(db, survey_id)
    return stored.status, origin is not None and origin in stored.survey.form_origins


def open_for_answers(db: Connection, survey_id: str) -> Survey:
    """The survey, if it still takes answers. SurveyNotFound, SurveyClosed."""
    stored = survey_store.get_survey(db, survey_id)
    if stored.status != "open":
        raise SurveyClosed()
    return stored.survey


def listing(db: Connection, caller: KeyRecord, archived: bool = False) -> list[dict[str, Any]]:
    """The surveys the caller owns or shares and the drafts they own (an admin: all), newest
    first, archived ones only if `archived`: id, title, status (draft, open, closed), the day
    published (a draft: made), released responses, whether it is invitation-only and archived.
    Never how many wait for release: a count that rose with each submission would date it, and
    tell its owner when a pool lacks one response (see releases.py)."""
    return [asdict(entry) for entry in survey_store.list_surveys(db, access.listed_for(caller),
                                                          archived)]


@dataclass(frozen=True)
class Exposure:
    """What the form and the results page say about releases, and about the one attack no
    design prevents: whoever controls who may respond (`controller`) can fill a release around
    one respondent and see their report alone; a best guess of each answer from it is then
    right with probability `best_guess[question id]` (options equally likely beforehand)."""

    schedule: str  # how often releases may happen, in words
    release_batch: int
    controller: str
    best_guess: dict[str, float]  # the randomized questions' (an open answer is seen as given)

    @property
    def most(self) -> float:
        return max(self.best_guess.values(), default=0.0)


def exposure(survey: Survey, release_every: float) -> Exposure:
    """The Exposure of a survey under a release schedule of `release_every` seconds."""
    controller = ("the researchers who send the invitations" if survey.invitation_only
                  else "anyone who can open this survey")
    guesses = {q.id: q.scheme.best_guess() for q in survey.questions if not q.disclosed}
    return Exposure(schedule_words(release_every), survey.release_batch, controller,
                    guesses)


def respondent_link(db: Connection, caller: KeyRecord, survey_id: str, origin: str) -> str:
    """The address respondents open a published survey at: its signed origin (a manifest
    older than format /5 has none: `origin`, this server's), then /s/ID. InvalidParameter for
    an invitation-only survey, whose respondents each need their own link; SurveyNotFound,
    Forbidden, SurveyIsDraft (access.check)."""
    survey = access.check(db, caller, survey_id, access.READ).survey
    if survey.invitation_only:
        raise InvalidParameter("this survey is by invitation only: each respondent needs "
                               "their own link (ldp-survey survey tokens)")
    return f"{survey.origin or origin}/s/{survey_id}"


def mint_tokens(db: Connection, caller: KeyRecord, survey_id: str,
                read_count: Callable[[], int]) -> list[str]:
    """`read_count()` single-use invitation tokens for an open, invitation-only survey the
    caller manages. Each proves itself under the storage key (StorageKeys.invitation): nothing
    is stored until it is spent. The count is read (and checked: the web layer's parsing) only
    once the survey is known to take tokens, so that is what an unknown or closed survey is
    told."""
    stored = access.check(db, caller, survey_id, access.MANAGE)
    if not stored.survey.invitation_only:
        raise NotInvitationOnly()
    if stored.status != "open":
        raise SurveyClosed("this survey is closed")
    return [db.keys.invitation(survey_id) for _ in range(read_count())]


@dataclass(frozen=True)
class EstimateOptions(Settings):
    """Settings (confidence, interval method, simultaneous), a regression formula to fit too
    (None: none), population margins to weight by (None: none) and the fewest respondents a
    group may hold in a survey with open answers (the MIN_CELL setting)."""

    regress: str | None = None
    weights: dict | None = None
    min_cell: int = DEFAULT_MIN_CELL


def estimates(db: Connection, survey_id: str, caller: KeyRecord | None, central_delta: float,
              options: Settings, release_every: float, runner: Runner | None = None) -> dict:
    """The estimates document for this caller (None: anonymous) with these options, the
    central epsilon at delta at most `central_delta` and the release schedule; a regression
    or weights run by `runner` within the budget of a researcher of the survey, or the
    public's. SurveyNotFound, Unauthorized (see reader_of), the analyses' errors."""
    stored = survey_store.get_survey(db, survey_id)
    reader = readable(db, stored, caller)
    document = estimates_document(db, stored, options, central_delta, release_every)
    if options.weights is not None:
        document["weighted"] = analyses.weighted(db, stored.survey, options.weights,
                                                 options.regress, options.confidence,
                                                 options.min_cell, runner, runner.budget(reader))
    elif options.regress is not None:
        document["regression"] = analyses.regression(db, stored.survey, options.regress,
                                                     options.confidence, options.min_cell,
                                                     runner, runner.budget(reader))
    return document


def readable(db: Connection, stored: survey_store.StoredSurvey, caller: KeyRecord | None) -> bool:
    """reader_of, with Unauthorized where only a key would do."""
    reader = reader_of(db, stored, caller)
    if reader is None:
        raise Unauthorized("this survey's results need a researcher key")
    return reader


def reader_of(db: Connection, stored: survey_store.StoredSurvey,
              caller: KeyRecord | None) -> bool | None:
    """Whether the caller reads the survey's results (the survey already read) as one of its
    researchers (True) or as the public (False, a public-results survey); None: only with a
    key. A key that may not use the survey gets SurveyNotFound, as for an unknown survey."""
    survey = stored.survey
    if access.may_read(db, caller, stored):
        return True
    if survey.public_results:
        return False
    if caller is None or caller.role == "relay":
        return None
    raise SurveyNotFound(survey.survey_id)


@dataclass(frozen=True)
class ResultsPage:
    """A survey and, if the caller may read them, its estimates (None: a login is needed), a
    cross-tab (None: none chosen or declared) and its releases per day (UTC days, as stored);
    `researcher` when the caller reads them as one of its researchers, not as the public."""

    survey: Survey
    estimates: dict | None
    exposure: Exposure | None = None
    researcher: bool = False
    crosstab: dict | None = None
    timeline: list[tuple[str, int]] | None = None  # responses released per day


def results_page(db: Connection, survey_id: str, caller: KeyRecord | None,
                 central_delta: float, options: Settings, release_every: float,
                 rows: str | None = None, cols: str | None = None) -> ResultsPage:
    """The results page's content with these options for the caller of a session (None: not
    logged in), with the cross-tab of rows and cols (by default the first declared pair, if
    any). SurveyNotFound (see reader_of), InvalidParameter."""
    stored = survey_store.get_survey(db, survey_id)
    reader = reader_of(db, stored, caller)
    if reader is None:
        return ResultsPage(stored.survey, None)
    if rows is None and cols is None and stored.survey.crosstabs:
        rows, cols = stored.survey.crosstabs[0]
    table = None if rows is None and cols is None else _crosstab(
        db, stored.survey, rows, cols, DEFAULT_CONFIDENCE)
    return ResultsPage(stored.survey, estimates_document(
        db, stored, options, central_delta, release_every),
        exposure=exposure(stored.survey, release_every),
        researcher=reader, crosstab=table, timeline=release_store.released_per_day(db, survey_id))


def estimates_document(db: Connection, stored: survey_store.StoredSurvey, options: Settings,
                       central_delta: float, release_every: float) -> dict:
    """Per question its parameters, the covariance of its unbiased estimates and, per option,
    the shared estimator's keys applied to the counts of released responses (null before the
    first release); whether the intervals are simultaneous, the declared cross-tabs, the
    survey's release batch, the seconds between scheduled releases (`release_every`) and the
    shuffle-amplified central epsilon (`central`). The same for researchers and the public,
    and nothing about responses not yet released: it changes only at a release."""
    survey = stored.survey
    counts = count_store.counts(db, survey.survey_id)
    questions = [question_estimates(question, counts[question.id], options)
                 for question in survey.questions]
    document = {"survey_id": survey.survey_id, "title": survey.title, "status": stored.status,
                "total_epsilon": survey.total_epsilon, "confidence": options.confidence,
                "ci_method": options.method, "simultaneous": options.simultaneous,
                "release_batch": survey.release_batch, "release_every": release_every,
                "crosstabs": [list(pair) for pair in survey.crosstabs], "questions": questions}
    document["central"] = central(survey, release_store.smallest_release(db, survey.survey_id),
                                  questions[0]["n"] if questions else 0, central_delta)
    return document


def question_estimates(question: Question, counts: list[int], options: Settings) -> dict:
    """One question of the estimates document: its id, text and type, concept fields, and
    what its scheme estimates from its counters (scheme.summary)."""
    concept = ({} if question.concept is None else
               {"concept": question.concept, "irr_alpha": question.irr_alpha})
    return {"id": question.id, "text": question.text, "type": question.type,
            **question.scheme.summary(counts, options), **concept}


def crosstab_document(db: Connection, survey_id: str, caller: KeyRecord | None,
                      rows: str | None, cols: str | None, level: float) -> dict:
    """The cross-tab of questions `rows` and `cols` (ids, from a query) at confidence `level`:
    shared.crosstab on
    their joint reported counts, from the counters of a declared pair (O(cells)) or else
    tallied from the released responses of the releases there were, streamed. Before the first
    release n is 0 and the rest empty. InvalidParameter for more than crosstab.MAX_CELLS cells,
    before any work, so a reply stays under crosstab.reply_bound(MAX_CELLS) bytes.
    SurveyNotFound, Unauthorized, InvalidParameter."""
    stored = survey_store.get_survey(db, survey_id)
    readable(db, stored, caller)
    return _crosstab(db, stored.survey, rows, cols, level)


def _crosstab(db: Connection, survey: Survey, rows: str | None, cols: str | None,
              level: float) -> dict:
    """crosstab_document for a survey the caller may read, at confidence `level`."""
    known = {q.id: q for q in survey.questions}
    for name, value in (("rows", rows), ("cols", cols)):
        if value not in known:
            raise InvalidParameter(f"{name} must be a question id of this survey, one of "
                                   f"{', '.join(known)}")
    if rows == cols:
        raise InvalidParameter("rows and cols must be two different questions")
    for value in (rows, cols):
        if known[value].scheme.name != FORCED_RESPONSE:
            raise InvalidParameter(f"question {value!r} uses {known[value].scheme.name}: "
                                   "cross-tabs are for forced-response questions")
    problem = size_problem(len(known[rows].options), len(known[cols].options))
    if problem:  # before any work: a survey published before the limit may declare one
        raise InvalidParameter(problem)
    counts = joint_counts(db, survey, rows, cols)
    document = {"survey_id": survey.survey_id, "rows": rows, "cols": cols}
    if not any(map(any, counts)):
        return {**document, "n": 0, "confidence": level, "joint": None, "covariance": None,
                "cells": [], "conditional": []}
    table = crosstab(known[rows].reported_mechanism, known[cols].reported_mechanism, counts,
                     confidence=level)
    return {**document, **table.as_dict()}


def joint_counts(db: Connection, survey: Survey, rows: str, cols: str) -> list[list[int]]:
    """The joint reported counts [row option][col option] of two questions: a declared pair's
    counters (transposed if declared the other way round), else a tally of the released
    responses read one at a time."""
    if (rows, cols) in survey.crosstabs:
        return count_store.joint_counts(db, survey.survey_id, rows, cols)
    if (cols, rows) in survey.crosstabs:
        return [list(column) for column in zip(*count_store.joint_counts(db, survey.survey_id, cols,
                                                                   rows), strict=True)]
    table = [[0] * len(survey.question(cols).options)
             for _ in range(len(survey.question(rows).options))]
    through = release_store.last_release_number(db, survey.survey_id)
    for stored in response_store.stored_answers(db, survey.survey_id, through):
        answers = json.loads(stored)
        table[answers[rows]][answers[cols]] += 1
    return table


ASSUMES = ("The central epsilon holds only if the other responses in each release come from "
           "honest respondents. Whoever controls who may respond (the owner of an "
           "invitation-only survey, who mints its tokens; anyone, on a survey open to all; its "
           "owner, an admin or its relay key with a batch) can fill a release around one "
           "respondent with responses of their own, subtract those, and see that respondent's "
           "randomized report exactly. Against them each respondent has only the local "
           "epsilon: their best guess of an answer is right with probability at most "
           "alpha + (1 - alpha) / k, for k options equally likely beforehand. "
           "epsilon_whole_survey holds only against someone who sees the final export alone: "
           "whoever reads the results after each release sees every release by itself, and "
           "against them epsilon_per_release is what holds.")
OPEN_ANSWERS = ("No shuffle amplification: this survey has openly answered questions, and an open "
                "answer (an age, a region) can tell one response from the others of its "
                "release, so shuffling hides nothing. The central epsilon is the local one, "
                "and it covers the randomized answers only; the open answers are seen as given.")


def central(survey: Survey, smallest_release: int | None, released: int,
            delta_setting: float) -> dict:
    """What someone who sees only released batches can learn about one respondent: each report (all
    its answers, local epsilon eps0 = the survey's realized total) is shuffled among the others
    of its release (Feldman, McMillan and Talwar, FOCS 2021; shared/stats/shuffle.py). Per release
    with n = the smallest release so far (against whoever reads every release); over the whole
    survey (only against someone who sees the final export alone) with n = the released
    responses; each at most eps0, and eps0 itself before any release, or always with openly
    answered questions (OPEN_ANSWERS). One delta for both: min(CENTRAL_DELTA, 1 / (10 n))."""
    eps0 = survey.total_epsilon
    delta = min(delta_setting, 1 / (10 * released)) if released else delta_setting
    if survey.opened:
        return {"delta": delta, "epsilon_per_release": eps0, "epsilon_whole_survey": eps0,
                "assumes": OPEN_ANSWERS}
    return {"delta": delta,
            "epsilon_per_release": central_epsilon(eps0, smallest_release, delta)
            if smallest_release else eps0,
            "epsilon_whole_survey": central_epsilon(eps0, released, delta) if released else eps0,
            "assumes": ASSUMES}


@dataclass(frozen=True)
class Export:
    body: Iterator[str]  # read from the database only as it is iterated
    mimetype: str
    filename: str


MIMETYPES = {"csv": "text/csv", "jsonl": "application/jsonl"}


@dataclass(frozen=True)
class ExportOptions:
    kind: str  # "csv" or "jsonl"
    layout: str = "plain"  # a CSV's: EXPORT_FORMATS
    codes: bool = False  # the plain CSV holds option codes instead of labels


def export(db: Connection, caller: KeyRecord, survey_id: str, options: ExportOptions,
           central_delta: float) -> Export:
    """Every released response, one per row in a random order, streamed: the plain CSV with a
    header of question ids and option labels (or codes), the rr CSV and the JSON lines with the
    manifest, design parameters and central epsilon first. SurveyNotFound, Forbidden
    (access.check).

    The order is that of the responses' (bucket, id): 96 bits from the OS's CSPRNG drawn at
    release, the bucket being 8 of them, independent of the answers and of arrival. Sorting
    independent, identically distributed keys gives each of the n! orders the same chance
    (they are exchangeable; two equal keys have a chance below n^2 / 2^97), so the order is
    uniformly random, yet needs no shuffle of all rows in memory: the database reads a range of
    buckets at a time, sorted (store.stored_answers). It is the same in every export."""
    stored = access.check(db, caller, survey_id, access.READ)
    return Export(_export_body(db, stored, options, central_delta), MIMETYPES[options.kind],
                  f"{survey_id}.{options.kind}")


def _export_body(db: Connection, stored: survey_store.StoredSurvey, options: ExportOptions,
                 central_delta: float) -> Iterator[str]:
    """The export's pieces: the header and the number of the last release read in one
    snapshot, then the rows of those releases (store.stored_answers, in short reads that never
    hold up the scrub), so header and rows agree even while releases go on."""
    survey, survey_id = stored.survey, stored.survey.survey_id
    amplified, _, through = _released(db, survey, central_delta)
    answers = response_store.stored_answers(db, survey_id, through)
    if options.kind == "jsonl":
        yield from exports.to_jsonl(survey, stored.manifest, amplified, answers)
    elif options.layout == "rr":
        yield from exports.to_rr_csv(survey, stored.manifest, amplified, answers)
    else:
        yield from exports.to_csv(survey, answers, options.codes)


def _released(db: Connection, survey: Survey,
              central_delta: float) -> tuple[dict, int, int]:
    """In one snapshot: the central epsilon, how many responses are released, and the number
    of the last release (0 before the first)."""
    with db.snapshot():
        released = release_store.released_count(db, survey.survey_id)
        amplified = central(survey, release_store.smallest_release(db, survey.survey_id), released,
                            central_delta)
        return amplified, released, release_store.last_release_number(db, survey.survey_id)


def codebook(db: Connection, caller: KeyRecord, survey_id: str, central_delta: float) -> dict:
    """The codebook of the survey's exports (exports.codebook) as of now. SurveyNotFound,
    Forbidden (access.check)."""
    stored = access.check(db, caller, survey_id, access.READ)
    amplified, released, through = _released(db, stored.survey, central_delta)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return exports.codebook(stored.survey, amplified, released, through, now)
