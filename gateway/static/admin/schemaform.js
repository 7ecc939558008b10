// A form generated from a JSON Schema: each field knows how to read its value (UNSET when left out) and how to
// show a given value (presets, switching from raw JSON back to the form).

import {h, uid} from "./dom.js";
import {constraints, resolve, typeLabel, typesOf} from "./schema.js";

export const UNSET = Symbol("unset");
const MAX_DEPTH = 8;
const INPUT_TYPES = {
  date: "date", time: "time", "date-time": "datetime-local", email: "email", "idn-email": "email",
  uri: "url", url: "url", iri: "url", "uri-reference": "text",
};

/** A value the form cannot turn into JSON (raw JSON that does not parse), named by the field's label. */
export class FormError extends Error {}

/** The form for a tool's input schema: {element, read(), write(value)}; read() gives the arguments object. */
export function schemaForm(schema, idPrefix = "arg") {
  const root = schema || {};
  const top = normalise(resolve(root, root), root);
  if (!top || !top.properties || !Object.keys(top.properties).length) {
    if (typesOf(top).includes("object") || !Object.keys(top || {}).length) {
      return {element: h("p.empty", "This tool takes no arguments."), read: () => ({}), write: () => {}};
    }
  }
  const field = build(top, {name: idPrefix, label: "Arguments", required: true, root, depth: 0, top: true});
  return {
    element: field.element,
    read: () => {
      const value = field.read();
      return value === UNSET ? {} : value;
    },
    write: (value) => field.write(value),
  };
}

// allOf merged into one schema (properties and required joined): good enough for a form.
function normalise(schema, root) {
  if (!schema || typeof schema !== "object" || !Array.isArray(schema.allOf)) return schema;
  const {allOf, ...rest} = schema;
  const merged = {...rest, properties: {...(rest.properties || {})}, required: [...(rest.required || [])]};
  for (const part of allOf.map((p) => normalise(resolve(p, root), root))) {
    Object.assign(merged.properties, part.properties || {});
    merged.required.push(...(part.required || []));
    for (const [k, v] of Object.entries(part)) if (!(k in merged)) merged[k] = v;
  }
  return merged;
}

function build(schema, ctx) {
  schema = normalise(resolve(schema, ctx.root), ctx.root) || {};
  if (ctx.depth > MAX_DEPTH) return jsonField(schema, ctx);
  if (schema.const !== undefined) return constField(schema, ctx);
  const branches = schema.oneOf || schema.anyOf;
  if (Array.isArray(branches)) {
    const {oneOf, anyOf, ...base} = schema;
    return choiceField(branches.map((b) => ({...base, ...resolve(b, ctx.root)})), schema, ctx);
  }
  if (Array.isArray(schema.enum)) return enumField(schema, ctx);
  const types = typesOf(schema);
  if (types.length > 1) return choiceField(types.map((type) => ({...schema, type})), schema, ctx);
  switch (types[0]) {
    case "boolean": return booleanField(schema, ctx);
    case "integer":
    case "number": return numberField(schema, ctx, types[0]);
    case "string": return stringField(schema, ctx);
    case "null": return constField({...schema, const: null}, ctx);
    case "array":
      return schema.items && typeof schema.items === "object" && !Array.isArray(schema.items) && !schema.prefixItems
        ? arrayField(schema, ctx) : jsonField(schema, ctx);
    case "object":
      return schema.properties && Object.keys(schema.properties).length ? objectField(schema, ctx) : jsonField(schema, ctx);
    default: return jsonField(schema, ctx);
  }
}

// ---- pieces every field shares: label, hint, wrapper ----

function labelText(schema, ctx) {
  return [ctx.label, ctx.required && !ctx.item ? h("span.req-mark", " (required)") : null];
}

function hint(schema, id) {
  const parts = [schema.description, constraints(schema).join(" · ")].filter(Boolean);
  return parts.length ? h("p.hint", {id}, parts.join(" — ")) : null;
}

