// The respondent form: checks the survey's privacy parameters itself, randomizes every answer
// on this device, remembers the randomized answers, and sends only those, with fetch().
import {
  DEFAULT_MAX_EPSILON,
  DEFAULT_MAX_TOTAL_EPSILON,
  exceeds,
  posteriorMax,
  randomize,
  realizedEpsilon,
  reportProbability,
  thresholds,
} from "./randomizer.js";

const root = document.getElementById("survey");
const surveyId = root.dataset.surveyId;
const memoKey = `ldp-survey/${surveyId}`;
const $ = (id) => document.getElementById(id);

function show(id) {
  for (const section of ["check", "questions", "confirm", "thanks", "refused"]) {
    $(section).hidden = section !== id;
  }
  $(id).focus?.();
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

function loadMemo() {
  try {
    const memo = JSON.parse(localStorage.getItem(memoKey));
    if (memo && typeof memo.answers === "object") return memo;
  } catch {
    // a damaged memo is replaced
  }
  return { answers: {}, idempotencyKey: null, submitted: false };
}

function saveMemo(memo) {
  localStorage.setItem(memoKey, JSON.stringify(memo));
}

function newIdempotencyKey() {
  const bytes = new Uint8Array(18);
  crypto.getRandomValues(bytes);
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_");
}

// The same words as the Python client's notes (ldpsurvey/client/notes.py).
function note(question, epsilon, totalEpsilon) {
  const { alpha, beta } = question;
  let what;
  let belief;
  if (question.type === "yes_no") {
    const p = (i, j) => percent(reportProbability(alpha, beta, i, j));
    what = `If you answer Yes, the server receives Yes with ${p(1, 1)} probability and No with ` +
      `${p(1, 0)}; if you answer No, it receives No with ${p(0, 0)} and Yes with ${p(0, 1)}.`;
    belief = "you would say Yes";
  } else {
    const kept = beta.map((_, j) => reportProbability(alpha, beta, j, j));
    const low = percent(Math.min(...kept));
    const high = percent(Math.max(...kept));
    const chance = low === high ? low : `${low} to ${high} (depending on the answer)`;
    what = `The server receives your own answer with ${chance} probability, and otherwise ` +
      "one of the other options.";
    belief = "you would give a particular answer";
  }
  return `${what} Someone who thought it 50 % likely ${belief} could be at most ` +
    `${percent(posteriorMax(0.5, epsilon))} sure after seeing this answer; after seeing all ` +
    `your answers, at most ${percent(posteriorMax(0.5, totalEpsilon))}.`;
}

function renderQuestions(manifest, epsilons, total) {
  const container = $("question-list");
  container.replaceChildren();
  for (const question of manifest.questions) {
    const fieldset = element("fieldset", { class: "question", role: "radiogroup",
      "aria-labelledby": `q-${question.id}-text`, "aria-describedby": `q-${question.id}-note`,
      "data-question": question.id });
    fieldset.append(element("legend", { id: `q-${question.id}-text` }, question.text));
    question.options.forEach((option, index) => {
      const label = element("label", { class: "option" });
      // No name attribute: these inputs can never be posted by a form.
      const input = element("input", { type: "radio", id: `q-${question.id}-${index}`,
        "data-option": String(index) });
      label.append(input, document.createTextNode(` ${option}`));
      fieldset.append(label);
    });
    fieldset.append(element("p", { class: "privacy-note", id: `q-${question.id}-note` },
      note(question, epsilons[question.id], total)));
    container.append(fieldset);
  }
  // Radio buttons without a name: keep one choice per question, and arrow keys, by hand.
  container.addEventListener("change", (event) => {
    const group = event.target.closest("fieldset");
    for (const input of group.querySelectorAll("input")) input.checked = input === event.target;
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

function chosenAnswers(manifest) {
  const answers = {};
  for (const question of manifest.questions) {
    const checked = document.querySelector(`fieldset[data-question="${question.id}"] input:checked`);
    if (!checked) return { missing: question };
    answers[question.id] = Number(checked.dataset.option);
  }
  return { answers };
}

// The same words as the Python client's release_note (ldpsurvey/client/notes.py). A manifest
// of format /1 has no release_batch: its server released each submission at once.
function releaseNote(releaseBatch = 1) {
  if (releaseBatch <= 1) {
    return "The server shows each submission to the researchers as soon as it arrives: it " +
      "does not pool them, so results can change with yours alone.";
  }
  return `The server promises to hold your answers until at least ${releaseBatch} ` +
    "submissions have arrived and then release them all together in a random order, so " +
    "that the researchers, and anyone they show results to, cannot tell when you " +
    "answered or pick out your answers by when they arrived. The last release, when the " +
    "survey closes, can be smaller. This is the server's promise: your device cannot " +
    "check it.";
}

function showConfirm(manifest, memo, total, again) {
  const payload = { answers: {} };
  const list = $("sent-list");
  list.replaceChildren();
  for (const question of manifest.questions) {
    const index = memo.answers[question.id];
    payload.answers[question.id] = index;
    list.append(element("li", {}, `${question.text} → ${question.options[index]}`));
  }
  $("payload").textContent = JSON.stringify(payload);
  $("total-note").textContent = `Together these answers have epsilon ${total.toFixed(3)}: ` +
    "someone who thought something about you 50 % likely could be at most " +
    `${percent(posteriorMax(0.5, total))} sure after seeing all of them.`;
  $("release-note").textContent = releaseNote(manifest.release_batch);
  $("again").hidden = !again;
  show("confirm");
}

async function send(memo, token) {
  const headers = { "Content-Type": "application/json", "Idempotency-Key": memo.idempotencyKey };
  if (token) headers["Survey-Token"] = token;
  $("send").disabled = true;
  $("send-error").textContent = "";
  try {
    const response = await fetch(`/api/surveys/${encodeURIComponent(surveyId)}/responses`, {
      method: "POST", headers, body: $("payload").textContent, credentials: "omit",
    });
    if (response.status === 201) {
      memo.submitted = true;
      saveMemo(memo);
      show("thanks");
      return;
    }
    const problem = await response.json().catch(() => ({}));
    $("send-error").textContent = `Not sent: ${problem.detail || `the server answered ${response.status}`}.`;
  } catch {
    $("send-error").textContent = "Not sent: the server could not be reached. Your randomized " +
      "answers are kept; try again.";
  } finally {
    $("send").disabled = false;
  }
}

function refuse(message) {
  $("refused-text").textContent = message;
  show("refused");
}

async function main() {
  const response = await fetch(`/api/surveys/${encodeURIComponent(surveyId)}`);
  if (!response.ok) return refuse("This survey could not be loaded.");
  const manifest = JSON.parse(await response.text());
  // Recompute epsilon from alpha and beta (never trust a stated epsilon).
  const epsilons = {};
  const found = {};
  try {
    for (const question of manifest.questions) {
      found[question.id] = thresholds(question.alpha, question.beta);
      epsilons[question.id] = realizedEpsilon(found[question.id]);
    }
  } catch (error) {
    return refuse(`This survey's settings give no privacy (${error.message}); nothing was sent.`);
  }
  const total = Object.values(epsilons).reduce((a, b) => a + b, 0);
  for (const question of manifest.questions) {
    if (exceeds(epsilons[question.id], DEFAULT_MAX_EPSILON)) {
      return refuse(`The question "${question.text}" asks for epsilon ` +
        `${epsilons[question.id].toFixed(3)}, above this page's limit of ` +
        `${DEFAULT_MAX_EPSILON.toFixed(3)} per question: one answer could make a guess about ` +
        `you ${Math.exp(epsilons[question.id]).toFixed(2)} times likelier. Nothing was sent.`);
    }
  }
  if (exceeds(total, DEFAULT_MAX_TOTAL_EPSILON)) {
    return refuse(`This survey's questions together ask for epsilon ${total.toFixed(3)}, ` +
      `above this page's limit of ${DEFAULT_MAX_TOTAL_EPSILON.toFixed(3)} per submission. ` +
      "Nothing was sent.");
  }
  const token = new URLSearchParams(location.hash.slice(1)).get("t");
  if (manifest.invitation_only && !token) {
    return refuse("This survey is by invitation only: open the link from your invitation.");
  }
  const memo = loadMemo();
  $("send").addEventListener("click", () => send(memo, token));
  const complete = manifest.questions.every((q) => q.id in memo.answers);
  if (complete) return showConfirm(manifest, memo, total, true);
  renderQuestions(manifest, epsilons, total);
  $("review").addEventListener("click", () => {
    const { answers, missing } = chosenAnswers(manifest);
    if (missing) {
      $("review-error").textContent = `Please answer: ${missing.text}`;
      return;
    }
    $("review-error").textContent = "";
    // Randomize once, here, and remember only the randomized answers.
    for (const question of manifest.questions) {
      if (!(question.id in memo.answers)) {
        memo.answers[question.id] = randomize(answers[question.id], found[question.id]);
      }
    }
    memo.idempotencyKey = memo.idempotencyKey || newIdempotencyKey();
    saveMemo(memo);
    for (const input of document.querySelectorAll("#question-list input")) {
      input.checked = false; // the true answers leave the page
      input.disabled = true;
    }
    showConfirm(manifest, memo, total, false);
  });
  show("questions");
}

main();
