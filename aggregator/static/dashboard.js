// The researcher dashboard: copy a respondent link, and keep each survey's count of released
// responses current without a reload (GET /researcher/counts, every REFRESH_MS; never how
// many wait for release). Without JavaScript the page works as is, reloaded by hand.
const REFRESH_MS = 15000;
const status = document.getElementById("dashboard-status");

function say(text) {
  status.textContent = text;
  status.hidden = false;
}

for (const button of document.querySelectorAll("button[data-copy]")) {
  button.hidden = false;  // only where a script can copy
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(button.dataset.copy);
      say("Link copied.");
    } catch {
      say("This browser did not allow copying: select the link and copy it.");
    }
  });
}

async function refresh() {
  const response = await fetch("/researcher/counts", { credentials: "same-origin" })
    .catch(() => null);
  if (!response?.ok) return;
  const counts = await response.json();
  for (const node of document.querySelectorAll("[data-count]")) {
    const found = counts[node.dataset.count];
    if (found && node.textContent !== String(found.n)) node.textContent = String(found.n);
  }
  for (const node of document.querySelectorAll("[data-status]")) {
    const found = counts[node.dataset.status];
    if (found && node.textContent.toLowerCase() !== found.status) {
      say("A survey changed state: reload the page to see its actions.");
    }
  }
}

setInterval(refresh, REFRESH_MS);
