// ldp-survey form check (Manifest V3 content script). On a page at /s/<survey id>, before
// anything can be sent: fetch the survey's signed manifest and the aggregator's key, verify
// the Ed25519 signature, list every script, module and stylesheet the page loaded (its tags
// and the browser's resource timing, which holds every imported module too), hash each with
// SHA-384 and compare it with the digest the survey signs (manifest field `form`, format /8)
// and the digest of the published ldp-survey release this extension ships (release.js,
// globalThis.LDP_RELEASE). The verdict is a banner at the top of the page (role "status" when
// everything matches, "alert" when not); until it is known, and for good when anything
// differs, the form's Randomize and Send buttons do nothing. On a copy of the form hosted
// elsewhere (`ldp-survey survey form`: its page reads the manifest from beside it,
// data-manifest-url), the manifest, its signature and the key come from beside the page too
// (manifest.sig, key.json), and the survey must list this site in its signed form_origins; a
// page that could make the form read another manifest (a <base> element, a second form
// element, another manifest's name) is refused. The verdict names where answers go and the
// key that signed the survey, for a respondent to compare with what the researchers published.
"use strict";

const BLOCKED = "#send, #randomize";
let blocked = true;  // until the check passes

// A capture listener on the window runs before the page's own listeners on the buttons.
window.addEventListener("click", (event) => {
  if (blocked && event.target instanceof Element && event.target.closest(BLOCKED)) {
    event.stopImmediatePropagation();
    event.preventDefault();
  }
}, true);

function sri(buffer) {
  return crypto.subtle.digest("SHA-384", buffer).then((digest) =>
    "sha384-" + btoa(String.fromCharCode(...new Uint8Array(digest))));
}

function fromBase64(text) {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

async function fetchBytes(url) {
  const response = await fetch(url, { cache: "force-cache", credentials: "omit" });
  if (!response.ok) throw new Error(`${url} answered ${response.status}`);
  return response.arrayBuffer();
}

// The integrity each file of the page was declared with, by absolute URL: its tag's attribute
// and the import map's entry, every one (the browser refuses bytes that do not match them, so a
// file whose every declaration is its signed digest ran as signed, whatever a later fetch of it
// returns).
function declaredIntegrity() {
  const declared = new Map();
  const add = (url, value) => {
    const absolute = new URL(url, document.baseURI).href;
    declared.set(absolute, [...(declared.get(absolute) ?? []), value]);
  };
  for (const element of document.querySelectorAll(
    "script[src][integrity], link[rel~=stylesheet][integrity], link[rel~=modulepreload][integrity]")) {
    add(element.getAttribute("src") ?? element.getAttribute("href"),
      element.getAttribute("integrity"));
  }
  for (const map of document.querySelectorAll('script[type="importmap"]')) {
    const { integrity = {} } = JSON.parse(map.textContent);
    for (const [url, value] of Object.entries(integrity)) add(url, value);
  }
  return declared;
}

// Every script, module and stylesheet the page loaded or links, by absolute URL.
function loadedFiles() {
  const urls = new Set();
  for (const element of document.querySelectorAll(
    "script[src], link[rel~=stylesheet][href], link[rel~=modulepreload][href]")) {
    urls.add(new URL(element.getAttribute("src") ?? element.getAttribute("href"),
      document.baseURI).href);
  }
  for (const entry of performance.getEntriesByType("resource")) {
    const path = new URL(entry.name).pathname;
    if (/\.(m?js|css)$/.test(path)) urls.add(entry.name);
  }
  return [...urls];
}

// Where the survey's signed manifest, its signature and the key are: the aggregator's API, or
// beside a copy's page (resolved as the form's own fetch resolves them: against the page's base
// address, which pageProblems has checked is the page's own).
function sources(surveyId, copy) {
  if (copy) {
    const beside = (name) => new URL(name, document.baseURI).href;
    return { manifest: beside(copy), signature: beside("manifest.sig"), key: beside("key.json") };
  }
  const base = `/api/surveys/${encodeURIComponent(surveyId)}`;
  return { manifest: base, signature: `${base}/manifest.sig`, key: "/api/key" };
}

async function signedForm(surveyId, copy) {
  const at = sources(surveyId, copy);
  const [manifestBytes, signature, keyDocument] = await Promise.all([
    fetchBytes(at.manifest), fetchBytes(at.signature),
    fetch(at.key, { credentials: "omit" }).then((r) => r.json())]);
  const key = await crypto.subtle.importKey("raw", fromBase64(keyDocument.public_key),
    { name: "Ed25519" }, false, ["verify"]);
  if (!await crypto.subtle.verify({ name: "Ed25519" }, key, signature, manifestBytes)) {
    throw new Error("the survey's signature does not verify with the aggregator's key");
  }
  const manifest = JSON.parse(new TextDecoder().decode(manifestBytes));
  if (manifest.survey_id !== surveyId) throw new Error("the manifest is another survey's");
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", fromBase64(
    keyDocument.public_key)));
  const keyId = [...digest.slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
  if (copy && !(manifest.form_origins ?? []).includes(location.origin)) {
    throw new Error(`the survey does not list ${location.origin} among the sites that may ` +
      "host its form");
  }
  if (manifest.form === undefined) {
    throw new Error("the survey signs no digests of its form (published before format /8)");
  }
  return { form: manifest.form, origin: manifest.origin ?? location.origin, keyId,
    digest: await sri(manifestBytes) };
}

