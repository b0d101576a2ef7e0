// The respondent form: checks the survey's privacy parameters itself, randomizes every answer
// on this device, keeps the randomized answers and a ledger of the privacy budget this browser
// spent on this site, and sends only randomized answers (and those of questions answered
// openly, marked so, as given: web/disclosed.js), with fetch(). It runs only at the
// origin the survey's manifest is signed for: localStorage is per origin, so the same server
// reached at another address would otherwise get a second memory and a second budget. Or at
// one of its signed form_origins (format /9): a copy of this page hosted elsewhere (`ldp-survey
// survey form`, its manifest beside it in data-manifest-url), which calls the aggregator at
// the signed origin.
import {
  DEFAULT_IRR_ALPHA,
  DEFAULT_MAX_EPSILON,
  DEFAULT_MAX_LIFETIME_EPSILON,
  DEFAULT_MAX_TOTAL_EPSILON,
  compose,
  exceeds,
  posteriorMax,
  randomize,
  reportProbability,
  thresholds,
  uniformBeta,
} from "./randomizer.js";
import { WORDS as OPEN_WORDS } from "./disclosed.js";
import { schemeOf } from "./schemes.js";
import { _ } from "./words.js";

const root = document.getElementById("survey");
const surveyId = root.dataset.surveyId;
// The language the server chose for this page (from ?lang= or the browser's Accept-Language),
// one of the survey's: its texts are shown in it (inLanguage), the form's own words are _().
const language = root.dataset.language;
// A preview (`ldp-survey survey preview`, or a draft's preview on the dashboard) is this form
// exactly, randomizer and all, for a survey read from data-manifest-url, but it keeps nothing
// (its memory lives in this page only, as a first-time respondent's would start) and sends
// nothing.
const preview = root.dataset.preview === "true";
const storage = preview ? pageStorage() : localStorage;
const $ = (id) => document.getElementById(id);
// Where the aggregator's API is: this page's own origin, or the survey's signed one when this
// is a copy at one of its form_origins (set in main, once the manifest is read).
let api = "";
// Own properties only: a question id such as "constructor" is not inherited from Object.
const has = (object, key) => Object.hasOwn(object, key);

// What a respondent reads first, in everyday words: the same words as the Python client's
// INTRO, WHY_IT_MAY_DIFFER, bound_note and release_summary (ldpsurvey/client/notes.py).
// Epsilon, the limits and the exact chances go in #protection, collapsed.
const INTRO = () => _("Your device flips a coin for each answer and sometimes sends another " +
  "answer on purpose. No one can know your real answers. Researchers can still count how " +
  "common each one is.");
// INTRO for a survey that asks some questions openly (disclosed), as the client's OPEN_INTRO,
// and the bound's words when every question is open (ALL_OPEN).
const OPEN_INTRO = () => _("Your device flips a coin for each answer not marked \"Answered " +
  "openly\", and sometimes sends another answer on purpose. No one can know those real " +
  "answers, yet researchers can still count them. Open answers are stored as you give them.");
const ALL_OPEN = () => _("Nothing here is changed at random: every answer is stored as you " +
  "give it.");
const WHY_IT_MAY_DIFFER = () => _("Some answers may differ from what you chose. That is on " +
  "purpose: it keeps your real answers private.");

// epsilons: those of the randomized questions (an open answer has no bound).
function boundNote(epsilons) {
  if (!epsilons.length) return ALL_OPEN();
  const most = Math.max(...epsilons.map((epsilon) => posteriorMax(0.5, epsilon)));
  return _("From one sent answer, someone with no idea can be at most {chance} sure of your " +
    "real answer.", { chance: percent(most) });
}

function releaseSummary(releaseBatch = 1, anyOpen = false) {
  if (releaseBatch <= 1) return _("The researchers see your answers as soon as they arrive.");
  const mixed = _("The researchers see your answers only mixed with others, in groups of at " +
    "least {size} (the last can be smaller).", { size: releaseBatch });
  return anyOpen ? `${mixed} ${_("Answers you give openly can still point to you.")}` : mixed;
}

// The survey's texts in the page's language (its translations, format /8), for showing only:
// the manifest itself, whose options and units are part of what the survey asks
// (parametersOf), is what is answered. A yes/no question's options are the form's own words.
function inLanguage(manifest) {
  const words = manifest.translations?.[language];
  const questions = manifest.questions.map((question) => {
    const own = words?.questions?.[question.id] ?? {};
    const options = question.type === "yes_no" ? [_("No"), _("Yes")] : question.options;
    return { ...question, text: own.text ?? question.text, hint: own.hint ?? question.hint,
      options: own.options ?? options, unit: own.unit ?? question.unit };
  });
  return { ...manifest, title: words?.title ?? manifest.title, questions };
}

// --- what this browser keeps, for this site (localStorage is per origin) -----------------
//
// One item, STORE: {version: 3, keys: {key id: {surveys: {survey id: record}}},
//   concepts: {concept key: {answer, chargedBy}}}, a record being {answers, idempotencyKey,
// submitted, title, charged (epsilon, null until the first send attempt), estimated,
// parameters (the questions as first answered, see parametersOf)}. The lifetime limit and
// the concepts' permanent answers are this browser's on this site, whichever signing key asks,
// as the Python client's are the device's.
// Version 2 kept the concepts per key (see fromVersion2). Release 0.2 kept one item per survey,
// "ldp-survey/<survey id>" = {answers, idempotencyKey, submitted}: migrated on the first visit
// (see readStore).
// Every change re-reads the item and writes it back under the site's lock (withStore), so two
// tabs never write over each other's records or randomize one survey twice.
const STORE = "ldp-survey/ledger";
const LEGACY = "ldp-survey/";