function wrap(schema, ctx, control, extra = null) {
  const id = control.id;
  const hintId = `${id}-hint`;
  const help = hint(schema, hintId);
  if (help) control.setAttribute("aria-describedby", hintId);
  return h("div.field", {dataset: {field: ctx.label}},
    h("label.field-label", {for: id}, labelText(schema, ctx), h("span.type-note", ` ${typeLabel(schema)}`)),
    extra ? h("div.control-row", control, extra) : control,
    help);
}

// ---- scalar fields ----

function stringField(schema, ctx) {
  const type = INPUT_TYPES[schema.format] || "text";
  const long = (schema.maxLength || 0) > 200 || schema.format === "textarea";
  const input = long
    ? h("textarea", {id: uid(ctx.name), rows: 3})
    : h("input", {id: uid(ctx.name), type, step: type === "datetime-local" || type === "time" ? "1" : undefined,
      minlength: schema.minLength, maxlength: schema.maxLength,
      placeholder: schema.default !== undefined ? `default: ${schema.default}` : (schema.examples || [])[0]});
  if (ctx.required) input.setAttribute("aria-required", "true");
  return {
    element: wrap(schema, ctx, input),
    read() {
      if (input.value === "") return ctx.required ? "" : UNSET;
      if (type === "datetime-local") {
        const date = new Date(input.value);
        return Number.isNaN(date.getTime()) ? input.value : date.toISOString();
      }
      return input.value;
    },
    write(value) {
      if (value === undefined || value === UNSET || value === null) input.value = "";
      else if (type === "datetime-local" && typeof value === "string") input.value = toLocalDateTime(value);
      else input.value = String(value);
    },
  };
}

function toLocalDateTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

function numberField(schema, ctx, type) {
  const min = schema.minimum ?? schema.exclusiveMinimum;
  const max = schema.maximum ?? schema.exclusiveMaximum;
  const input = h("input", {id: uid(ctx.name), type: "number", inputmode: type === "integer" ? "numeric" : "decimal",
    min, max, step: schema.multipleOf ?? (type === "integer" ? 1 : "any"),
    placeholder: schema.default !== undefined ? `default: ${schema.default}` : undefined});
  if (ctx.required) input.setAttribute("aria-required", "true");
  return {
    element: wrap(schema, ctx, input),
    read() {
      if (input.value === "") return UNSET;
      const value = Number(input.value);
      return Number.isFinite(value) ? value : input.value; // the gateway says what is wrong with it
    },
    write(value) {
      input.value = value === undefined || value === UNSET || value === null ? "" : String(value);
    },
  };
}

function booleanField(schema, ctx) {
  const input = h("input", {id: uid(ctx.name), type: "checkbox"});
  // An optional boolean starts "mixed" (left out); a click sets it, "Leave unset" takes it back out.
  const unset = ctx.required ? null : h("button.link.small", {type: "button", onclick: () => { input.indeterminate = true; input.checked = false; }},
    h("span", "Leave unset"), h("span.visually-hidden", ` (${ctx.label})`));
  const write = (value) => {
    input.indeterminate = !ctx.required && (value === undefined || value === UNSET || value === null);
    input.checked = value === true;
  };
  write(ctx.required ? Boolean(schema.default) : UNSET);
  const id = input.id;
  const help = hint(schema, `${id}-hint`);
  if (help) input.setAttribute("aria-describedby", `${id}-hint`);
  return {
    element: h("div.field.check", {dataset: {field: ctx.label}},
      h("div.control-row", input, h("label", {for: id}, labelText(schema, ctx), h("span.type-note", " boolean")), unset), help),
    read: () => (input.indeterminate ? UNSET : input.checked),
    write,
  };
}

function enumField(schema, ctx) {
  const values = schema.enum;
  const select = h("select", {id: uid(ctx.name)},
    h("option", {value: ""}, ctx.required ? "— choose —" : "— unset —"),
    values.map((value, i) => h("option", {value: String(i)},
      typeof value === "string" ? value : JSON.stringify(value), value === schema.default ? " (default)" : "")));
  if (ctx.required) select.setAttribute("aria-required", "true");
  return {
    element: wrap(schema, ctx, select),
    read: () => (select.value === "" ? UNSET : values[Number(select.value)]),
    write(value) {
      const index = values.findIndex((v) => JSON.stringify(v) === JSON.stringify(value));
      select.value = index < 0 ? "" : String(index);
    },
  };
}

