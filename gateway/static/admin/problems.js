// Problems & reloads: the last reload's outcome, every problem with the file's lines around it (the column
// marked), and the history of reloads. Polled while the page is open, so an edit on disk shows up by itself.

import {describe, get, post} from "./api.js";
import {fill, h, ms, notice, table, time} from "./dom.js";

const POLL_MS = 2000;

export async function render(main, params, context) {
  const outcome = h("section.card", {"aria-labelledby": "outcome-heading"});
  const problems = h("section", {"aria-labelledby": "problems-heading"});
  const history = h("section", {"aria-labelledby": "history-heading"});
  const status = h("div.form-message");
  const reload = h("button.secondary", {type: "button", onclick: reloadNow}, "Reload now");
  fill(main,
    h("div.page-head", h("h1", "Problems & reloads"), h("div.actions", reload)),
    status, outcome, problems, history);
  let last = "";
  let timer = null;
  let stopped = false;

  async function refresh() {
    const [found, reloads] = await Promise.all([get("/admin/api/problems"), get("/admin/api/reloads")]);
    const seen = JSON.stringify([found, reloads]);
    if (seen === last) return; // re-render only on change: keeps the reader's scroll and focus
    last = seen;
    showOutcome(outcome, found.last_reload, found.problems);
    fill(problems, h("h2#problems-heading", "Problems"),
      found.problems.length ? problemList(found.problems) : h("p.empty", {dataset: {empty: "problems"}}, "No problems: every file builds."));
    fill(history, h("h2#history-heading", "Reload history"), reloadTable(reloads.reloads || []));
    context.refreshOverview().catch(() => {});
  }

  async function poll() {
    try {
      await refresh();
    } catch (error) {
      if (!stopped) fill(status, notice("error", describe(error)));
    }
    if (!stopped) timer = setTimeout(poll, POLL_MS);
  }

  async function reloadNow() {
    reload.disabled = true;
    status.replaceChildren();
    try {
      const answer = await post("/admin/reload", {}).catch((error) => {
        if (error.status === 422) return error.body;
        throw error;
      });
      fill(status, notice(answer.ok ? "info" : "error",
        answer.ok ? (answer.changed ? "Reloaded: a new catalog is served." : "Reloaded: nothing changed.")
          : "The reload failed: the last good catalog keeps serving."));
      await refresh();
    } catch (error) {
      fill(status, notice("error", describe(error)));
    } finally {
      reload.disabled = false;
    }
  }

  await refresh();
  timer = setTimeout(poll, POLL_MS);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

function showOutcome(box, reload, problems) {
  const heading = h("h2#outcome-heading", "Last reload");
  if (!reload) {
    fill(box, heading, h("p.empty", "No reload since the gateway started."));
    return;
  }
  const count = problems.length;
  fill(box, heading,
    h("p.outcome", h(`span.badge.${reload.ok ? "ok" : "bad"}`, reload.ok ? "ok" : "failed"), " ",
      time(reload.at),
      reload.version ? [" · version ", h("code", reload.version)] : null,
      reload.duration_ms !== undefined ? ` · ${ms(reload.duration_ms)}` : null,
      reload.timed_out ? " · timed out" : null),
    reload.ok ? null : h("p", `${count} problem${count === 1 ? "" : "s"}: the last good catalog keeps serving until they are fixed.`));
}

/** Every problem as file:line:col, its message and the file's lines around it. */
export function problemList(problems, {onPick} = {}) {
  return h("ol.problems", problems.map((problem) => h(`li.problem.${problem.severity || "error"}`,
    h("p.where",
      h(`span.badge.${problem.severity === "warning" ? "warn" : "bad"}`, problem.severity || "error"), " ",
      onPick ? h("button.link", {type: "button", onclick: () => onPick(problem)}, h("code", position(problem)))
        : editable(problem.file) ? h("a", {href: `#/editor/${problem.file}:${problem.line}`, title: "Open in the editor"}, h("code", position(problem)))
          : h("code", position(problem))),
    h("p.message", problem.message),
    problem.excerpt ? excerpt(problem.excerpt, problem) : null)));
}

/** A file of the definitions directory the editor can open (not a plugin's "<plugin>:<path>", not the directory). */
export function editable(file) {
  return typeof file === "string" && /\.ya?ml$/.test(file) && !file.includes(":") && !file.startsWith("/");
}

/** `file:line`, a link to that line in the editor when the editor can open the file. */
export function where(file, line) {
  const text = h("code", line ? `${file}:${line}` : file);
  return editable(file) ? h("a", {href: `#/editor/${file}${line ? `:${line}` : ""}`}, text) : text;
}

export function position(problem) {
  return [problem.file, problem.line, problem.column].filter((part) => part !== null && part !== undefined).join(":");
}

function excerpt({first_line: first, lines, line, column}, problem) {
  const rows = [];
  lines.forEach((text, i) => {
    const number = first + i;
    const hit = number === line;
    rows.push(h(`span.ex-line${hit ? ".hit" : ""}`, h("span.ln", {"aria-hidden": "true"}, String(number)),
      hit && column ? marked(text, column) : h("span.src", text)));
    if (hit && column) {
      const lead = text.slice(0, column - 1).replace(/[^\t]/g, " ");
      rows.push(h("span.ex-line.caret", {"aria-hidden": "true"}, h("span.ln", ""), h("span.src", `${lead}^`)));
    }
  });
  return h("pre.excerpt", {tabindex: "0", "aria-label": `${problem.file} lines ${first} to ${first + lines.length - 1}; the problem is at line ${line}${column ? `, column ${column}` : ""}`},
    h("code", rows));
}

function marked(text, column) {
  const at = Math.min(column - 1, text.length);
  return h("span.src", text.slice(0, at), h("mark", text.slice(at, at + 1) || " "), text.slice(at + 1));
}

function reloadTable(reloads) {
  if (!reloads.length) return h("p.empty", "No reload yet.");
  const list = (value) => (Array.isArray(value) ? (value.length ? value.join(", ") : "—") : String(value ?? "—"));
  return table("Reload history", ["Time", "Trigger", "Outcome", "Duration", "Version", "Tools", "Added", "Removed", "Changed", "Problems"],
    reloads, (r) => [ // newest first, as the gateway keeps them
      time(r.at),
      r.initial ? "start" : "—",
      h(`span.badge.${r.ok ? "ok" : "bad"}`, r.ok ? (r.changed ? "ok" : "ok, unchanged") : r.timed_out ? "timed out" : "failed"),
      ms(r.duration_ms),
      r.version ? h("code", r.version) : "—",
      String(r.tools ?? "—"),
      list(r.added), list(r.removed), list(r.modified),
      String(Array.isArray(r.problems) ? r.problems.length : r.problems ?? 0),
    ]);
}