// What a preview keeps instead of localStorage: the same calls, on a Map that the page takes
// with it when it closes.
function pageStorage() {
  const items = new Map();
  return {
    getItem: (name) => items.get(name) ?? null,
    setItem: (name, value) => items.set(name, String(value)),
    removeItem: (name) => items.delete(name),
    names: () => [...items.keys()],
  };
}

function storedNames() {
  return preview ? storage.names() : Object.keys(localStorage);
}

function newRecord() {
  return { answers: {}, idempotencyKey: null, submitted: false, title: null, charged: null,
    estimated: false };
}

function readStore(keyId) {
  let store;
  try {
    store = JSON.parse(storage.getItem(STORE));
  } catch {
    store = null; // a damaged store is replaced
  }
  if (store && store.version === 2 && typeof store.keys === "object") store = fromVersion2(store);
  if (!store || store.version !== 3 || typeof store.keys !== "object" ||
      typeof store.concepts !== "object") {
    store = { version: 3, keys: {}, concepts: {} };
  }
  const entry = keyEntry(store, keyId);
  // A survey a release-0.2 form sent is charged this page's per-submission limit, the most
  // it could send, until it is seen again; one never sent is charged nothing.
  for (const name of storedNames()) {
    if (!name.startsWith(LEGACY) || name === STORE) continue;
    const id = name.slice(LEGACY.length);
    try {
      const old = JSON.parse(storage.getItem(name));
      if (old && typeof old.answers === "object" && !has(entry.surveys, id)) {
        entry.surveys[id] = { ...newRecord(), answers: old.answers,
          idempotencyKey: old.idempotencyKey, submitted: Boolean(old.submitted),
          charged: old.submitted ? DEFAULT_MAX_TOTAL_EPSILON : null,
          estimated: Boolean(old.submitted) };
      }
    } catch {
      // a damaged memo is dropped
    }
    storage.removeItem(name);
  }
  return store;
}

// Version 2 -> 3, as the Python client's state.migrate_2: the concepts kept per key become
// this site's; of several draws of one concept the charged one of the smallest key id is kept
// (else that of the smallest key id), and if any draw was never charged, the concept is
// charged again when next sent (that survey may report the dropped draw).
function fromVersion2(old) {
  const store = { version: 3, keys: {}, concepts: {} };
  const draws = new Map();
  for (const keyId of Object.keys(old.keys).sort()) {
    const entry = old.keys[keyId] ?? {};
    store.keys[keyId] = { surveys: entry.surveys ?? {} };
    for (const [key, permanent] of Object.entries(entry.concepts ?? {})) {
      draws.set(key, [...(draws.get(key) ?? []), permanent]);
    }
  }
  for (const [key, list] of draws) {
    const kept = list.find((permanent) => permanent.chargedBy !== null) ?? list[0];
    const paid = list.every((permanent) => permanent.chargedBy !== null);
    store.concepts[key] = { answer: kept.answer, chargedBy: paid ? kept.chargedBy : null };
  }
  return store;
}

// Run change(store, entry) on a fresh read of the store, then save it, holding the site's
// lock (Web Locks) meanwhile where the browser has them.
function withStore(keyId, change) {
  const run = () => {
    const store = readStore(keyId);
    const result = change(store, keyEntry(store, keyId));
    saveStore(store);
    return result;
  };
  return navigator.locks && !preview ? navigator.locks.request(STORE, run) :
    Promise.resolve(run());
}

// What a survey asks, as the Python client's digest: a survey id whose questions or their
// parameters changed since this browser answered it is refused (answering it again would
// reveal more, with nothing charged).
function parametersOf(manifest) {
  return JSON.stringify(manifest.questions.map((q) => [q.id, q.options,
    ...schemeOf(q).parameters(), q.concept ?? null, q.irr_alpha ?? null]));
}

function changedSince(record, manifest) {
  if (!Object.keys(record.answers).length) return false;
  if (record.parameters) return record.parameters !== parametersOf(manifest);
  const ids = manifest.questions.map((q) => q.id).sort();  // kept by an earlier release
  return JSON.stringify(Object.keys(record.answers).sort()) !== JSON.stringify(ids);
}

function saveStore(store) {
  storage.setItem(STORE, JSON.stringify(store));
}

function keyEntry(store, keyId) {
  if (!has(store.keys, keyId)) store.keys[keyId] = { surveys: {} };
  return store.keys[keyId];
}

function spentHere(store) {
  let total = 0;
  for (const entry of Object.values(store.keys)) {
    for (const record of Object.values(entry.surveys)) total += record.charged ?? 0;
  }
  return total;
}

function conceptKey(question) {
  return JSON.stringify([question.concept, question.options, question.alpha, question.beta]);
}

// As the Python client's ledger.concept_status: "new", "reused" or "redrawn".
function conceptStatus(store, question) {
  if (has(store.concepts, conceptKey(question))) return "reused";
  const named = Object.keys(store.concepts).some((key) => JSON.parse(key)[0] === question.concept);
  return named ? "redrawn" : "new";
}

