// Catalog: every tool, searchable (by its words, or ranked by the gateway's tool search) and filterable; the catalog's version, tool count, plugins, sources, the
// tools the lock file holds (held.js), the calls waiting for a person's approval (an admin approves or denies each), and the accounts people connected to
// upstreams (listed without their tokens; an admin may end one).

import {del, describe, get, post} from "./api.js";
import {fill, h, table, time} from "./dom.js";
import {heldSection} from "./held.js";
import {where} from "./problems.js";

const FILTERS = [
  ["scope", "Scope", (tool) => [tool.scope]],
  ["binding", "Binding", (tool) => [tool.binding]],
  ["toolset", "Toolset", (tool) => tool.toolsets || []],
  ["tag", "Tag", (tool) => tool.tags || []],
];

let remembered = {search: "", ranked: false, scope: "", binding: "", toolset: "", tag: ""}; // kept while the tab lives
const RANK_WAIT_MS = 200; // typing pauses this long before the gateway's search is asked

export async function render(main, params, context) {
  const [overview, {tools}, {connections}, {approvals}, {held}] = await Promise.all([context.refreshOverview(),
    get("/admin/api/tools"), get("/admin/api/connections"), get("/admin/api/approvals"), get("/admin/api/held")]);
  const search = h("input#catalog-search", {type: "search", value: remembered.search, autocomplete: "off",
    placeholder: "id, name, tag, file…"});
  const selects = Object.fromEntries(FILTERS.map(([name, label, values]) => {
    const options = [...new Set(tools.flatMap(values).filter(Boolean))].sort();
    const select = h(`select#filter-${name}`, h("option", {value: ""}, "Any"),
      options.map((value) => h("option", {value, selected: value === remembered[name]}, value)));
    return [name, select];
  }));
  const ranked = h("input#catalog-ranked", {type: "checkbox", checked: remembered.ranked});
  const results = h("div.results");
  const count = h("p.tally", {role: "status"});
  let asked = 0; // the latest ranking asked for: an older answer arriving late is not shown
  let waiting = null;

  const filtered = (tool) =>
    FILTERS.every(([name, , values]) => !selects[name].value || values(tool).includes(selects[name].value));

  function show(shown, scores) {
    const of = shown.length === tools.length ? `${tools.length} tools` : `${shown.length} of ${tools.length} tools`;
    count.textContent = scores ? `${shown.length} best fits, best first` : of;
    fill(results, shown.length ? toolTable(shown, scores) : h("p.empty", "No tool matches."));
  }

  // Ranked: the gateway's own tool search (GET /tools/search, what MCP's search_tools and the chat loop use), the
  // filters applied to what it found; else the words are matched in the listing's fields.
  async function rank(text, mine) {
    try {
      const {tools: found} = await get(`/tools/search?q=${encodeURIComponent(text)}&k=50`);
      if (mine !== asked) return;
      const byId = new Map(tools.map((tool) => [tool.id, tool]));
      const shown = found.map((hit) => byId.get(hit.id)).filter((tool) => tool && filtered(tool));
      show(shown, new Map(found.map((hit) => [hit.id, hit.score])));
    } catch (error) {
      if (mine === asked) fill(results, h("p.notice.error", {role: "alert"}, describe(error)));
    }
  }

  function update() {
    remembered = {search: search.value, ranked: ranked.checked,
      ...Object.fromEntries(Object.entries(selects).map(([k, s]) => [k, s.value]))};
    clearTimeout(waiting);
    const mine = ++asked;
    if (ranked.checked && search.value.trim()) {
      waiting = setTimeout(() => rank(search.value, mine), RANK_WAIT_MS);
      return;
    }
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    show(tools.filter((tool) => {
      const haystack = [tool.id, tool.name, tool.scope, tool.binding, tool.file, tool.plugin, ...(tool.toolsets || []),
        ...(tool.tags || [])].filter(Boolean).join(" ").toLowerCase();
      return words.every((word) => haystack.includes(word)) && filtered(tool);
    }));
  }

  search.addEventListener("input", update);
  ranked.addEventListener("change", update);
  for (const select of Object.values(selects)) select.addEventListener("change", update);

  fill(main,
    h("div.page-head",
      h("h1", "Catalog"),
      h("p.meta", "Version ", h("code", overview.version), " · ", `${overview.tools} tools`,
        overview.definitions ? [" · from ", h("code", overview.definitions)] : null,
        overview.last_reload ? [" · last reload ", time(overview.last_reload.at)] : null)),
    overview.read_only ? h("p.notice.info", {role: "note"}, "Definitions are read-only: ", overview.read_only_reason || "") : null,
    h("form.filters", {role: "search", onsubmit: (event) => event.preventDefault()},
      h("div.field.grow", h("label", {for: "catalog-search"}, "Search"), search),
      h("div.field.check", ranked, h("label", {for: "catalog-ranked"}, "Rank by fit")),
      FILTERS.map(([name, label]) => h("div.field", h("label", {for: `filter-${name}`}, label), selects[name]))),
    count,
    results,
    heldSection(held, () => render(main, params, context)),
    approvalsSection(approvals),
    extras(overview),
    connectionsSection(connections));
  update();
}

