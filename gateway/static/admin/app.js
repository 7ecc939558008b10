// The console's shell: sign-in, navigation and hash routing. Each page is a module exporting
// render(main, params, context) that fills <main> and may return a function that stops what it started.

import {ApiError, describe, get, key, refused} from "./api.js";
import {clear, h, notice} from "./dom.js";
import * as identity from "./signin.js";

const ROUTES = [
  [/^\/?$/, "catalog", "Catalog", () => import("./catalog.js")],
  [/^\/tools\/([^/]+)$/, "catalog", "Tool", () => import("./tool.js")],
  [/^\/tools\/([^/]+)\/try$/, "catalog", "Try it", () => import("./tryit.js")],
  [/^\/problems$/, "problems", "Problems & reloads", () => import("./problems.js")],
  [/^\/calls$/, "calls", "Live calls", () => import("./calls.js")],
  [/^\/editor(?:\/(.+))?$/, "editor", "Editor", () => import("./editor.js")],
];

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const menu = document.getElementById("menu");
let stopPage = null;
let overview = null;
let rendering = 0;
let signInOptions; // how to sign in at the identity provider: undefined until read, null when there is none

const context = {
  get overview() {
    return overview;
  },
  async refreshOverview() {
    overview = await get("/admin/api/overview");
    showOverview();
    return overview;
  },
  navigate(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  },
};

function showOverview() {
  const badge = document.getElementById("problem-count");
  const problems = overview?.last_reload && !overview.last_reload.ok ? overview.last_reload.problems : 0;
  const count = Array.isArray(problems) ? problems.length : Number(problems) || 0;
  badge.hidden = !count;
  badge.textContent = count ? String(count) : "";
  badge.setAttribute("aria-label", `${count} problems`);
  document.getElementById("who").hidden = false;
  document.getElementById("who-text").textContent = overview?.user ? `Signed in as ${overview.user}`
    : overview?.auth ? "Signed in with an admin key" : "Auth off (loopback)";
  document.getElementById("sign-out").hidden = !overview?.auth;
}