// As ledger.charge_for (what it adds to the device): nothing if charged before; else each
// question's epsilon, but a concept whose permanent answer was charged already (under any key,
// or earlier in this survey) costs nothing.
function chargeFor(store, record, manifest, epsilons) {
  if (record.charged !== null) return 0;
  const seen = new Set();
  let total = 0;
  for (const question of manifest.questions) {
    if (question.concept !== undefined) {
      const key = conceptKey(question);
      if (seen.has(key) || (has(store.concepts, key) && store.concepts[key].chargedBy !== null)) {
        continue;
      }
      seen.add(key);
    }
    total += epsilons[question.id];
  }
  return total;
}

// Padded bodies are a whole number of these many bytes: the same as the Python client's
// BODY_SIZE_CLASS (ldpsurvey/client/http.py).
const BODY_SIZE_CLASS = 256;
const utf8Length = (text) => new TextEncoder().encode(text).length;

// The size every response body to this survey is padded to: the largest possible body (every
// report its scheme's longest: for forced response the highest option index) rounded
// up to a whole BODY_SIZE_CLASS, so the size on the wire tells no answer apart.
function bodySize(manifest) {
  const largest = { answers: {} };
  for (const question of manifest.questions) {
    largest.answers[question.id] = schemeOf(question).largest();
  }
  return Math.ceil(utf8Length(JSON.stringify(largest)) / BODY_SIZE_CLASS) * BODY_SIZE_CLASS;
}

// `body` followed by spaces up to `size` bytes (JSON allows whitespace after its value).
function padded(body, size) {
  const length = utf8Length(body);
  if (length > size) throw new Error(`a body of ${length} bytes does not fit ${size}`);
  return body + " ".repeat(size - length);
}

function newIdempotencyKey() {
  const bytes = new Uint8Array(18);
  crypto.getRandomValues(bytes);
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_");
}

// --- what the respondent reads ---------------------------------------------------------

const STEPS = { check: () => _("Checking"), questions: () => _("Questions"),
  "true-review": () => _("Check your answers"), confirm: () => _("What will be sent"),
  thanks: () => _("Sent"), refused: () => _("Not answering") };
const PAGE_TITLE = document.title;

// Show one step, name it in the tab's title and, when `focus`, move focus to its heading
// (tabindex -1, so screen readers start there; no visual box, see style.css). On load focus
// stays at the top of the page, before the survey's title and description.
function show(id, { focus = true, title = STEPS[id]() } = {}) {
  for (const section of Object.keys(STEPS)) $(section).hidden = section !== id;
  $("protection").hidden = id === "check";
  document.title = `${title} · ${PAGE_TITLE}`;
  if (focus) $(id).querySelector("h2")?.focus();
}

// Text in which a number and its "%" never wrap apart.
function setText(node, text) {
  node.replaceChildren();
  for (const [index, part] of text.split(/(\d[\d.]* %)/).entries()) {
    node.append(index % 2 ? element("span", { class: "nowrap" }, part) : part);
  }
}

function percent(p) {
  return `${Math.round(100 * p)} %`;
}

function element(tag, attributes = {}, text = "") {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text) node.textContent = text;
  return node;
}

// What one report is, given the true answer: for a concept question both layers, composed.
function reported(question) {
  if (question.concept === undefined) return { alpha: question.alpha, beta: question.beta };
  const k = question.options.length;
  return compose(question.alpha, question.beta, question.irr_alpha ?? DEFAULT_IRR_ALPHA,
    uniformBeta(k));
}

// The same words as the Python client's notes (ldpsurvey/client/notes.py).
function note(question, epsilon, totalEpsilon) {
  const { alpha, beta } = reported(question);
  const own = schemeOf(question).note;
  let what;
  let belief;
  if (schemeOf(question).open) return own(percent); // nothing randomized: no bound to state
  if (own) {
    what = own(percent);
    belief = schemeOf(question).belief ?? _("you would give a particular answer");
  } else if (question.type === "yes_no") {
    const p = (i, j) => percent(reportProbability(alpha, beta, i, j));
    what = _("If you answer Yes, the server receives Yes with {yes_yes} probability and No " +
      "with {yes_no}; if you answer No, it receives No with {no_no} and Yes with {no_yes}.",
    { yes_yes: p(1, 1), yes_no: p(1, 0), no_no: p(0, 0), no_yes: p(0, 1) });
    belief = _("you would say Yes");
  } else {
    const kept = beta.map((_, j) => reportProbability(alpha, beta, j, j));
    const low = percent(Math.min(...kept));
    const high = percent(Math.max(...kept));
    const chance = low === high ? low :
      _("{low} to {high} (depending on the answer)", { low, high });
    what = _("The server receives your own answer with {chance} probability, and otherwise " +
      "one of the other options.", { chance });
    belief = _("you would give a particular answer");
  }
  return `${what} ${_("Someone who thought it {half} likely {belief} could be at most {one} " +
    "sure after seeing this answer; after seeing all your answers, at most {every}.",
  { half: percent(0.5), belief, one: percent(posteriorMax(0.5, epsilon)),
    every: percent(posteriorMax(0.5, totalEpsilon)) })}`;
}

