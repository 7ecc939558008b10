// Try it: call a tool through the same path as any client (POST /tools/{id}/call, audited as this admin), with
// arguments from a form generated from its input schema or typed as raw JSON; examples are presets.

import {describe, get, pathParam, post} from "./api.js";
import {codeBlock, fill, h, ms, notice} from "./dom.js";
import {FormError, schemaForm} from "./schemaform.js";

export async function render(main, [id]) {
  const tool = await get(`/admin/api/tools/${pathParam(id)}`);
  const form = schemaForm(tool.input_schema);
  const raw = h("textarea#raw-arguments.mono", {rows: 12, spellcheck: "false", "aria-describedby": "raw-help"});
  const rawBox = h("div.field", {hidden: true},
    h("label", {for: "raw-arguments"}, "Arguments (JSON)"),
    raw,
    h("p.hint#raw-help", "A JSON object; it is sent as it is."));
  const formBox = h("div.generated", form.element);
  const message = h("div.form-message");
  const output = h("section.card.result", {"aria-labelledby": "result-heading", hidden: true});
  let mode = "form";

  const modeButtons = ["form", "raw"].map((name) => h("button.tab", {type: "button", "aria-pressed": String(name === mode),
    onclick: () => setMode(name)}, name === "form" ? "Form" : "Raw JSON"));

  function setMode(next) {
    if (next === mode) return;
    message.replaceChildren();
    try {
      if (next === "raw") raw.value = JSON.stringify(form.read(), null, 2);
      else form.write(parseRaw());
    } catch (error) {
      message.append(notice("error", error.message));
      return;
    }
    mode = next;
    rawBox.hidden = mode !== "raw";
    formBox.hidden = mode !== "form";
    modeButtons.forEach((button, i) => button.setAttribute("aria-pressed", String((i === 0) === (mode === "form"))));
  }

  function parseRaw() {
    if (!raw.value.trim()) return {};
    try {
      return JSON.parse(raw.value);
    } catch (error) {
      throw new FormError(`The raw arguments are not valid JSON: ${error.message}`);
    }
  }

  function preset(example) {
    message.replaceChildren();
    form.write(example.arguments ?? {});
    raw.value = JSON.stringify(example.arguments ?? {}, null, 2);
    message.append(notice("info", `Loaded ${example.title || "the example"}.`));
  }

  async function call(event) {
    event.preventDefault();
    message.replaceChildren();
    let args;
    try {
      args = mode === "raw" ? parseRaw() : form.read();
    } catch (error) {
      message.append(notice("error", error.message));
      return;
    }
    submit.disabled = true;
    output.hidden = false;
    fill(output, h("h2#result-heading", "Result"), h("p", {role: "status"}, "Calling…"));
    const started = performance.now();
    try {
      const answer = await post(`/tools/${pathParam(tool.id)}/call`, args);
      showResult(answer, performance.now() - started, args);
    } catch (error) {
      fill(output, h("h2#result-heading", "Result"), notice("error", describe(error)));
    } finally {
      submit.disabled = false;
    }
  }

  function showResult(answer, duration, args) {
    const failed = answer.is_error;
    fill(output,
      h("div.card-head", h("h2#result-heading", "Result"),
        h("p.outcome", {role: "status"}, h(`span.badge.${failed ? "bad" : "ok"}`, failed ? "error" : "ok"), ` in ${ms(duration)}`)),
      answer.error ? h("div", h("h3", "Error"), h("p.error-text", answer.error)) : null,
      h("div", h("h3", "Text"), codeBlock(answer.text ?? "", {tabindex: "0", "aria-label": "Result text", className: "result-text"})),
      h("div", h("h3", "Result (JSON)"), codeBlock(answer.result ?? null, {tabindex: "0", "aria-label": "Result JSON", className: "result-json"})),
      h("details", h("summary", "Arguments sent"), codeBlock(args)));
  }

  const submit = h("button#call", {type: "submit"}, "Call ", tool.id);
  const examples = tool.examples || [];
  fill(main,
    h("div.page-head",
      h("p.crumbs", h("a", {href: "#/"}, "Catalog"), " / ", h("a", {href: `#/tools/${encodeURIComponent(tool.id)}`}, h("code", tool.id)), " / try"),
      h("h1", "Try ", tool.name || tool.id),
      h("p.meta", "Calls go through the same path as any client (", h("code", `POST /tools/${tool.id}/call`), ") and are audited as you.")),
    examples.length ? h("section.card", {"aria-labelledby": "presets-heading"},
      h("h2#presets-heading", "Examples"),
      h("ul.presets", examples.map((example, i) => h("li", h("button.secondary.small", {type: "button", onclick: () => preset(example)},
        "Use ", example.title || `example ${i + 1}`))))) : null,
    h("form.card.try", {novalidate: true, onsubmit: call, "aria-label": `Arguments for ${tool.id}`},
      h("div.mode", {role: "group", "aria-label": "How to enter the arguments"}, modeButtons),
      formBox,
      rawBox,
      message,
      h("div.actions", submit)),
    output);
}
