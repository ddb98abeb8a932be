// reef dashboard: the few behaviours htmx does not cover. Relative times stay current,
// the conversation follows new entries, and a sent message clears its box.
"use strict";

function relative(seconds) {
  if (seconds < 45) return "just now";
  if (seconds < 3600) return Math.round(seconds / 60) + " min ago";
  if (seconds < 86400) return Math.round(seconds / 3600) + " h ago";
  return Math.round(seconds / 86400) + " days ago";
}

function refreshTimes() {
  const now = Date.now();
  for (const el of document.querySelectorAll("time[datetime]")) {
    const at = Date.parse(el.getAttribute("datetime"));
    if (!Number.isNaN(at)) el.textContent = relative(Math.max(0, (now - at) / 1000));
  }
}

// An entry can arrive twice (read with the page, then sent live): keep the first.
function dropRepeats() {
  const seen = new Set();
  for (const el of document.querySelectorAll("#transcript [data-key]")) {
    const key = el.getAttribute("data-key");
    if (seen.has(key)) el.remove(); else seen.add(key);
  }
}

function followConversation() {
  const bottom = document.getElementById("send-result");
  if (!bottom) return;
  const near = window.innerHeight + window.scrollY >= document.body.scrollHeight - 400;
  if (near) bottom.scrollIntoView({ block: "end" });
}

document.addEventListener("DOMContentLoaded", () => {
  refreshTimes();
  setInterval(refreshTimes, 30000);
  document.body.addEventListener("htmx:sseMessage", () => {
    dropRepeats();
    followConversation();
  });
  document.body.addEventListener("htmx:afterRequest", (event) => {
    const form = event.detail.elt;
    if (event.detail.successful && form.matches && form.matches("form.send")) form.reset();
  });
});