// The same words as the Python client's concept_note.
function conceptNote(question, status) {
  const name = question.concept;
  if (status === "reused") {
    return _("You answered about '{name}' before with these same settings: a fresh " +
      "randomization of the permanent randomized answer your device keeps for it is sent, " +
      "which reveals nothing beyond that answer and costs no more privacy budget once it has " +
      "been charged.", { name });
  }
  const again = _("You answered about '{name}' before with other settings: that answer cannot " +
    "be reused, so a new one is drawn and charged.", { name });
  const redrawn = status === "redrawn" ? `${again} ` : "";
  return redrawn + _("This asks about '{name}', something that should not change: your device " +
    "randomizes your answer once into a permanent answer, charged once, and sends a fresh " +
    "randomization of it here and in later surveys that ask the same with the same settings, " +
    "so repeated answers neither add up nor match.", { name });
}

function renderQuestions(manifest, epsilons, total, statuses, record) {
  const container = $("question-list");
  container.replaceChildren();
  for (const question of manifest.questions) {
    const fieldset = element("fieldset", { class: "question", role: "radiogroup",
      "aria-labelledby": `q-${question.id}-text`, "data-question": question.id });
    fieldset.append(element("legend", { id: `q-${question.id}-text`, lang: language },
      question.text));
    if (question.hint !== undefined) {
      fieldset.append(element("p", { class: "hint", id: `q-${question.id}-about`,
        lang: language }, question.hint));
    }
    if (schemeOf(question).open) {
      fieldset.append(element("p", { class: "open-answer", id: `q-${question.id}-open` },
        OPEN_WORDS()));
    }
    const reuse = has(record.answers, question.id) || statuses[question.id] === "reused";
    if (reuse) {
      fieldset.append(element("p", { class: "notice" }, has(record.answers, question.id) ?
        _("You answered this before: that answer is used again.") :
        _("Nothing to answer: you answered this in an earlier survey, and that answer is " +
          "used.")));
    } else if (schemeOf(question).answer === "number") {
      // A group takes no aria-required (axe: aria-allowed-attr): the field itself does.
      fieldset.setAttribute("role", "group");
      fieldset.append(element("p", { class: "error", id: `q-${question.id}-error` }));
      const unit = question.unit ? ` (${question.unit})` : "";
      const whole = schemeOf(question).whole === true;
      const range = { min: question.min, max: question.max };
      const label = element("label", { class: "number", for: `q-${question.id}-value` },
        (whole ? _("A whole number from {min} to {max}", range) :
          _("A number from {min} to {max}", range)) + unit);
      const input = element("input", { type: "number", id: `q-${question.id}-value`,
        min: String(question.min), max: String(question.max), step: whole ? "1" : "any",
        inputmode: whole ? "numeric" : "decimal", "aria-required": "true", "data-number": "" });
      fieldset.append(label, input);
    } else if (schemeOf(question).answer === "many") {
      fieldset.setAttribute("role", "group");
      const limit = schemeOf(question).limit;
      // Shown, and read out, as a tick goes past the limit (see tooMany).
      fieldset.append(element("p", { class: "error", id: `q-${question.id}-error`,
        "aria-live": "polite" }));
      fieldset.append(element("p", { class: "hint", id: `q-${question.id}-hint` },
        limit === null ? _("Select all that apply (or none).") :
          _("Select all that apply, at most {limit} (or none).", { limit })));
      question.options.forEach((option, index) => {
        const label = element("label", { class: "option" });
        const input = element("input", { type: "checkbox", id: `q-${question.id}-${index}`,
          "data-option": String(index) });
        label.append(input, " ", element("span", { lang: language }, option));
        fieldset.append(label);
      });
    } else {
      fieldset.setAttribute("aria-required", "true");
      // Right under the question, so it shows on a phone with the question in view.
      fieldset.append(element("p", { class: "error", id: `q-${question.id}-error` }));
      question.options.forEach((option, index) => {
        const label = element("label", { class: "option" });
        // No name attribute: these inputs can never be posted by a form. One Tab stop per
        // question (a roving tabindex), as a native radio group has.
        const input = element("input", { type: "radio", id: `q-${question.id}-${index}`,
          "data-option": String(index), tabindex: index === 0 ? "0" : "-1" });
        label.append(input, " ", element("span", { lang: language }, option));
        fieldset.append(label);
      });
    }
    container.append(fieldset);
  }
  renderNotes(manifest, epsilons, total, statuses);
  // Radio buttons without a name: keep one choice per question, and arrow keys, by hand.
  // Checkboxes: at most the question's max_selected (the epsilon of `bits` is computed for it,
  // and more biases the shares of `padding` low): a tick past it stays, marked as an error at
  // the question until one is cleared, and Review refuses it meanwhile.
  // A number's error clears as it is typed, not on leaving the field: cleared on "change", the
  // message would vanish under a press of the Review button, moving it from under the pointer.
  container.addEventListener("input", (event) => {
    if (event.target.type === "number") markAnswered(event.target.closest("fieldset"));
  });
  container.addEventListener("change", (event) => {
    const group = event.target.closest("fieldset");
    if (event.target.type === "number") return;
    if (event.target.type === "checkbox") {
      const question = manifest.questions.find((q) => q.id === group.dataset.question);
      const problem = tooMany(question, group.querySelectorAll("input:checked").length);
      if (problem) markProblems([[question, problem]], { focus: false });
      else markAnswered(group);
      return;
    }
    for (const input of group.querySelectorAll("input")) {
      input.checked = input === event.target;
      input.tabIndex = input === event.target ? 0 : -1;
    }
    markAnswered(group);
  });
  container.addEventListener("keydown", (event) => {
    const step = { ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1 }[event.key];
    if (!step || event.target.type !== "radio") return;
    const inputs = [...event.target.closest("fieldset").querySelectorAll("input")];
    const next = inputs[(inputs.indexOf(event.target) + step + inputs.length) % inputs.length];
    next.focus();
    next.click();
    event.preventDefault();
  });
}

