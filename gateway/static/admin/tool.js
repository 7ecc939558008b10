// Tool: its descriptions, schemas (readable, or raw), the declaration in each provider format, where it is
// declared, its binding and its live figures.

import {get, pathParam} from "./api.js";
import {codeBlock, fill, h, ms} from "./dom.js";
import {chips} from "./catalog.js";
import {where} from "./problems.js";
import {describeSchema} from "./schema.js";

const FORMATS = [["mcp", "MCP"], ["openai", "OpenAI"], ["openai-strict", "OpenAI strict"],
  ["openai-responses", "OpenAI Responses"], ["anthropic", "Anthropic"], ["gemini", "Gemini"]];

export async function render(main, [id]) {
  const tool = await get(`/admin/api/tools/${pathParam(id)}`);
  const declared = tool.declared && tool.declared.file ? where(tool.declared.file, tool.declared.line) : "—";
  fill(main,
    h("div.page-head",
      h("p.crumbs", h("a", {href: "#/"}, "Catalog"), " / ", h("code", tool.id)),
      h("h1", tool.name || tool.id),
      h("div.actions", h("a.button", {href: `#/tools/${encodeURIComponent(tool.id)}/try`}, "Try it"))),
    h("section.grid2", {"aria-label": "Descriptions"},
      h("div.card", h("h2", "For people"), h("p.prose", tool.user_description || "—")),
      h("div.card", h("h2", "For the model"), h("p.prose", tool.ai_description || "—"))),
    h("section.card", {"aria-labelledby": "facts-heading"},
      h("h2#facts-heading", "Declaration"),
      h("dl.facts",
        fact("Id", h("code", tool.id)),
        fact("Declared in", declared),
        fact("Scope", tool.scope || "—"),
        fact("Binding", tool.binding ? [h("strong", tool.binding.kind), " ", tool.binding.summary || ""] : "—"),
        fact("Toolsets", chips(tool.toolsets)),
        fact("Tags", chips(tool.tags)),
        fact("Timeout", tool.timeout_s ? `${tool.timeout_s} s` : "—"),
        fact("Annotations", annotations(tool.annotations)))),
    figures(tool.figures),
    schemaSection("input", "Input schema", tool.input_schema,
      tool.input_schema_derived ? "Derived from the Python function's signature." : null),
    schemaSection("output", "Output schema", tool.output_schema),
    h("section", {"aria-labelledby": "formats-heading"},
      h("h2#formats-heading", "As each provider sees it"),
      h("div.formats", FORMATS.map(([name, title]) => h("div.card.format",
        h("h3", title),
        tool.formats && tool.formats[name] !== undefined && tool.formats[name] !== null
          ? codeBlock(tool.formats[name], {tabindex: "0", "aria-label": `${title} declaration`})
          : h("p.empty", "Not available."),
        diagnostics(tool.format_diagnostics && tool.format_diagnostics[name]))))),
    examples(tool));
}

function fact(term, value) {
  return [h("dt", term), h("dd", value)];
}

function annotations(values) {
  const set = Object.entries(values || {}).filter(([, v]) => v !== null && v !== undefined);
  return set.length ? h("ul.chips", set.map(([k, v]) => h("li", v === true ? k : `${k}: ${v}`))) : "—";
}

function figures(figures) {
  const heading = h("h2#figures-heading", "Live figures");
  if (!figures) return h("section.card", {"aria-labelledby": "figures-heading"}, heading, h("p.empty", "No figures yet: no call since the gateway started, or metrics are off."));
  const rate = figures.error_rate === null || figures.error_rate === undefined ? "—" : `${(figures.error_rate * 100).toFixed(1)} %`;
  let slo = h("span", "No SLO declared");
  if (figures.slo) {
    const target = typeof figures.slo === "object"
      ? Object.entries(figures.slo).map(([k, v]) => `${k} ${v}`).join(", ") : String(figures.slo);
    const state = figures.holds === true ? ["ok", "holds"] : figures.holds === false ? ["bad", "breached"] : ["muted", "not judged yet"];
    slo = [h(`span.badge.${state[0]}`, state[1]), " ", h("span.muted", target)];
  }
  return h("section.card", {"aria-labelledby": "figures-heading"}, heading,
    h("dl.figures", [["Calls", String(figures.calls ?? 0)], ["Errors", String(figures.errors ?? 0)], ["Error rate", rate],
      ["p50", ms(figures.p50_ms)], ["p95", ms(figures.p95_ms)], ["SLO", slo]].map(([term, value]) => h("div", fact(term, value)))));
}

// What a provider's format had to change or leave out of the tool (its schema dialect is narrower).
function diagnostics(list) {
  if (!list || !list.length) return null;
  return h("div.diagnostics", h("p.sub-title", "Adapted for this provider:"), h("ul", list.map((line) => h("li", line))));
}

function schemaSection(name, title, schema, note = null) {
  const readable = h("div", describeSchema(schema));
  const raw = h("div", {hidden: true}, codeBlock(schema ?? null, {tabindex: "0", "aria-label": `${title} as JSON`}));
  const toggle = h("button.secondary.small", {
    type: "button", "aria-pressed": "false", "aria-controls": `${name}-schema`,
    onclick: () => {
      const showRaw = toggle.getAttribute("aria-pressed") !== "true";
      toggle.setAttribute("aria-pressed", String(showRaw));
      readable.hidden = showRaw;
      raw.hidden = !showRaw;
    },
  }, "Raw JSON");
  if (!schema) return h("section.card", {"aria-labelledby": `${name}-heading`}, h(`h2#${name}-heading`, title), h("p.empty", "None declared."));
  return h("section.card", {"aria-labelledby": `${name}-heading`},
    h("div.card-head", h(`h2#${name}-heading`, title), toggle),
    note ? h("p.hint", note) : null,
    h(`div#${name}-schema`, readable, raw));
}

function examples(tool) {
  if (!tool.examples || !tool.examples.length) return null;
  return h("section.card", {"aria-labelledby": "examples-heading"},
    h("h2#examples-heading", "Examples"),
    h("ol.examples", tool.examples.map((example, i) => h("li",
      h("p", h("strong", example.title || `Example ${i + 1}`)),
      h("div.grid2", h("div", h("p.sub-title", "Arguments"), codeBlock(example.arguments ?? {})),
        example.expect ? h("div", h("p.sub-title", "Expect"), codeBlock(example.expect)) : null)))));
}
