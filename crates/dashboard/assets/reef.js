// reef dashboard: the few behaviours htmx does not cover. Relative times stay current,
// the conversation follows new entries, and a sent message clears its box.
"use strict";

function relative(seconds) {
  if (seconds <= -45) return "in " + relative(-seconds).replace(/ ago$/, "");
  if (seconds < 45) return "just now";
  if (seconds < 3600) return Math.round(seconds / 60) + " min ago";
  if (seconds < 86400) return Math.round(seconds / 3600) + " h ago";
  return Math.round(seconds / 86400) + " days ago";
}

function refreshTimes() {
  const now = Date.now();
  for (const el of document.querySelectorAll("time[datetime]")) {
    const at = Date.parse(el.getAttribute("datetime"));
    if (!Number.isNaN(at)) el.textContent = relative((now - at) / 1000);
  }
}

// An entry can arrive twice: read with the page, then sent live. Only a live entry whose
// key was among the page's own is dropped, once per copy the page had, so two identical
// answers that really happened both stay.
const pageKeys = new Map();

function notePageKeys() {
  for (const el of document.querySelectorAll("#transcript [data-key]")) {
    const key = el.getAttribute("data-key");
    pageKeys.set(key, (pageKeys.get(key) || 0) + 1);
    el.setAttribute("data-seen", "");
  }
}

function dropRepeats() {
  for (const el of document.querySelectorAll("#transcript [data-key]:not([data-seen])")) {
    const key = el.getAttribute("data-key");
    const left = pageKeys.get(key) || 0;
    if (left > 0) {
      pageKeys.set(key, left - 1);
      el.remove();
    } else {
      el.setAttribute("data-seen", "");
    }
  }
}

// Answers that are not HTML (a refusal from a layer below the pages) are shown as text.
function escapeText(text) {
  const div = document.createElement("div");
  div.textContent = text;
  return '<p class="notice error" role="alert">' + div.innerHTML + "</p>";
}

function followConversation() {
  const bottom = document.getElementById("send-result");
  if (!bottom) return;
  const near = window.innerHeight + window.scrollY >= document.body.scrollHeight - 400;
  if (near) bottom.scrollIntoView({ block: "end" });
}

document.addEventListener("DOMContentLoaded", () => {
  refreshTimes();
  notePageKeys();
  setInterval(refreshTimes, 30000);
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    const type = event.detail.xhr.getResponseHeader("content-type") || "";
    if (!type.startsWith("text/html")) {
      event.detail.serverResponse = escapeText(event.detail.xhr.responseText);
    }
  });
  document.body.addEventListener("htmx:sseMessage", () => {
    dropRepeats();
    followConversation();
  });
  document.body.addEventListener("htmx:afterRequest", (event) => {
    const form = event.detail.elt;
    if (event.detail.successful && form.matches && form.matches("form.send")) form.reset();
  });
});