// The exact chances of each question, in #protection.
function renderNotes(manifest, epsilons, total, statuses) {
  const notes = $("question-notes");
  notes.replaceChildren();
  for (const question of manifest.questions) {
    let text = note(question, epsilons[question.id], total);
    if (has(statuses, question.id)) text += ` ${conceptNote(question, statuses[question.id])}`;
    const privacy = element("p", { class: "privacy-note", id: `q-${question.id}-note` });
    privacy.append(element("strong", { lang: language }, question.text), " ");
    const rest = element("span");
    setText(rest, text);
    privacy.append(rest);
    notes.append(privacy);
  }
}

// Errors at the question: each [question, message] gets its message beside the question, tied
// to it (and to a number's field) with aria-describedby and aria-invalid; with `focus`, focus
// goes to the first, scrolled into view.
function markProblems(problems, { focus = true } = {}) {
  for (const [question, message] of problems) {
    const group = fieldsetOf(question);
    const field = group.querySelector("input[data-number]");
    for (const node of field ? [group, field] : [group]) {
      node.setAttribute("aria-invalid", "true");
      node.setAttribute("aria-describedby", `q-${question.id}-error`);
    }
    $(`q-${question.id}-error`).textContent = message;
  }
  if (focus) {
    const first = fieldsetOf(problems[0][0]);
    first.querySelector("input").focus({ preventScroll: true });
    first.scrollIntoView({ block: "start" });
  }
  stillMissing();
}

function markAnswered(group) {
  for (const node of [group, group.querySelector("input[data-number]")]) {
    node?.removeAttribute("aria-invalid");
    node?.removeAttribute("aria-describedby");
  }
  group.querySelector("p.error").textContent = "";
  stillMissing();
}

// What is wrong with `count` ticks of a check-all-that-apply question, or null.
function tooMany(question, count) {
  const limit = schemeOf(question).limit;
  return limit !== null && count > limit ? _("Please select at most {limit}: you selected " +
    "{count}. Clear one to go on.", { limit, count }) : null;
}

// What is wrong with a number field's text, or null (the scheme takes it).
function numberProblem(question, text) {
  const scheme = schemeOf(question);
  const value = text.trim() === "" ? NaN : Number(text);
  const range = { min: question.min, max: question.max };
  if (Number.isFinite(value) && value < question.min) {
    return scheme.whole ? _("Too low: enter a whole number from {min} to {max}.", range) :
      _("Too low: enter a number from {min} to {max}.", range);
  }
  if (Number.isFinite(value) && value > question.max) {
    return scheme.whole ? _("Too high: enter a whole number from {min} to {max}.", range) :
      _("Too high: enter a number from {min} to {max}.", range);
  }
  if (Number.isFinite(value) && scheme.accepts(value)) return null;
  return scheme.whole ? _("Please enter a whole number from {min} to {max}.", range) :
    _("Please enter a number from {min} to {max}.", range);
}

// Beside the Review button: how many questions still need an answer or a fix, if any (an
// empty one, or a number out of range).
function stillMissing() {
  const left = document.querySelectorAll("#question-list fieldset[aria-invalid]").length;
  $("review-error").textContent = !left ? "" : left === 1 ? _("Please check one question.") :
    _("Please check {count} questions.", { count: left });
}

function fieldsetOf(question) {
  return document.querySelector(`fieldset[data-question="${CSS.escape(question.id)}"]`);
}

// The true answers to the questions that need one (an object without a prototype), and what
// is wrong with the others, as [question, message] pairs: unanswered, a number outside [min,
// max] (never clamped unseen), more ticks than max_selected.
function chosenAnswers(questions) {
  const answers = Object.create(null);
  const problems = [];
  for (const question of questions) {
    const checked = [...fieldsetOf(question).querySelectorAll("input:checked")]
      .map((input) => Number(input.dataset.option));
    const kind = schemeOf(question).answer;
    let problem = null;
    if (kind === "number") {
      const text = fieldsetOf(question).querySelector("input[data-number]").value;
      problem = numberProblem(question, text);
      if (!problem) answers[question.id] = Number(text);
    } else if (kind === "many") {
      problem = tooMany(question, checked.length);
      answers[question.id] = checked;
    } else if (checked.length) answers[question.id] = checked[0];
    else problem = _("Please choose an answer.");
    if (problem) problems.push([question, problem]);
  }
  return { answers, problems };
}

// The true answers, read back on this device before anything is randomized, each with a
// button that returns to its question.
function showReview(questions, answers) {
  const list = $("true-list");
  list.replaceChildren();
  for (const question of questions) {
    const change = element("button", { type: "button", class: "link",
      "aria-label": _("Change your answer to: {question}", { question: question.text }) },
    _("Change"));
    change.addEventListener("click", () => {
      show("questions", { focus: false });
      const group = fieldsetOf(question);
      (group.querySelector("input:checked") ?? group.querySelector("input")).focus();
    });
    const item = element("li");
    item.append(element("span", { class: "question-text", lang: language }, question.text),
      element("strong", {}, schemeOf(question).truth(answers[question.id])), change);
    list.append(item);
  }
  show("true-review");
}