function constField(schema, ctx) {
  return {
    element: h("div.field", {dataset: {field: ctx.label}}, h("span.field-label", labelText(schema, ctx)), " ",
      h("code", JSON.stringify(schema.const)), h("span.type-note", " (fixed)")),
    read: () => schema.const,
    write: () => {},
  };
}

// Anything the form cannot shape (free-form objects, tuples, "any"): a JSON text box.
function jsonField(schema, ctx) {
  const area = h("textarea.mono", {id: uid(ctx.name), rows: 3, spellcheck: "false", placeholder: "JSON value"});
  return {
    element: wrap(schema, ctx, area),
    read() {
      if (!area.value.trim()) return UNSET;
      try {
        return JSON.parse(area.value);
      } catch (error) {
        area.setAttribute("aria-invalid", "true");
        throw new FormError(`${ctx.label}: not valid JSON (${error.message})`);
      }
    },
    write(value) {
      area.removeAttribute("aria-invalid");
      area.value = value === undefined || value === UNSET ? "" : JSON.stringify(value, null, 2);
    },
  };
}

// ---- structured fields ----

/** A fieldset whose legend may hold an "include" checkbox (optional objects and arrays). */
function group(schema, ctx, className) {
  const body = h("div.group-body");
  let include = null;
  let legend;
  if (ctx.required || ctx.top) {
    // A branch of a choice already sits under the choice's own legend: its legend is for screen readers only.
    legend = h(`legend.field-label${ctx.branch ? ".visually-hidden" : ""}`, labelText(schema, ctx), h("span.type-note", ` ${typeLabel(schema)}`));
  } else {
    const id = uid(`${ctx.name}-include`);
    include = h("input", {id, type: "checkbox"});
    legend = h("legend", include, h("label", {for: id}, ctx.label, h("span.type-note", ` ${typeLabel(schema)} · include`)));
    include.addEventListener("change", () => { body.hidden = !include.checked; });
    body.hidden = true;
  }
  const element = h(`fieldset.${className}${ctx.branch ? ".branch-body" : ""}`, {dataset: {field: ctx.label}}, ctx.top ? null : legend,
    schema.description && !ctx.top ? h("p.hint", schema.description) : null, body);
  return {
    element, body,
    included: () => !include || include.checked,
    setIncluded(on) {
      if (!include) return;
      include.checked = on;
      body.hidden = !on;
    },
  };
}

function objectField(schema, ctx) {
  const box = group(schema, ctx, "object");
  const required = new Set(schema.required || []);
  const fields = Object.entries(schema.properties).map(([name, sub]) => [name, build(sub, {
    name: `${ctx.name}-${name.replace(/[^A-Za-z0-9_-]/g, "_")}`, label: ctx.top ? name : `${name}`,
    required: required.has(name), root: ctx.root, depth: ctx.depth + 1})]);
  for (const [, field] of fields) box.body.append(field.element);
  return {
    element: box.element,
    read() {
      if (!box.included()) return UNSET;
      const out = {};
      for (const [name, field] of fields) {
        const value = field.read();
        if (value !== UNSET) out[name] = value;
      }
      return out;
    },
    write(value) {
      const present = value !== undefined && value !== UNSET && value !== null && typeof value === "object";
      box.setIncluded(present);
      for (const [name, field] of fields) field.write(present ? value[name] : undefined);
    },
  };
}