function approvalsSection(approvals) {
  if (!approvals.length) return null;
  const status = h("p.tally", {role: "status"});
  const decide = async (approval, decision, row) => {
    for (const button of row.querySelectorAll("button")) button.disabled = true;
    try {
      await post(`/approvals/${encodeURIComponent(approval.id)}`, {decision});
      row.remove();
      status.textContent = `${decision === "approve" ? "Approved" : "Denied"} ${approval.tool} for ${approval.caller || "the caller"}: ` +
        (decision === "approve" ? "the same call runs once when it is made again." : "it will not run.");
    } catch (error) {
      for (const button of row.querySelectorAll("button")) button.disabled = false;
      status.textContent = describe(error);
    }
  };
  return h("section", {"aria-labelledby": "approvals-heading"},
    h("h2#approvals-heading", "Calls waiting for approval"),
    status,
    table("Calls waiting for approval", ["Tool", "Caller", "Arguments", "Reason", "Asked", "Expires", ""], approvals, (a) => {
      const approve = h("button.small", {type: "button", "aria-label": `Approve ${a.tool} for ${a.caller || "the caller"}`}, "Approve");
      const deny = h("button.secondary.small", {type: "button", "aria-label": `Deny ${a.tool} for ${a.caller || "the caller"}`}, "Deny");
      const buttons = h("span.actions", approve, " ", deny);
      approve.addEventListener("click", () => decide(a, "approve", approve.closest("tr")));
      deny.addEventListener("click", () => decide(a, "deny", deny.closest("tr")));
      const shown = a.arguments === null ? `digest ${a.digest.slice(0, 12)}…` : JSON.stringify(a.arguments);
      return [h("code", a.tool), a.caller || "—", h("code", shown), a.reason || "—", time(a.created_at), time(a.expires_at), buttons];
    }));
}

function connectionsSection(connections) {
  if (!connections.length) return null;
  const status = h("p.tally", {role: "status"});
  const end = async (connection, button) => {
    if (!confirm(`End ${connection.user}'s connection '${connection.connection}'? They will be asked to connect again.`)) return;
    button.disabled = true;
    try {
      await del(`/admin/api/connections/${encodeURIComponent(connection.connection)}?person=${encodeURIComponent(connection.person)}`);
      button.closest("tr").remove();
      status.textContent = `Ended ${connection.user}'s connection '${connection.connection}'.`;
    } catch (error) {
      button.disabled = false;
      status.textContent = describe(error);
    }
  };
  return h("section", {"aria-labelledby": "connections-heading"},
    h("h2#connections-heading", "Connected accounts"),
    status,
    table("Connected accounts", ["Connection", "Person", "Scope", "Connected", "Token expires", "Refreshable", ""],
      connections, (c) => {
        const button = h("button.secondary.small", {type: "button", "aria-label": `End ${c.user}'s connection ${c.connection}`}, "End");
        button.addEventListener("click", () => end(c, button));
        return [h("code", c.connection), c.user, c.scope || "—", time(c.connected_at), time(c.expires_at),
          c.refreshable ? "yes" : "no", button];
      }));
}

function toolTable(tools, scores) {
  const columns = ["Tool", "Name", "Scope", "Binding", "Toolsets", "Tags", "Declared in", ""];
  return table("Tools", scores ? ["Fit", ...columns] : columns, tools, (tool) => [
    ...(scores ? [scores.get(tool.id).toFixed(2)] : []),
    h("a", {href: `#/tools/${encodeURIComponent(tool.id)}`}, h("code", tool.id)),
    tool.name,
    tool.scope,
    tool.binding,
    chips(tool.toolsets),
    chips(tool.tags),
    tool.file ? where(tool.file, tool.line) : tool.plugin ? `plugin ${tool.plugin}` : "—",
    h("a.button.small", {href: `#/tools/${encodeURIComponent(tool.id)}/try`, "aria-label": `Try ${tool.id}`}, "Try"),
  ]);
}

export function chips(values) {
  if (!values || !values.length) return "—";
  return h("ul.chips", values.map((value) => h("li", value)));
}

function extras(overview) {
  const plugins = overview.plugins || [];
  const sources = overview.sources || [];
  return [
    h("section", {"aria-labelledby": "plugins-heading"},
      h("h2#plugins-heading", "Plugins"),
      plugins.length
        ? table("Plugins", ["Plugin", "Version", "Tools"], plugins, (p) => [p.name, p.version || "—", String(p.tools ?? "—")])
        : h("p.empty", "No plugin is loaded.")),
    sources.length ? h("section", {"aria-labelledby": "sources-heading"},
      h("h2#sources-heading", "Upstream sources"),
      table("Sources", ["Source", "Kind", "Tools", "State"], sources, (s) => [
        s.name || s.url || s.id || "—", s.kind || "—", String(s.tools ?? "—"), s.state || s.error || (s.ok === false ? "failing" : "ok")]))
      : null,
  ];
}
