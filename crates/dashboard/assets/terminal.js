// reef dashboard, terminal page: xterm.js on the WebSocket of a shell in the agent's sandbox.
// Typed input goes out as binary frames, a new size as {"resize":[cols,rows]}; output comes
// back as binary frames, and {"exit":CODE,"why":TEXT} when the shell has ended.
"use strict";

function openTerminal(box) {
  const status = document.getElementById("terminal-status");
  const term = new Terminal({
    cursorBlink: true,
    scrollback: 5000,
    fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
    fontSize: 14,
  });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();

  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = new URLSearchParams({
    csrf: box.dataset.csrf,
    cols: String(term.cols),
    rows: String(term.rows),
  });
  const socket = new WebSocket(`${scheme}//${location.host}${box.dataset.socket}?${query}`);
  socket.binaryType = "arraybuffer";
  const encoder = new TextEncoder();
  let ended = false;

  socket.addEventListener("open", () => {
    status.textContent = "Connected.";
    term.focus();
  });
  socket.addEventListener("message", (event) => {
    if (typeof event.data === "string") {
      const end = JSON.parse(event.data);
      ended = true;
      const code = end.exit === null ? "no exit code" : `exit code ${end.exit}`;
      status.textContent = `The session ended: ${end.why} (${code}).`;
      box.dataset.ended = String(end.exit);
      return;
    }
    term.write(new Uint8Array(event.data));
  });
  socket.addEventListener("close", () => {
    term.options.disableStdin = true;
    if (!ended) status.textContent = "Disconnected: reload the page to open a new shell.";
  });
  const send = (data) => {
    if (socket.readyState === WebSocket.OPEN) socket.send(data);
  };
  term.onData((data) => send(encoder.encode(data)));
  term.onBinary((data) => send(Uint8Array.from(data, (c) => c.charCodeAt(0) & 0xff)));
  term.onResize(({ cols, rows }) => send(JSON.stringify({ resize: [cols, rows] })));
  window.addEventListener("resize", () => fit.fit());
}

document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("terminal");
  if (box) openTerminal(box);
});
