// JSON Schema, read by people: a nested list of properties with their types, constraints and required marks.

import {h} from "./dom.js";

/** `schema` with a local $ref ("#/$defs/X", "#/definitions/X") replaced by its target, merged with siblings. */
export function resolve(schema, root, seen = new Set()) {
  if (!schema || typeof schema !== "object" || typeof schema.$ref !== "string" || !schema.$ref.startsWith("#")) {
    return schema;
  }
  if (seen.has(schema.$ref)) return {description: `(recursive: ${schema.$ref})`};
  seen.add(schema.$ref);
  let target = root;
  for (const part of schema.$ref.slice(1).split("/").filter(Boolean)) {
    target = target?.[part.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  const {$ref, ...rest} = schema;
  return resolve({...(target || {}), ...rest}, root, seen);
}

/** The JSON types a schema allows (inferred from enum/const/properties/items when `type` is absent). */
export function typesOf(schema) {
  if (!schema || typeof schema !== "object") return [];
  if (Array.isArray(schema.type)) return schema.type;
  if (schema.type) return [schema.type];
  if (schema.properties) return ["object"];
  if (schema.items) return ["array"];
  return [];
}

export function typeLabel(schema) {
  const types = typesOf(schema);
  let label = types.length ? types.join(" | ") : schema.oneOf || schema.anyOf ? "one of" : "any";
  if (!types.length && schema.const !== undefined) label = schema.const === null ? "null" : typeof schema.const;
  if (types.includes("array") && schema.items && !Array.isArray(schema.items)) {
    const itemTypes = typesOf(schema.items);
    if (itemTypes.length && !itemTypes.includes("object")) label = label.replace("array", `array of ${itemTypes.join(" | ")}`);
  }
  if (schema.format) label += ` (${schema.format})`;
  return label;
}

const CONSTRAINTS = [
  ["minimum", "≥"], ["exclusiveMinimum", ">"], ["maximum", "≤"], ["exclusiveMaximum", "<"], ["multipleOf", "multiple of"],
  ["minLength", "min length"], ["maxLength", "max length"], ["pattern", "pattern"],
  ["minItems", "min items"], ["maxItems", "max items"], ["uniqueItems", "unique items"],
  ["minProperties", "min properties"], ["maxProperties", "max properties"],
];

export function constraints(schema) {
  const out = [];
  for (const [name, label] of CONSTRAINTS) {
    if (schema[name] !== undefined && schema[name] !== false) {
      out.push(schema[name] === true ? label : `${label} ${typeof schema[name] === "string" ? schema[name] : JSON.stringify(schema[name])}`);
    }
  }
  if (schema.const !== undefined) out.push(`always ${JSON.stringify(schema.const)}`);
  if (schema.default !== undefined) out.push(`default ${JSON.stringify(schema.default)}`);
  if (schema.additionalProperties === false) out.push("no other properties");
  return out;
}

/** The readable view of a whole schema (an object's properties as a list; anything else as one entry). */
export function describeSchema(schema, root = schema) {
  if (!schema || (typeof schema === "object" && !Object.keys(schema).length)) return h("p.empty", "Any JSON value.");
  return h("div.schema", body(resolve(schema, root), root, 0));
}

function body(schema, root, depth) {
  if (depth > 12) return h("p.empty", "(nested too deep to show)");
  const parts = [];
  if (schema.enum) parts.push(h("p.enum", "One of: ", h("ul.chips", schema.enum.map((v) => h("li", h("code", JSON.stringify(v)))))));
  const properties = schema.properties || {};
  const required = new Set(schema.required || []);
  if (Object.keys(properties).length) {
    parts.push(h("ul.props", Object.entries(properties).map(([name, sub]) => property(name, resolve(sub, root), required.has(name), root, depth))));
  } else if (typesOf(schema).includes("object") && depth === 0 && !schema.additionalProperties) {
    parts.push(h("p.empty", "No parameters."));
  }
  if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
    parts.push(h("div.sub", h("p.sub-title", "Any other property:"), entry(resolve(schema.additionalProperties, root), root, depth + 1)));
  }
  if (schema.items && typeof schema.items === "object" && !Array.isArray(schema.items)) {
    const items = resolve(schema.items, root);
    if (items.properties || items.enum || items.oneOf || items.anyOf || items.items) {
      parts.push(h("div.sub", h("p.sub-title", "Each item:"), entry(items, root, depth + 1)));
    }
  }
  for (const keyword of ["oneOf", "anyOf", "allOf"]) {
    if (Array.isArray(schema[keyword])) {
      const title = {oneOf: "Exactly one of:", anyOf: "Any of:", allOf: "All of:"}[keyword];
      parts.push(h("div.sub", h("p.sub-title", title), h("ol.branches", schema[keyword].map((branch) =>
        h("li", entry(resolve(branch, root), root, depth + 1))))));
    }
  }
  return parts;
}

function entry(schema, root, depth) {
  return [
    h("span.type", typeLabel(schema)),
    schema.title ? h("span.title", ` ${schema.title}`) : null,
    schema.description ? h("p.desc", schema.description) : null,
    constraintList(schema),
    body(schema, root, depth),
  ];
}

function property(name, schema, required, root, depth) {
  return h("li.prop",
    h("div.prop-head",
      h("code.name", name),
      h("span.type", typeLabel(schema)),
      required ? h("span.req", {title: "required"}, "required") : h("span.opt", "optional")),
    schema.description ? h("p.desc", schema.description) : null,
    constraintList(schema),
    body(schema, root, depth + 1));
}

function constraintList(schema) {
  const list = constraints(schema);
  return list.length ? h("ul.constraints", list.map((text) => h("li", text))) : null;
}