// The policy (Content-Security-Policy) a copy's page carries in its meta element, as
// aggregator/web/security.py's hosted_policy writes it: scripts only its own files and its
// import map (by its hash), connections only to itself and the aggregator.
async function hostedPolicy(origin) {
  const map = document.querySelector('script[type="importmap"]')?.textContent ?? "";
  const hash = btoa(String.fromCharCode(...new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(map)))));
  return `default-src 'self'; script-src 'self' 'sha256-${hash}'; style-src 'self'; ` +
    `img-src 'self' data:; connect-src 'self' ${origin}; form-action 'self'; ` +
    "base-uri 'none'; object-src 'none'";
}

// What on a page, besides the files it loads, could run code, read another manifest, leak
// what is typed or take the respondent elsewhere. What a script of the page's own did and then
// removed cannot be seen here: `ldp-survey verify` compares a copy's page byte for byte.
function pageProblems(copy) {
  const problems = [];
  const runs = [...document.querySelectorAll("script:not([src])")].filter(
    (script) => !["importmap", "application/json"].includes(script.type));
  if (runs.length || document.querySelectorAll('script[type="importmap"]').length > 1) {
    problems.push("the page runs a script of its own (inline), besides the form's files");
  }
  const handlers = [...document.querySelectorAll("*")].some((element) =>
    [...element.attributes].some((attribute) => /^on/i.test(attribute.name) ||
      /^\s*javascript:/i.test(attribute.value)));
  if (handlers) problems.push("the page has code in its attributes (an event handler or javascript:)");
  if (document.querySelector("style, [style]")) {
    problems.push("the page has styles of its own, which can send what is typed elsewhere");
  }
  if (document.querySelector("iframe, frame, object, embed, form, meta[http-equiv=refresh i]")) {
    problems.push("the page has an element the form never has (a frame, an object, a form or " +
      "a refresh)");
  }
  if (document.querySelector("base")) {
    problems.push("the page sets another base address (<base>), which changes what it reads");
  }
  if (document.querySelectorAll("#survey").length !== 1) {
    problems.push("the page has more than one survey form element");
  }
  if (copy !== undefined && copy !== "manifest.json") {
    problems.push("the copy reads its manifest from elsewhere than beside it");
  }
  return problems;
}

