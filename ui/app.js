// The launcher's window: the daemon's status, its sessions live, the last reconcile report, and
// actions. Talks only to the app (Tauri commands and events), never to the daemon: the token
// stays in the app.
"use strict";

const { invoke } = window.__TAURI__.core;
const { listen } = window.__TAURI__.event;

const $ = (sel) => document.querySelector(sel);
const sessions = new Map();
let status = null;

function text(el, value) {
  el.textContent = value == null || value === "" ? "–" : String(value);
}

function age(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

function shortPath(path) {
  const parts = path.split("/").filter(Boolean);
  return parts.length > 2 ? "…/" + parts.slice(-2).join("/") : path;
}

// Errors arrive as {code, message}; what to do depends on the code only.
function showError(err) {
  const box = $("#error");
  const code = err && err.code ? err.code : "internal";
  const message = err && err.message ? err.message : String(err);
  document.querySelectorAll(".invalid").forEach((el) => el.classList.remove("invalid"));
  switch (code) {
    case "no_daemon":
    case "daemon_unreachable":
      box.textContent = "The daemon is not answering yet; Reconcile is starting it. " + message;
      break;
    case "not_a_repository":
    case "no_commits":
      $("#repo").classList.add("invalid");
      box.textContent = message;
      break;
    case "command_not_found":
    case "invalid_request":
      $("#command").classList.add("invalid");
      box.textContent = message;
      break;
    case "not_ready":
      box.textContent = "The daemon is still reconciling; try again in a moment.";
      break;
    default:
      box.textContent = message;
  }
  box.dataset.code = code;
  box.hidden = false;
}

function clearError() {
  $("#error").hidden = true;
  document.querySelectorAll(".invalid").forEach((el) => el.classList.remove("invalid"));
}

function renderStatus() {
  if (!status) return;
  const phase = $("#phase");
  phase.textContent = status.phase.replace("_", " ");
  phase.dataset.phase = status.phase;
  text($("#daemon-pid"), status.pid);
  text($("#daemon-port"), status.port);
  text($("#daemon-version"), status.version);
  renderUptime();
  const message = $("#message");
  message.hidden = !status.message;
  message.textContent = status.message || "";
  const log = $("#log");
  log.hidden = !status.log;
  log.textContent = status.log || "";
  // Restart a ready daemon, or start over after a crash loop or a failed takeover.
  $("#restart").disabled = !["ready", "crash_loop", "failed"].includes(status.phase);
}

function renderUptime() {
  const up = status && status.phase === "ready" && status.started_at_ms
    ? age(Date.now() - status.started_at_ms) : null;
  text($("#daemon-uptime"), up);
}

function renderSessions() {
  const body = $("#sessions tbody");
  const rows = [...sessions.values()].sort((a, b) => b.created_at_ms - a.created_at_ms);
  body.replaceChildren(...rows.map(row));
  $("#empty").hidden = rows.length > 0;
}

function row(s) {
  const tr = document.createElement("tr");
  tr.dataset.id = s.id;
  tr.dataset.state = s.state;
  tr.title = s.worktree;
  const cell = (cls, value, title) => {
    const td = document.createElement("td");
    td.className = cls;
    td.textContent = value;
    if (title) td.title = title;
    tr.appendChild(td);
    return td;
  };
  cell("name", s.name || s.id);
  cell("repo", shortPath(s.repo), s.repo);
  cell("branch", s.branch);
  cell("state", s.state).dataset.state = s.state;
  cell("age", age(Date.now() - s.created_at_ms));
  const actions = cell("actions", "");
  if (s.state === "running") {
    const copy = document.createElement("button");
    copy.className = "copy";
    copy.type = "button";
    copy.textContent = "Copy attach";
    copy.title = "Copy the command that attaches a terminal";
    copy.onclick = () => copyAttach(s.id);
    const stop = document.createElement("button");
    stop.className = "stop";
    stop.type = "button";
    stop.textContent = "Stop";
    stop.title = "Keep its uncommitted work, end it; the worktree stays";
    stop.onclick = () => stopSession(s.id, stop);
    actions.append(copy, stop);
  }
  return tr;
}

async function refreshSessions() {
  try {
    const list = await invoke("sessions");
    sessions.clear();
    list.forEach((s) => sessions.set(s.id, s));
    renderSessions();
  } catch (e) {
    showError(e);
  }
}

function renderReport(report) {
  const body = $("#report-counts tbody");
  if (!report) {
    $("#report-none").hidden = false;
    return;
  }
  $("#report-none").hidden = true;
  $("#report-kind").textContent = `(${report.kind}, ${report.duration_ms} ms)`;
  body.replaceChildren(...report.counts.map((c) => {
    const tr = document.createElement("tr");
    for (const v of [c.pass, c.evidence.replace(/_/g, " "), c.disposition.replace(/_/g, " "), c.count]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    }
    return tr;
  }));
  const warnings = $("#report-warnings");
  const items = report.warnings.map((w) => {
    const li = document.createElement("li");
    li.textContent = `${w.pass}${w.session ? " " + w.session : ""}: ${w.message}`;
    return li;
  });
  if (report.more_warnings > 0) {
    const li = document.createElement("li");
    li.textContent = `and ${report.more_warnings} more`;
    items.push(li);
  }
  warnings.replaceChildren(...items);
}

async function refreshReport() {
  try {
    renderReport(await invoke("report"));
  } catch (e) {
    if (e.code !== "not_ready") showError(e);
  }
}

async function stopSession(id, button) {
  button.disabled = true;
  try {
    const s = await invoke("stop_session", { id });
    sessions.set(s.id, s);
    renderSessions();
    clearError();
  } catch (e) {
    button.disabled = false;
    showError(e);
  }
}

async function copyAttach(id) {
  try {
    const command = await invoke("attach_command", { id });
    try {
      await navigator.clipboard.writeText(command);
    } catch {
      const area = document.createElement("textarea");
      area.value = command;
      document.body.appendChild(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    const box = $("#message");
    box.textContent = `Copied: ${command}`;
    box.hidden = false;
  } catch (e) {
    showError(e);
  }
}

$("#new-session").addEventListener("submit", async (event) => {
  event.preventDefault();
  const button = $("#create");
  button.disabled = true;
  try {
    const s = await invoke("create_session", {
      repo: $("#repo").value,
      command: $("#command").value,
      name: $("#name").value || null,
    });
    sessions.set(s.id, s);
    renderSessions();
    clearError();
    $("#command").value = "";
    $("#name").value = "";
  } catch (e) {
    showError(e);
  } finally {
    button.disabled = false;
  }
});

$("#restart").addEventListener("click", () => {
  $("#restart").disabled = true;
  invoke("restart_daemon");
});

listen("status", (event) => {
  const wasReady = status && status.phase === "ready" && status.pid;
  status = event.payload;
  renderStatus();
  if (status.phase === "ready" && status.pid !== wasReady) {
    clearError();
    refreshSessions();
    refreshReport();
  }
});

listen("daemon-event", (event) => {
  const e = event.payload;
  if (e.type === "session") {
    sessions.set(e.session.id, e.session);
    renderSessions();
  } else if (e.type === "reconcile" && e.report) {
    renderReport({ kind: e.kind, ...e.report });
  }
});

setInterval(() => {
  renderUptime();
  document.querySelectorAll("#sessions tbody tr").forEach((tr) => {
    const s = sessions.get(tr.dataset.id);
    if (s) tr.querySelector(".age").textContent = age(Date.now() - s.created_at_ms);
  });
}, 1000);

(async () => {
  status = await invoke("status");
  renderStatus();
  if (status.phase === "ready") {
    refreshSessions();
    refreshReport();
  }
})();
