// Signing in at the identity provider (the gateway's `oauth.console`): OAuth 2.1 authorization code with PKCE
// (S256) as a public client, for the gateway's own resource (RFC 8707), the answer's `iss` checked (RFC 9207).
// The access token goes where a pasted admin key goes (api.js `key`); whether it is an admin's is the gateway's call.

import {ApiError, get, key} from "./api.js";

const PENDING = "tool-gateway.sign-in"; // the state and verifier of a sign-in under way, until its answer comes back
const ISSUER = "tool-gateway.admin-issuer"; // set while the bearer in `key` is an access token from this issuer

/** The bearer held is an access token (not a pasted key): the issuer that gave it, or null. */
export const signedInAt = () => sessionStorage.getItem(ISSUER);

/** Forget the token (or key) and that it was one. */
export function forget() {
  key.clear();
  sessionStorage.removeItem(ISSUER);
}

/** A sign-in that did not end with a token: the message says why, for the sign-in page. */
export class SignInFailed extends Error {}

/** How to sign in here ({issuer, authorization_endpoint, token_endpoint, client_id, scope, resource, …}), or null
 * when the gateway has no sign-in at an identity provider (then only a pasted key works). */
export async function options() {
  try {
    return await get("/admin/api/signin", {quietAuth: true});
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

function base64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const random = (size) => base64url(crypto.getRandomValues(new Uint8Array(size)));
const redirectUri = () => location.origin + location.pathname; // the console's own page: /admin/

/** Leave for the identity provider's sign-in page; `back` is the console page to return to. `again` asks it to
 * sign someone in afresh (after an account that is not an admin's). */
export async function start(signin, back, {again = false} = {}) {
  const verifier = random(32);
  const state = random(16);
  const challenge = base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  sessionStorage.setItem(PENDING, JSON.stringify({state, verifier, back, redirect: redirectUri(), signin}));
  const url = new URL(signin.authorization_endpoint);
  const query = {response_type: "code", client_id: signin.client_id, redirect_uri: redirectUri(), scope: signin.scope,
    state, code_challenge: challenge, code_challenge_method: "S256", resource: signin.resource,
    prompt: again ? "login" : ""};
  for (const [name, value] of Object.entries(query)) if (value) url.searchParams.set(name, value);
  location.assign(url.href);
}

/**
 * When this page is the identity provider's answer (`?code=…&state=…`, or `?error=…`): take it out of the address
 * bar and the history, check it answers the sign-in this tab started, and trade the code for a token at the token
 * endpoint. Resolves to the console page to return to, or null when the page is no answer; rejects with SignInFailed.
 */
export async function finish() {
  const answer = new URLSearchParams(location.search);
  if (!answer.has("state") && !answer.has("code") && !answer.has("error")) return null;
  const pending = JSON.parse(sessionStorage.getItem(PENDING) || "null");
  sessionStorage.removeItem(PENDING); // one answer per sign-in: a replayed one finds nothing
  history.replaceState(null, "", location.pathname + (pending?.back || "#/"));
  if (!pending || !answer.get("state") || answer.get("state") !== pending.state) {
    throw new SignInFailed("This sign-in answer does not belong to a sign-in started in this tab (its state does not " +
      "match), so it was not used. Sign in again.");
  }
  const {signin} = pending;
  if ((signin.authorization_response_iss_parameter_supported || answer.has("iss")) && answer.get("iss") !== signin.issuer) {
    throw new SignInFailed(`The sign-in answer does not come from ${signin.issuer} (its iss is ` +
      `${JSON.stringify(answer.get("iss"))}), so it was not used.`);
  }
  if (answer.has("error")) {
    const description = answer.get("error_description");
    throw new SignInFailed(`The identity provider did not sign you in: ${answer.get("error")}` +
      (description ? ` (${description})` : ""));
  }
  if (!answer.get("code")) throw new SignInFailed("The sign-in answer holds no code.");
  let response;
  try {
    response = await fetch(signin.token_endpoint, {
      method: "POST", credentials: "omit", referrerPolicy: "no-referrer",
      headers: {"Content-Type": "application/x-www-form-urlencoded", Accept: "application/json"},
      body: new URLSearchParams({grant_type: "authorization_code", code: answer.get("code"), redirect_uri: pending.redirect,
        client_id: signin.client_id, code_verifier: pending.verifier, resource: signin.resource}),
    });
  } catch (error) {
    throw new SignInFailed(`The identity provider's token endpoint did not answer: ${error.message || error}`);
  }
  const body = await response.json().catch(() => null);
  if (!response.ok || typeof body?.access_token !== "string" || String(body.token_type).toLowerCase() !== "bearer") {
    const reason = body?.error ? `${body.error}${body.error_description ? ` (${body.error_description})` : ""}` : `HTTP ${response.status}`;
    throw new SignInFailed(`The identity provider gave no access token: ${reason}`);
  }
  key.set(body.access_token);
  sessionStorage.setItem(ISSUER, signin.issuer);
  return pending.back || "#/";
}

/** The issuer's host, for the button ("Sign in with idp.example.com"). */
export function issuerName(signin) {
  try {
    return new URL(signin.issuer).host;
  } catch {
    return signin.issuer;
  }
}
