// Editor: open a definitions file, edit it with line numbers, Check the draft against the whole catalog without
// saving (problems marked on their lines), Save only if the catalog builds and the file did not change on disk
// meanwhile, create a file from a template. A read-only definitions directory makes it read-only, saying why.

import {ApiError, describe, get, pathParam, post, put} from "./api.js";
import {fill, h, notice, uid} from "./dom.js";
import {position, problemList} from "./problems.js";

const drafts = new Map(); // path → {text, base}: unsaved edits survive leaving the page (this tab only)

export async function render(main, [target], context) {
  const listing = await get("/admin/api/files");
  const [, path, line] = (target || "").match(/^(.*?)(?::(\d+))?$/) || [];
  const readOnly = Boolean(listing.read_only);
  fill(main,
    h("div.page-head", h("h1", "Editor"),
      h("p.meta", "Files of the definitions directory. Check validates a draft with the rest of the catalog; Save writes it only if the whole catalog builds.")),
    readOnly ? h("div.notice.warn.read-only", {role: "note"}, h("strong", "Read-only. "),
      sentence(listing.read_only_reason || "the definitions directory cannot be written")) : null,
    h("div.editor-layout",
      h("nav.files", {"aria-label": "Definitions files"},
        h("h2", "Files"),
        h("ul.file-list", listing.files.map((file) => h("li",
          h("a", {href: `#/editor/${file.path}`, "aria-current": file.path === path ? "page" : undefined},
            h("span.file-path", file.path), h("span.file-size", ` ${size(file.bytes)}`))))),
        newFileForm(readOnly, listing.files, context)),
      path ? await fileEditor(path, Number(line) || 0, readOnly)
        : h("div.card.placeholder", h("p", listing.files.length ? "Open a file from the list." : "No file yet: create one."))));
}

function sentence(text) {
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}${/[.!?]$/.test(text) ? "" : "."}`;
}

function size(bytes) {
  return bytes >= 10240 ? `${Math.round(bytes / 1024)} kB` : `${bytes} B`;
}

function newFileForm(readOnly, files, context) {
  const name = h("input#new-path", {type: "text", required: true, placeholder: "my-tools.yaml", autocomplete: "off",
    disabled: readOnly, spellcheck: "false"});
  const template = h("select#new-template", {disabled: readOnly},
    h("option", {value: "http"}, "HTTP tool"), h("option", {value: "python"}, "Python tool"), h("option", {value: "empty"}, "Empty file"));
  const status = h("div.form-message");
  const submit = h("button.secondary", {type: "submit", disabled: readOnly}, "Create");
  return h("form.card.new-file", {
    "aria-labelledby": "new-file-heading",
    onsubmit: async (event) => {
      event.preventDefault();
      status.replaceChildren();
      const path = name.value.trim();
      if (!path) return;
      submit.disabled = true;
      try {
        await post("/admin/api/files", {path, template: template.value});
        context.navigate(`#/editor/${path}`);
      } catch (error) {
        status.append(notice("error", error.status === 409 ? `${path} exists already: open it from the list.` : describe(error)));
      } finally {
        submit.disabled = readOnly;
      }
    },
  },
  h("h2#new-file-heading", "New file"),
  h("div.field", h("label", {for: "new-path"}, "Path"), name),
  h("div.field", h("label", {for: "new-template"}, "Template"), template),
  submit, status);
}