// The same words as the Python client's release_note (ldpsurvey/client/notes.py). A manifest
// of format /1 has no release_batch: its server released each submission at once.
function releaseNote(releaseBatch = 1) {
  if (releaseBatch <= 1) {
    return _("The server shows each submission to the researchers as soon as it arrives: it " +
      "does not pool them, so results can change with yours alone.");
  }
  return _("The server promises to hold your answers until at least {size} submissions have " +
    "arrived and then release them all together in a random order, so that the researchers, " +
    "and anyone they show results to, cannot tell when you answered or pick out your answers " +
    "by when they arrived. The last release, when the survey closes, can be smaller. This is " +
    "the server's promise: your device cannot check it.", { size: releaseBatch });
}

function againNote(record) {
  if (record.submitted) {
    return _("You already sent this survey from this browser, and it arrived. These are the " +
      "answers that were sent. There is nothing more to send.");
  }
  if (record.charged !== null) {
    return _("You tried to send this survey before, but it may not have arrived. The same " +
      "answers are sent, and counted once.");
  }
  return _("You answered this survey here before but did not send it. The same answers are " +
    "used, so nothing new is revealed.");
}

function showConfirm(manifest, record, total, again, focus = true) {
  const payload = { answers: {} };
  const list = $("sent-list");
  const codes = $("sent-codes");
  list.replaceChildren();
  codes.replaceChildren();
  for (const question of manifest.questions) {
    const report = record.answers[question.id];
    const scheme = schemeOf(question);
    payload.answers[question.id] = report;
    // In plain words here; exactly, as the server reads it, in #protection.
    for (const [items, words] of [[list, scheme.plain ?? scheme.shown], [codes, scheme.shown]]) {
      const item = element("li");
      item.append(element("span", { lang: language }, question.text), ` → ${words(report)}`);
      items.append(item);
    }
  }
  $("sent-details").hidden = false;
  $("payload").textContent = JSON.stringify(payload);
  $("body-details").hidden = false;
  $("why-differ").textContent = WHY_IT_MAY_DIFFER();
  $("release-summary").textContent = releaseSummary(manifest.release_batch,
    manifest.questions.some((q) => q.disclosed === true));
  setText($("total-note"), _("Together these answers have epsilon {epsilon}: someone who " +
    "thought something about you {half} likely could be at most {chance} sure after seeing " +
    "all of them.", { epsilon: total.toFixed(3), half: percent(0.5),
    chance: percent(posteriorMax(0.5, total)) }));
  $("release-note").textContent = releaseNote(manifest.release_batch);
  $("again").textContent = again ? againNote(record) : "";
  $("again").hidden = !again;
  const sent = again && record.submitted; // already sent: shown, never sent again
  $("confirm-title").textContent = sent ? _("These randomized answers were sent") :
    _("This is exactly what will be sent");
  $("send").hidden = sent;
  $("final-note").hidden = sent;
  show("confirm", { focus, title: sent ? _("Already sent") : STEPS.confirm() });
}

function ledgerNote(spent, cost) {
  return _("This browser has sent this site answers with epsilon {spent} in all, whichever " +
    "researchers' key asked, of this page's lifetime limit of {limit} (8 ln 3) for this " +
    "browser on this site; sending this survey adds {cost}.", { spent: spent.toFixed(3),
    limit: DEFAULT_MAX_LIFETIME_EPSILON.toFixed(3), cost: cost.toFixed(3) });
}

// The refusal of a page opened at another origin than the survey's signed one or its signed
// form_origins (a manifest of format /4 or earlier names none), or null.
function wrongOrigin(manifest) {
  if (manifest.origin === undefined || manifest.origin === location.origin) return null;
  if ((manifest.form_origins ?? []).includes(location.origin)) return null;
  const where = { signed: manifest.origin, here: location.origin };
  return [_("Please answer this survey at {signed}. Nothing was sent.", where),
    _("This survey is signed for {signed}, but this page was opened at {here}. This browser " +
      "keeps its memory and privacy ledger per address, so answering here would start them " +
      "afresh. Nothing was randomized or sent.", where)];
}

// Refuse to answer: `plain` in everyday words, and what exactly went wrong, if anything more
// needs saying, in #protection.
const TOO_MUCH_AT_ONCE = () => _("This survey asks in a way that could reveal too much about " +
  "you, so this page does not answer it. Nothing was sent.");
const TOO_MUCH_IN_ALL = () => _("This browser has already answered many surveys on this site. " +
  "One more could reveal too much about you, so this page does not send it. Nothing was sent.");

function refuse(plain, detail = "") {
  $("refused-text").textContent = plain;
  $("refused-detail").textContent = detail;
  $("refused-detail").hidden = !detail;
  show("refused");
}

// --- answering ---------------------------------------------------------------------------

class Answering {
  constructor(manifest, found, layers, epsilons, total, token) {
    Object.assign(this, { manifest, found, layers, epsilons, total, token });
  }

