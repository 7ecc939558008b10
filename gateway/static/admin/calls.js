// Live calls: the recent calls, then every new one as it happens (server-sent events read with the Bearer
// header); a row's arguments and result (secrets redacted by the gateway) on demand.

import {describe, get, stream} from "./api.js";
import {clock, codeBlock, fill, h, ms, notice} from "./dom.js";

const KEEP = 200; // rows kept on the page
const HEADERS = ["Time", "Caller", "Surface", "Tool", "Outcome", "Duration"];

export async function render(main) {
  const {calls} = await get("/admin/api/calls");
  const state = h("span.badge.muted#stream-state", "connecting");
  const body = h("tbody");
  const detail = h("section.card.call-detail", {"aria-labelledby": "detail-heading", hidden: true});
  const empty = h("p.empty", "No call yet. Calls appear here as clients make them.");
  const seen = new Set();
  const abort = new AbortController();
  let selected = null;

  fill(main,
    h("div.page-head", h("h1", "Live calls"), h("p.meta", "Stream: ", state)),
    h("div.split",
      h("div",
        h("div.table-wrap", {role: "region", "aria-label": "Calls", tabindex: "0"},
          h("table.calls", h("caption.visually-hidden", "Calls, newest first"),
            h("thead", h("tr", HEADERS.map((title) => h("th", {scope: "col"}, title)))), body)),
        empty),
      detail));

  function add(call, {live}) {
    if (!call || seen.has(call.id)) return;
    seen.add(call.id);
    empty.hidden = true;
    const bad = call.outcome && call.outcome !== "ok";
    const open = h("button.link", {type: "button", "aria-label": `Details of the ${call.tool} call at ${clock(call.at)}`,
      onclick: (event) => { event.stopPropagation(); show(call, row); }}, clock(call.at));
    const row = h(`tr${live ? ".fresh" : ""}`, {dataset: {call: call.id}, onclick: () => show(call, row)},
      [open, call.caller || "—", call.surface || "—", h("code", call.tool),
        h(`span.badge.${bad ? "bad" : "ok"}`, call.outcome || "—"), ms(call.duration_ms)]
        .map((cell, i) => h("td", {"data-label": HEADERS[i]}, cell)));
    body.prepend(row);
    while (body.rows.length > KEEP) body.lastElementChild.remove();
  }

  async function show(call, row) {
    if (selected) selected.removeAttribute("aria-selected");
    selected = row;
    row.setAttribute("aria-selected", "true");
    detail.hidden = false;
    fill(detail, h("h2#detail-heading", "Call ", h("code", call.tool)), h("p", {role: "status"}, "Loading…"));
    try {
      const full = await get(`/admin/api/calls/${encodeURIComponent(call.id)}`);
      fill(detail,
        h("div.card-head", h("h2#detail-heading", "Call ", h("code", full.tool)),
          h("button.link.small", {type: "button", onclick: () => { detail.hidden = true; row.removeAttribute("aria-selected"); row.querySelector("button")?.focus(); }}, "Close")),
        h("dl.facts",
          [["Id", h("code", full.id)], ["Time", new Date(full.at * 1000).toLocaleString()], ["Caller", full.caller || "—"],
            ["User", full.user || "—"], ["Surface", full.surface || "—"], ["Outcome", full.outcome || "—"],
            ["Duration", ms(full.duration_ms)]].map(([term, value]) => [h("dt", term), h("dd", value)])),
        h("h3", "Arguments"),
        full.arguments_hidden ? h("p.empty", "Not kept: the tool's audit settings leave its arguments out.")
          : recorded(full.arguments, full.arguments_truncated, "Arguments", "call-arguments"),
        full.error ? [h("h3", "Error"), h("p.error-text", full.error)] : null,
        h("h3", "Result"), recorded(full.result, full.result_truncated, "Result", "call-result"));
    } catch (error) {
      fill(detail, h("h2#detail-heading", "Call"), notice("error", describe(error)));
    }
  }

  for (const call of [...calls].sort((a, b) => a.at - b.at)) add(call, {live: false});

  (async () => {
    let wait = 1000;
    let first = true;
    while (!abort.signal.aborted) {
      try {
        if (!first) await catchUp(); // calls made while the stream was down
        first = false;
        await stream("/admin/api/calls/stream", (name, data) => {
          if (name === "dropped") catchUp(); // this reader fell behind: the gateway skipped some calls
          if (name !== "call") return;
          try {
            add(JSON.parse(data), {live: true});
          } catch { /* a malformed event is skipped, the stream goes on */ }
        }, abort.signal, () => setState("live", "ok"));
        wait = 1000;
      } catch (error) {
        if (abort.signal.aborted) return;
        setState(error.status === 401 || error.status === 403 ? "refused" : "reconnecting", "bad");
      }
      if (abort.signal.aborted) return;
      setState("reconnecting", "muted");
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 15000);
    }
  })();

  async function catchUp() {
    const recent = await get("/admin/api/calls", {signal: abort.signal});
    for (const call of [...recent.calls].sort((a, b) => a.at - b.at)) add(call, {live: true});
  }

  function setState(text, kind) {
    state.textContent = text;
    state.className = `badge ${kind}`;
  }

  return () => abort.abort();
}

// The gateway keeps arguments and results as JSON text (cut when long, secrets redacted): shown indented when
// they parse, as they are when cut.
function recorded(text, truncated, label, className) {
  if (text === null || text === undefined) return h("p.empty", "None.");
  let shown = text;
  if (typeof text === "string") {
    try {
      shown = JSON.parse(text);
    } catch { /* cut or not JSON: the text itself */ }
  }
  return [codeBlock(shown, {tabindex: "0", "aria-label": label, className}),
    truncated ? h("p.hint", "Cut: the gateway keeps the first part only.") : null];
}