async function route(event) {
  const navigated = Boolean(event); // a hashchange, not the first page of the tab
  const path = location.hash.replace(/^#/, "") || "/"; // its parts are decoded once matched
  const ticket = ++rendering;
  if (stopPage) {
    stopPage();
    stopPage = null;
  }
  setMenu(false);
  if (!overview) return boot();
  const match = ROUTES.map(([pattern, section, title, load]) => [path.match(pattern), section, title, load])
    .find(([found]) => found);
  if (!match) {
    clear(main).append(h("h1", "Not found"), h("p", "No page at ", h("code", path), ". ", h("a", {href: "#/"}, "Catalog")));
    return;
  }
  const [found, section, title, load] = match;
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.route === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${title} · tool-gateway admin`;
  try {
    const page = await load();
    if (ticket !== rendering) return;
    clear(main);
    main.setAttribute("aria-busy", "true");
    const stop = await page.render(main, found.slice(1).map(decodePart), context);
    if (ticket !== rendering) {
      if (stop) stop();
      return;
    }
    stopPage = stop || null;
  } catch (error) {
    if (ticket !== rendering) return;
    if (error instanceof ApiError && (error.status === 401 || error.status === 403) && !main.querySelector(".notice")) {
      return; // the sign-in page is showing
    }
    clear(main).append(h("h1", title), notice("error", describe(error)));
  } finally {
    main.removeAttribute("aria-busy");
  }
  // After a navigation, focus the new page's heading so a screen reader announces it (unless the page focused
  // something itself, as the editor does when opened at a line).
  const heading = main.querySelector("h1");
  if (heading && navigated && (document.activeElement === document.body || !main.contains(document.activeElement))) {
    heading.setAttribute("tabindex", "-1");
    heading.focus({preventScroll: true});
  }
}

async function boot(message) {
  try {
    overview = await get("/admin/api/overview", {quietAuth: true});
  } catch (error) {
    overview = null;
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
      return refuse(error);
    }
    clear(main).append(h("h1", "The console cannot start"), notice("error", describe(error)),
      h("button", {type: "button", onclick: () => boot()}, "Try again"));
    return;
  }
  nav.hidden = false;
  menu.hidden = false;
  showOverview();
  if (message) main.append(notice("info", message));
  return route();
}

function decodePart(part) {
  try {
    return part && decodeURIComponent(part);
  } catch {
    return part; // a stray "%" in a typed URL: taken as it is
  }
}

/** Back to the sign-in page, saying why the gateway refused what this tab held (and forgetting it). */
function refuse(error) {
  const token = identity.signedInAt();
  if (!key.get()) return signIn(error.status === 401 ? null : error.message);
  identity.forget();
  if (!token) {
    return signIn(error.status === 401
      ? `The gateway refused this key: ${error.message}`
      : `This key may not use the console: ${error.message}`);
  }
  if (error.status === 401) return signIn(`Your sign-in has ended: ${error.message} Sign in again.`);
  if (!/admin/i.test(error.message)) return signIn(`The gateway refused your sign-in: ${error.message}`);
  // Signing in again would bring back the same account from the identity provider's session: ask it for a fresh one.
  return signIn(`Your account is not an admin of this gateway, so the console is closed to it. Sign in with an ` +
    `admin's account, or paste an admin key. (${error.message})`, "error", true);
}

async function finishSignIn() {
  try {
    await identity.finish();
  } catch (error) {
    return signIn(error instanceof identity.SignInFailed ? error.message : describe(error));
  }
  return boot();
}

/** The "Sign in with <issuer>" part of the sign-in page, when the gateway has one; `again`: a fresh account. */
async function identityProvider(section, again) {
  try {
    if (signInOptions === undefined) signInOptions = await identity.options();
  } catch (error) {
    section.append(notice("warn", `Signing in at the identity provider is not available: ${describe(error)}`));
    return;
  }
  const signin = signInOptions;
  if (!signin) return;
  const status = h("div.sign-in-status");
  const go = () => identity.start(signin, location.hash || "#/", {again}).catch((error) =>
    clear(status).append(notice("error", `The sign-in could not start: ${error.message || error}`)));
  section.append(
    h("p", "Sign in with your account at ", h("code", signin.issuer), ". The console then holds an access token, " +
      "in this browser tab only; the gateway decides whether your account is an admin's."),
    h("button#sign-in-idp", {type: "button", onclick: go}, `Sign in with ${identity.issuerName(signin)}`),
    status);
}

function signIn(message, kind = "error", again = false) {
  if (stopPage) {
    stopPage();
    stopPage = null;
  }
  nav.hidden = true;
  menu.hidden = true;
  document.getElementById("who").hidden = true;
  document.title = "Sign in · tool-gateway admin";
  const input = h("input#admin-key", {type: "password", name: "key", autocomplete: "off",
    required: true, spellcheck: "false", "aria-describedby": "key-help"});
  const status = h("div.sign-in-status");
  const provider = h("section.sign-in-idp", {"aria-label": "Identity provider"});
  const form = h("form.sign-in", {
    onsubmit: async (event) => {
      event.preventDefault();
      if (!input.value) return;
      identity.forget();
      key.set(input.value.trim());
      clear(status).append(notice("info", "Checking the key…"));
      await boot();
    },
  },
  h("p#key-help", "With an admin API key: it is kept in this browser tab only (sessionStorage) and sent as ",
    h("code", "Authorization: Bearer"), "; closing the tab forgets it."),
  h("label", {for: "admin-key"}, "Admin key"),
  input,
  h("button", {type: "submit"}, "Sign in"));
  clear(main).append(h("div.sign-in-page", h("h1", "Sign in"), status, provider, form));
  if (message) status.append(notice(kind, message));
  input.focus();
  identityProvider(provider, again);
}

function setMenu(open) {
  menu.setAttribute("aria-expanded", String(open));
  nav.classList.toggle("open", open);
}

refused.addEventListener("refused", (event) => {
  if (!overview) return; // the sign-in page shows already (a page's requests often fail together)
  overview = null;
  refuse(event.detail);
});
document.getElementById("sign-out").addEventListener("click", () => {
  const what = identity.signedInAt() ? "access token" : "key";
  identity.forget();
  overview = null;
  history.replaceState(null, "", "#/");
  signIn(`Signed out. The ${what} was removed from this tab.`, "info");
});
menu.addEventListener("click", () => setMenu(menu.getAttribute("aria-expanded") !== "true"));
document.getElementById("skip").addEventListener("click", (event) => {
  event.preventDefault(); // the hash is the router's: move focus instead of navigating
  main.focus();
});
window.addEventListener("hashchange", route);
finishSignIn();