// The SHA-384 of the manifest the form read, which the form (signed code) puts on its element
// (data-manifest-digest) as soon as it has read it: so the manifest checked here is the one the
// form answers, not another the server sent this check.
async function formsManifest() {
  const root = document.getElementById("survey");
  for (let waited = 0; waited < 20000; waited += 100) {
    if (root?.dataset.manifestDigest) return root.dataset.manifestDigest;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("the form did not say which manifest it read");
}

async function check() {
  if (document.readyState !== "complete") {  // every module and stylesheet in resource timing
    await new Promise((resolve) => window.addEventListener("load", resolve, { once: true }));
  }
  const root = document.getElementById("survey");
  const copy = root?.dataset.preview === undefined ? root?.dataset.manifestUrl : undefined;
  const surveyId = copy ? root.dataset.surveyId :
    decodeURIComponent(location.pathname.split("/s/").pop().split("/")[0]);
  const problems = pageProblems(copy);
  const { form: signed, origin, keyId, digest } = await signedForm(surveyId, copy);
  if (await formsManifest() !== digest) {
    problems.push("the form read another manifest than the one the survey signs");
  }
  const policy = document.querySelectorAll('meta[http-equiv="Content-Security-Policy" i]');
  if (copy && (policy.length !== 1 || policy[0].content !== await hostedPolicy(origin))) {
    problems.push("the copy's page does not carry the policy ldp-survey writes into it");
  }
  const released = globalThis.LDP_RELEASE.form;
  const declared = declaredIntegrity();
  const names = new Set();
  for (const url of loadedFiles()) {
    const name = new URL(url).pathname.split("/").pop();
    names.add(name);
    if (new URL(url).origin !== location.origin) {
      problems.push(`${name} is loaded from another site`);
      continue;
    }
    const enforced = declared.get(url) ?? [];
    if (!enforced.length || enforced.some((value) => value !== signed[name])) {
      problems.push(`${name} is loaded without the integrity the survey signs for it`);
    }
    const served = await sri(await fetchBytes(url));
    if (!(name in signed)) problems.push(`${name} is not part of the signed form`);
    else if (served !== signed[name]) problems.push(`${name} differs from the signed digest`);
    if (name in released && served !== released[name]) {
      problems.push(`${name} differs from ldp-survey ${globalThis.LDP_RELEASE.release}`);
    } else if (!(name in released)) {
      problems.push(`${name} is not a file of ldp-survey ${globalThis.LDP_RELEASE.release}`);
    }
  }
  for (const name of Object.keys(signed)) {
    if (!names.has(name)) problems.push(`the page does not load ${name}, which the survey signs`);
  }
  return { problems, count: names.size, origin, keyId };
}

function show(ok, heading, lines) {
  const banner = document.createElement("section");
  banner.id = "ldp-form-check";
  banner.setAttribute("role", ok ? "status" : "alert");
  banner.setAttribute("aria-label", "ldp-survey form check");
  banner.dataset.verdict = ok ? "match" : "differ";
  Object.assign(banner.style, {
    border: `3px solid ${ok ? "#1a7f37" : "#b00020"}`, background: ok ? "#eaf6ec" : "#fdecee",
    color: "#111", padding: "0.75rem 1rem", margin: "0 0 1rem", font: "1rem/1.4 sans-serif",
  });
  const title = document.createElement("strong");
  title.textContent = heading;
  banner.append(title);
  if (lines.length) {
    const list = document.createElement("ul");
    for (const line of lines) {
      const item = document.createElement("li");
      item.textContent = line;
      list.append(item);
    }
    banner.append(list);
  }
  document.body.prepend(banner);
}

check().then(({ problems, count, origin, keyId }) => {
  if (problems.length === 0) {
    blocked = false;
    show(true, `Checked: this form is the code the survey signs and the form of ldp-survey ` +
      `${globalThis.LDP_RELEASE.release} (${count} files).`,
    [`Answers go to ${origin}; the survey is signed with key ${keyId}.`]);
  } else {
    show(false, "Warning: this form's code differs from what the survey signs or from the " +
      "published ldp-survey release. Sending is blocked. Do not answer here.", problems);
  }
}, (error) => {
  show(false, "Warning: this form could not be checked. Sending is blocked.", [error.message]);
});