function arrayField(schema, ctx) {
  const box = group(schema, ctx, "array");
  const list = h("ol.items");
  const items = [];
  const addButton = h("button.secondary.small", {type: "button", onclick: () => { add(); items.at(-1).focus(); }},
    "Add item", h("span.visually-hidden", ` to ${ctx.label}`));
  box.body.append(list, addButton);

  function relabel() {
    items.forEach((item, i) => {
      const label = item.row.querySelector(".field-label");
      if (label) label.firstChild.textContent = `${ctx.label} item ${i + 1}`;
      item.remove.lastChild.textContent = ` ${ctx.label} item ${i + 1}`;
    });
  }

  function add(value) {
    const field = build(schema.items, {name: `${ctx.name}-item`, label: `${ctx.label} item ${items.length + 1}`,
      required: true, item: true, root: ctx.root, depth: ctx.depth + 1});
    const item = {field, row: null, remove: null, focus: () => field.element.querySelector("input, select, textarea")?.focus()};
    item.remove = h("button.link.small.remove", {type: "button", onclick: () => {
      items.splice(items.indexOf(item), 1);
      item.row.remove();
      relabel();
      addButton.focus();
    }}, "Remove", h("span.visually-hidden", ` ${ctx.label} item ${items.length + 1}`));
    item.row = h("li.item", field.element, item.remove);
    items.push(item);
    list.append(item.row);
    if (value !== undefined) field.write(value);
  }

  return {
    element: box.element,
    read() {
      if (!box.included()) return UNSET;
      return items.map((item) => item.field.read()).map((v) => (v === UNSET ? null : v));
    },
    write(value) {
      const present = Array.isArray(value);
      box.setIncluded(present);
      items.splice(0).forEach((item) => item.row.remove());
      if (present) value.forEach((v) => add(v));
    },
  };
}

function choiceField(branches, schema, ctx) {
  const id = uid(`${ctx.name}-choice`);
  const select = h("select", {id},
    ctx.required ? null : h("option", {value: ""}, "— unset —"),
    branches.map((branch, i) => h("option", {value: String(i)}, branchName(branch, i))));
  const holder = h("div.branch");
  let current = null;
  function show(index) {
    holder.replaceChildren();
    current = index === "" ? null : build(branches[Number(index)], {name: ctx.name, label: ctx.label, required: true,
      branch: true, root: ctx.root, depth: ctx.depth + 1});
    if (current) holder.append(current.element);
  }
  select.addEventListener("change", () => show(select.value));
  show(select.value);
  return {
    element: h("fieldset.choice", {dataset: {field: ctx.label}},
      h("legend.field-label", labelText(schema, ctx), h("span.type-note", " one of")),
      schema.description ? h("p.hint", schema.description) : null,
      h("div.field", h("label", {for: id}, `Which kind of ${ctx.label}`), select),
      holder),
    read: () => (current ? current.read() : UNSET),
    write(value) {
      if (value === undefined || value === UNSET) {
        select.value = ctx.required ? "0" : "";
      } else {
        const index = branches.findIndex((branch) => fits(value, resolve(branch, ctx.root)));
        select.value = String(index < 0 ? 0 : index);
      }
      show(select.value);
      if (current && value !== undefined && value !== UNSET) current.write(value);
    },
  };
}

function branchName(branch, i) {
  if (branch.title) return branch.title;
  if (branch.const !== undefined) return JSON.stringify(branch.const);
  const types = typesOf(branch);
  if (branch.properties) return `object (${Object.keys(branch.properties).slice(0, 3).join(", ")})`;
  return types.length ? typeLabel(branch) : `option ${i + 1}`;
}

// Which branch a preset's value belongs to: its JSON type, and for objects the required properties present.
function fits(value, schema) {
  if (schema.const !== undefined) return JSON.stringify(schema.const) === JSON.stringify(value);
  if (Array.isArray(schema.enum)) return schema.enum.some((v) => JSON.stringify(v) === JSON.stringify(value));
  const types = typesOf(schema);
  const kind = value === null ? "null" : Array.isArray(value) ? "array" : typeof value === "number"
    ? (Number.isInteger(value) ? "integer" : "number") : typeof value;
  if (types.length && !types.includes(kind) && !(kind === "integer" && types.includes("number"))) return false;
  if (kind === "object") return (schema.required || []).every((name) => name in value);
  return true;
}
