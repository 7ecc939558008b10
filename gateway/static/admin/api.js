// Talking to the gateway: the admin key (kept in this tab only), JSON requests, and the live call stream.

const KEY = "tool-gateway.admin-key";

export const key = {
  get: () => sessionStorage.getItem(KEY),
  set: (value) => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

/** An answer that is not 2xx: `status` and the parsed body (the gateway's {error, status, ...} shape). */
export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.error || body.message)) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

/** An error as one line for the page. */
export function describe(error) {
  if (error instanceof ApiError) return `${error.message} (HTTP ${error.status})`;
  return `The gateway did not answer: ${error.message || error}`;
}

/** Fired when the gateway refuses the key (401/403): the shell shows the sign-in page. */
export const refused = new EventTarget();

function headers(extra = {}) {
  const stored = key.get();
  return {Accept: "application/json", ...(stored ? {Authorization: `Bearer ${stored}`} : {}), ...extra};
}

// Writes (every method but GET) carry the console token, read from the gateway: with auth off it is what tells
// them from a request another web page made the browser send. It changes when the gateway restarts.
const TOKEN_HEADER = "X-Gateway-Token";
let writeToken = null;

async function tokenHeader(refresh) {
  if (writeToken === null || refresh) writeToken = (await request("GET", "/admin/api/token")).token;
  return {[TOKEN_HEADER]: writeToken};
}

const isTokenRefusal = (response, text) => response.status === 403 && text.includes(TOKEN_HEADER);

/** A JSON request; resolves to the parsed body, rejects with ApiError (or a TypeError when the network fails). */
export async function request(method, path, body, {signal, quietAuth = false} = {}) {
  const send = async (refreshToken) => {
    const extra = {
      ...(body === undefined ? {} : {"Content-Type": "application/json"}),
      ...(method === "GET" ? {} : await tokenHeader(refreshToken)),
    };
    const init = {method, headers: headers(extra), signal};
    if (body !== undefined) init.body = JSON.stringify(body);
    return fetch(path, init);
  };
  let response = await send(false);
  let text = await response.text();
  if (method !== "GET" && isTokenRefusal(response, text)) { // the gateway restarted since the token was read
    response = await send(true);
    text = await response.text();
  }
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = {error: text.slice(0, 300)};
  }
  if (!response.ok) {
    const error = new ApiError(response.status, parsed);
    if ((response.status === 401 || response.status === 403) && !quietAuth && isAuthRefusal(error)) {
      refused.dispatchEvent(new CustomEvent("refused", {detail: error}));
    }
    throw error;
  }
  return parsed;
}

// A 403 from the editor (a read-only directory) is not about the key; only refusals that name a key or the
// loopback rule send the admin back to sign in.
function isAuthRefusal(error) {
  if (error.status === 401) return true;
  return /key|loopback|admin/i.test(error.message) && !/read-only|read only|token/i.test(error.message);
}

export const get = (path, options) => request("GET", path, undefined, options);
export const post = (path, body, options) => request("POST", path, body, options);
export const put = (path, body, options) => request("PUT", path, body, options);
export const del = (path, options) => request("DELETE", path, undefined, options);

/** Path segments as the API expects them: each part encoded, the slashes of a file path kept. */
export function pathParam(value) {
  return String(value).split("/").map(encodeURIComponent).join("/");
}

/**
 * Read a server-sent event stream with the Bearer header (EventSource cannot send one): calls onEvent(name, data)
 * for every event and onOpen() once connected; resolves when the stream ends, rejects when it fails. Stop it with the signal.
 */
export async function stream(path, onEvent, signal, onOpen = () => {}) {
  const response = await fetch(path, {headers: headers({Accept: "text/event-stream"}), signal});
  if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
  onOpen();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue; // a comment: the server's keep-alive
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const content = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") name = content;
        else if (field === "data") data.push(content);
      }
      if (data.length) onEvent(name, data.join("\n"));
    }
  }
}
