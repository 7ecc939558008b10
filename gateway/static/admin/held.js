// Tools the lock file holds: what an upstream, an OpenAPI document or a plugin changed since tools.lock.json,
// each changed field side by side (as locked, as it says now), and an Approve button that records it in the lock
// file (the gateway reloads and serves it as it is now).

import {describe, post} from "./api.js";
import {codeBlock, h, table} from "./dom.js";

const SERVED = {as_locked: "served as locked", no: "not served"};
const FOCUSABLE = {tabindex: "0"};

// What the last approval did, said by the page drawn again after it (the drawing replaces this section).
let notice = "";

export function heldSection(held, reload) {
  const said = notice;
  notice = "";
  if (!held.length) return said ? h("p.tally", {role: "status"}, said) : null;
  const status = h("p.tally", {role: "status"}, said);
  const approve = async (tool, button) => {
    if (!confirm(`Approve ${tool.tool} as it is now? The model will read its new text and schema.`)) return;
    button.disabled = true;
    try {
      await post(`/admin/api/held/${encodeURIComponent(tool.tool)}`, {digest: tool.digest});
    } catch (error) {
      button.disabled = false;
      status.textContent = describe(error);
      return;
    }
    notice = `Approved ${tool.tool}: recorded in tools.lock.json, served as it is now.`;
    await reload();
  };
  return h("section", {"aria-labelledby": "held-heading"},
    h("h2#held-heading", "Held by the lock file"),
    status,
    held.map((tool) => {
      const button = h("button.small", {type: "button", "aria-label": `Approve ${tool.tool} as it is now`}, "Approve");
      button.addEventListener("click", () => approve(tool, button));
      return h("div.held",
        h("h3", h("code", tool.tool), ` — ${tool.change === "new" ? "not in the lock" : `changed: ${tool.change}`}; `,
          SERVED[tool.served] || tool.served, " ", button),
        table(`Changes of ${tool.tool}`, ["Field", "Locked", "Now"], tool.fields,
          // Focusable: a long schema scrolls, and a keyboard must reach it.
          (f) => [f.field, f.locked === null || f.locked === undefined ? "—" : codeBlock(f.locked, FOCUSABLE),
            codeBlock(f.now, FOCUSABLE)]));
    }));
}