  // The answering of this survey, or null if it changed since this browser answered it.
  static async open(manifest, found, layers, epsilons, total, token) {
    const answering = new Answering(manifest, found, layers, epsilons, total, token);
    const changed = await answering.update(() => {
      const { record } = answering;
      if (changedSince(record, manifest)) return true;
      if (Object.keys(record.answers).length) record.parameters = parametersOf(manifest);
      if (record.estimated) { // seen again: its exact epsilon replaces the estimate
        Object.assign(record, { charged: total, estimated: false, title: manifest.title });
      }
      return false;
    });
    return changed ? null : answering;
  }

  // Run change() on fresh copies of the store, this key's entry and this survey's record
  // (this.store, this.entry, this.record), under the lock; save them after.
  update(change) {
    return withStore(this.manifest.key_id, (store, entry) => {
      if (!has(entry.surveys, surveyId)) entry.surveys[surveyId] = newRecord();
      Object.assign(this, { store, entry, record: entry.surveys[surveyId] });
      return change();
    });
  }

  cost() {
    return chargeFor(this.store, this.record, this.manifest, this.epsilons);
  }

  overBudget() {
    const cost = this.cost();
    const spent = spentHere(this.store);
    if (!cost || !exceeds(spent + cost, DEFAULT_MAX_LIFETIME_EPSILON)) return null;
    return [TOO_MUCH_IN_ALL(), _("This survey would add epsilon {cost} to the {spent} this " +
      "browser has already sent this site, {total} in all, above this page's lifetime limit " +
      "of {limit} for this browser on this site, whichever researchers' key asks: together " +
      "your answers could make a guess about you {times} times likelier. Nothing was sent.",
    { cost: cost.toFixed(3), spent: spent.toFixed(3), total: (spent + cost).toFixed(3),
      limit: DEFAULT_MAX_LIFETIME_EPSILON.toFixed(3), times: Math.exp(spent + cost).toFixed(0) })];
  }

  statuses() {
    const statuses = Object.create(null);
    for (const question of this.manifest.questions) {
      if (question.concept !== undefined) statuses[question.id] = conceptStatus(this.store, question);
    }
    return statuses;
  }

  // Randomize every question not randomized before (here or in another tab), once, and keep
  // only the results.
  randomizeAll(answers) {
    return this.update(() => this.randomizeNew(answers));
  }

  randomizeNew(answers) {
    for (const question of this.manifest.questions) {
      if (has(this.record.answers, question.id)) continue;
      if (question.concept === undefined) {
        this.record.answers[question.id] = this.found[question.id].randomize(answers[question.id]);
        continue;
      }
      const key = conceptKey(question);
      if (!has(this.store.concepts, key)) {
        this.store.concepts[key] = {
          answer: this.found[question.id].randomize(answers[question.id]), chargedBy: null };
      }
      this.record.answers[question.id] = randomize(this.store.concepts[key].answer,
        this.layers[question.id]);
    }
    this.record.idempotencyKey = this.record.idempotencyKey || newIdempotencyKey();
    this.record.title = this.manifest.title;
    this.record.parameters = parametersOf(this.manifest);
  }

  // Charged before the first attempt: a send never acknowledged still counts. Inside update.
  charge() {
    if (this.record.charged !== null) return;
    this.record.charged = this.cost();
    for (const question of this.manifest.questions) {
      const key = question.concept === undefined ? null : conceptKey(question);
      if (key && has(this.store.concepts, key) && this.store.concepts[key].chargedBy === null) {
        this.store.concepts[key].chargedBy = surveyId;
      }
    }
  }

  async send() {
    const refusal = await this.update(() => {  // checked and charged in one locked change
      const problem = this.overBudget();
      if (!problem) this.charge();
      return problem;
    });
    if (refusal) return refuse(...refusal);
    const headers = { "Content-Type": "application/json",
      "Idempotency-Key": this.record.idempotencyKey };
    if (this.token) headers["Survey-Token"] = this.token;
    if (preview) {  // the request body is shown above; it goes nowhere
      await this.update(() => { this.record.submitted = true; });
      show("thanks");
      return;
    }
    $("send").disabled = true;
    $("send-error").textContent = "";
    try {
      const response = await fetch(`${api}/api/surveys/${encodeURIComponent(surveyId)}/responses`, {
        method: "POST", headers, body: padded($("payload").textContent, bodySize(this.manifest)),
        credentials: "omit",
      });
      if (response.status === 201) {
        await this.update(() => { this.record.submitted = true; });
        setText($("ledger-note"), ledgerNote(spentHere(this.store), 0));
        show("thanks");
        return;
      }
      const problem = await response.json().catch(() => ({}));
      const detail = problem.detail || _("the server answered {status}",
        { status: response.status });
      $("send-error").textContent = problem.error === "invalid_token" ?
        _("Not sent: this invitation link is unknown or was already used. Each link answers " +
          "once. If you answered with it before, that answer was counted.") :
        _("Not sent: {problem}.", { problem: detail });
    } catch {
      $("send-error").textContent = _("Not sent: the server could not be reached. Your " +
        "answers are kept. Press Send again, or come back later: they are counted once.");
    } finally {
      $("send").disabled = false;
    }
  }
}

// The language switcher's links keep what follows # (an invitation's token) in the address.
for (const link of document.querySelectorAll("#languages a")) link.hash = location.hash;