async function fileEditor(path, jumpTo, readOnly) {
  let file;
  try {
    file = await get(`/admin/api/files/${pathParam(path)}`);
  } catch (error) {
    return h("div.card", h("h2", path), notice("error", describe(error)));
  }
  let base = file.sha256;
  let saved = file.text;
  const draft = drafts.get(path);
  const textId = uid("source");
  const area = h("textarea.source", {id: textId, wrap: "off", spellcheck: "false", autocapitalize: "off",
    autocomplete: "off", readonly: readOnly, "aria-readonly": readOnly ? "true" : undefined,
    "aria-describedby": "editor-status"});
  area.value = draft && draft.base === base ? draft.text : file.text;
  const gutter = h("div.gutter", {"aria-hidden": "true"});
  const marks = new Map(); // line → messages
  const status = h("div#editor-status.form-message");
  const found = h("section.editor-problems", {"aria-labelledby": "found-heading", hidden: true});
  const modified = h("span.modified", {hidden: true}, "modified");
  const check = h("button.secondary", {type: "button", disabled: readOnly, onclick: () => act(doCheck)}, "Check");
  const save = h("button", {type: "button", disabled: readOnly, onclick: () => act(doSave)}, "Save");

  function lines() {
    return area.value.split("\n").length;
  }

  function paintGutter() {
    const count = lines();
    const rows = [];
    for (let n = 1; n <= count; n += 1) {
      const messages = marks.get(n);
      rows.push(h(`div.gl${messages ? ".bad" : ""}`, {title: messages ? messages.join("\n") : undefined, dataset: {line: n}}, String(n)));
    }
    fill(gutter, ...rows);
    gutter.scrollTop = area.scrollTop;
  }

  function setModified() {
    const changed = area.value !== saved;
    modified.hidden = !changed;
    if (changed) drafts.set(path, {text: area.value, base});
    else drafts.delete(path);
  }

  let lineCount = lines();
  area.addEventListener("input", () => {
    if (lines() !== lineCount) {
      lineCount = lines();
      paintGutter();
    }
    setModified();
  });
  area.addEventListener("scroll", () => { gutter.scrollTop = area.scrollTop; });
  area.addEventListener("keydown", (event) => { // Tab is left to move focus: no keyboard trap
    if ((event.ctrlKey || event.metaKey) && event.key === "s") {
      event.preventDefault();
      if (!readOnly) act(doSave);
    }
  });

  function jump(lineNumber) {
    const starts = area.value.split("\n").slice(0, lineNumber - 1).reduce((sum, text) => sum + text.length + 1, 0);
    const end = area.value.indexOf("\n", starts);
    area.focus();
    area.setSelectionRange(starts, end < 0 ? area.value.length : end);
    const lineHeight = parseFloat(getComputedStyle(area).lineHeight) || 20;
    area.scrollTop = Math.max(0, (lineNumber - 1) * lineHeight - area.clientHeight / 3);
    gutter.scrollTop = area.scrollTop;
  }

  function showProblems(problems, heading) {
    marks.clear();
    const mine = problems.filter((p) => samePath(p.file, path));
    for (const problem of mine) {
      const list = marks.get(problem.line) || [];
      list.push(`${position(problem)}: ${problem.message}`);
      marks.set(problem.line, list);
    }
    paintGutter();
    found.hidden = !problems.length;
    fill(found, h("h3#found-heading", heading),
      problemList(problems, {onPick: (problem) => (samePath(problem.file, path) ? jump(problem.line) : null)}));
  }

  async function act(action) {
    check.disabled = save.disabled = true;
    fill(status, h("p", {role: "status"}, "Working…"));
    try {
      await action();
    } catch (error) {
      fill(status, notice("error", describe(error)));
    } finally {
      check.disabled = save.disabled = readOnly;
    }
  }

  async function doCheck() {
    const answer = await post("/admin/api/check", {path, text: area.value});
    if (answer.ok && !answer.problems.length) {
      showProblems([], "");
      fill(status, notice("info", "No problems: the whole catalog builds with this draft. Nothing was saved."));
    } else {
      showProblems(answer.problems, "Problems in this draft");
      fill(status, notice("error", `${answer.problems.length} problem${answer.problems.length === 1 ? "" : "s"}: the catalog would not build with this draft.`));
    }
  }

  async function doSave() {
    const text = area.value;
    try {
      const answer = await put(`/admin/api/files/${pathParam(path)}`, {text, base_sha256: base});
      base = answer.sha256;
      saved = text;
      setModified();
      showProblems([], "");
      const reload = answer.reload;
      fill(status, notice("info", "Saved. ", reload
        ? (reload.ok ? `The reload serves it${reload.version ? ` (catalog ${reload.version})` : ""}.` : "The reload failed: see Problems & reloads.")
        : "The reload will serve it."));
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (error.status === 409) {
        fill(status, notice("error", h("strong", "Not saved: the file changed on disk since you opened it. "),
          "Reload it to see the new version (your edits here would be lost: copy them first). ",
          h("button.secondary.small", {type: "button", onclick: reloadFromDisk}, "Reload from disk")));
      } else if (error.status === 422) {
        showProblems(error.body.problems || [], "Why it was not saved");
        fill(status, notice("error", "Not saved: the catalog would not build with this file. Fix the problems below."));
      } else if (error.status === 403) {
        fill(status, notice("error", `Not saved: ${error.message}`));
      } else {
        throw error;
      }
    }
  }

  async function reloadFromDisk() {
    const fresh = await get(`/admin/api/files/${pathParam(path)}`);
    base = fresh.sha256;
    saved = fresh.text;
    area.value = fresh.text;
    drafts.delete(path);
    setModified();
    lineCount = lines();
    showProblems([], "");
    fill(status, notice("info", "Reloaded from disk."));
  }

  paintGutter();
  setModified();
  if (jumpTo) setTimeout(() => jump(jumpTo), 0); // once the page holds the editor
  return h("section.card.file-editor", {"aria-labelledby": "file-heading"},
    h("div.card-head", h("h2#file-heading", h("code", path), " ", modified),
      h("div.actions", check, save)),
    h("label.visually-hidden", {for: textId}, `Contents of ${path}`),
    h(`div.editor${readOnly ? ".readonly" : ""}`, gutter, area),
    status,
    found);
}

function samePath(file, path) {
  if (!file) return false;
  return file === path || file.endsWith(`/${path}`);
}
