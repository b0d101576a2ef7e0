// The form's own words in the respondent's language. The server puts the translations of the
// form's gettext catalogue (shared/locale/<language>/LC_MESSAGES/form.po, compiled) in the page
// as JSON data, <script type="application/json" id="form-words">, which is no script to run (so
// the strict content security policy holds); a message it lacks, or a page without it, reads
// in English. Messages name their values in braces: _("Please select at most {limit}.",
// { limit: 2 }).

let table = null;

function translations() {
  if (table === null) {
    const data = globalThis.document?.getElementById("form-words");
    table = data ? JSON.parse(data.textContent) : {};
  }
  return table;
}

export function _(message, values = {}) {
  const text = Object.hasOwn(translations(), message) ? translations()[message] : message;
  return text.replace(/\{(\w+)\}/g, (whole, name) =>
    (Object.hasOwn(values, name) ? String(values[name]) : whole));
}