async function main() {
  const response = await fetch(root.dataset.manifestUrl ??
    `/api/surveys/${encodeURIComponent(surveyId)}`);
  if (!response.ok) return refuse(_("This survey could not be loaded. Nothing was sent."));
  const bytes = await response.arrayBuffer();
  // Which manifest this form answers, for the extension (extension/check.js) to compare with
  // the one it checked: sha384-<base64>, as Subresource Integrity writes digests.
  root.dataset.manifestDigest = "sha384-" + btoa(String.fromCharCode(
    ...new Uint8Array(await crypto.subtle.digest("SHA-384", bytes))));
  const manifest = JSON.parse(new TextDecoder().decode(bytes));
  if (manifest.survey_id !== surveyId) {  // answers go to the survey this page names
    return refuse(_("This survey could not be loaded. Nothing was sent."));
  }
  const worded = inLanguage(manifest); // what is shown; `manifest` is what is answered
  const elsewhere = wrongOrigin(manifest);
  if (elsewhere) return refuse(...elsewhere);
  if (manifest.origin !== undefined && manifest.origin !== location.origin) api = manifest.origin;
  // Recompute epsilon from alpha and beta (never trust a stated epsilon).
  const epsilons = {};
  const found = {};
  const layers = {};
  try {
    for (const question of manifest.questions) {
      found[question.id] = schemeOf(question);
      epsilons[question.id] = found[question.id].epsilon;
      if (question.concept !== undefined) {
        layers[question.id] = thresholds(question.irr_alpha ?? DEFAULT_IRR_ALPHA,
          uniformBeta(question.options.length));
      }
    }
  } catch (error) {
    return refuse(_("This survey's settings would not protect your answers, so this page " +
      "does not answer it. Nothing was sent."), `${error.message}.`);
  }
  const total = Object.values(epsilons).reduce((a, b) => a + b, 0);
  for (const question of worded.questions) {
    if (exceeds(epsilons[question.id], DEFAULT_MAX_EPSILON)) {
      return refuse(TOO_MUCH_AT_ONCE(), _("The question \"{question}\" asks for epsilon " +
        "{epsilon}, above this page's limit of {limit} per question: one answer could make a " +
        "guess about you {times} times likelier. Nothing was sent.", { question: question.text,
        epsilon: epsilons[question.id].toFixed(3), limit: DEFAULT_MAX_EPSILON.toFixed(3),
        times: Math.exp(epsilons[question.id]).toFixed(2) }));
    }
  }
  if (exceeds(total, DEFAULT_MAX_TOTAL_EPSILON)) {
    return refuse(TOO_MUCH_AT_ONCE(), _("This survey's questions together ask for epsilon " +
      "{epsilon}, above this page's limit of {limit} per submission. Nothing was sent.",
    { epsilon: total.toFixed(3), limit: DEFAULT_MAX_TOTAL_EPSILON.toFixed(3) }));
  }
  const status = preview ? { status: "open" } :
    await fetch(`${api}/api/surveys/${encodeURIComponent(surveyId)}/status`)
      .then((r) => r.json()).catch(() => ({}));
  if (status.status !== "open") {
    return refuse(_("This survey is closed: it takes no more answers. Nothing was sent."));
  }
  const token = new URLSearchParams(location.hash.slice(1)).get("t");
  if (manifest.invitation_only && !token && !preview) {  // a preview shows the invited form
    return refuse(_("This survey is by invitation only: open the link from your invitation."));
  }
  const answering = await Answering.open(manifest, found, layers, epsilons, total, token);
  if (!answering) {
    return refuse(_("This survey changed since you answered it here. Answering again could " +
      "reveal more about you, so this page does not. Nothing was sent."),
    _("It now asks other questions, or the same with other settings, under the same address."));
  }
  const refusal = answering.overBudget();
  if (refusal) return refuse(...refusal);
  setText($("ledger-note"), ledgerNote(spentHere(answering.store), answering.cost()));
  $("send").addEventListener("click", () => answering.send());
  if (manifest.questions.every((q) => has(answering.record.answers, q.id))) {
    return showConfirm(worded, answering.record, total, true, false);
  }
  const statuses = answering.statuses();
  renderQuestions(worded, epsilons, total, statuses, answering.record);
  const needed = worded.questions.filter((q) => !has(answering.record.answers, q.id) &&
    statuses[q.id] !== "reused");
  let chosen = null; // the true answers, on this page only, until they are randomized
  $("review").addEventListener("click", () => {
    const { answers, problems } = chosenAnswers(needed);
    if (problems.length) return markProblems(problems);
    $("review-error").textContent = "";
    chosen = answers;
    showReview(needed, answers);
  });
  $("randomize").addEventListener("click", async () => {
    await answering.randomizeAll(chosen); // randomized once; only the results are kept
    chosen = null;
    for (const input of document.querySelectorAll("#question-list input")) {
      input.checked = false; // the true answers leave the page
      input.disabled = true;
    }
    $("true-list").replaceChildren();
    showConfirm(worded, answering.record, total, false);
  });
  const open = manifest.questions.some((q) => found[q.id].open);
  $("intro").textContent = open ? OPEN_INTRO() : INTRO();
  setText($("bound"), boundNote(manifest.questions.filter((q) => !found[q.id].open)
    .map((q) => epsilons[q.id])));
  if (open && !preview) {  // as the client's sent_note
    $("thanks-text").textContent = _("Your answers were sent. Your real answers never left " +
      "your device, except those you gave openly.");
  }
  show("questions", { focus: false });
}

main();
