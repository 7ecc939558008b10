// Building the DOM from data without ever parsing data as HTML: every string goes in as a text node.

/**
 * h("div.card#main", {onclick, hidden: true, "aria-label": "x"}, child, [children], "text")
 * Attributes: on* are listeners, booleans set/unset the attribute, `dataset` an object, `className` a string.
 * Children: strings and numbers become text nodes; null, undefined and false are skipped; arrays are flattened.
 */
export function h(tag, attrs, ...children) {
  const [name, ...rest] = tag.split(/(?=[.#])/);
  const el = document.createElement(name || "div");
  for (const part of rest) {
    if (part[0] === ".") el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "className") el.className += (el.className ? " " : "") + value;
    else if (key === "value" || key === "checked" || key === "selected") el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replace el's children (same rules as h's children: null/false skipped, arrays flattened). */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

let counter = 0;
/** A fresh id for pairing a label with its control. */
export function uid(prefix = "f") {
  counter += 1;
  return `${prefix}-${counter}`;
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

/** A <pre><code> block of text (JSON when given a non-string). */
export function codeBlock(value, attrs = {}) {
  return h("pre.code", attrs, h("code", typeof value === "string" ? value : json(value)));
}

export function time(at) {
  if (at === null || at === undefined) return "—";
  const date = typeof at === "number" ? new Date(at * 1000) : new Date(at);
  return Number.isNaN(date.getTime()) ? String(at) : date.toLocaleString();
}

export function clock(at) {
  const date = typeof at === "number" ? new Date(at * 1000) : new Date(at);
  return Number.isNaN(date.getTime()) ? String(at) : date.toLocaleTimeString();
}

export function ms(value) {
  if (value === null || value === undefined) return "—";
  return value >= 100 ? `${Math.round(value)} ms` : `${Number(value).toFixed(1)} ms`;
}

/** A status message area that screen readers announce. */
export function notice(kind, ...children) {
  return h(`div.notice.${kind}`, {role: kind === "error" ? "alert" : "status"}, ...children);
}

/** A table that scrolls sideways inside its own box on narrow screens; `cells` gives a row's cells. */
export function table(caption, headers, rows, cells, rowAttrs = () => ({})) {
  return h("div.table-wrap", {role: "region", "aria-label": `${caption} table`, tabindex: "0"},
    h("table",
      h("caption.visually-hidden", caption),
      h("thead", h("tr", headers.map((title) => h("th", {scope: "col"}, title || h("span.visually-hidden", "Actions"))))),
      h("tbody", rows.map((row) => h("tr", rowAttrs(row), cells(row).map((cell, i) =>
        h("td", {"data-label": headers[i]}, cell)))))));
}
