// The MCP TypeScript SDK's OAuth client, headless: StreamableHTTPClientTransport with an OAuthClientProvider signs
// its user in to an MCP server (discovery from its 401, dynamic registration, authorization code + PKCE, token),
// lists the tools and calls some. The browser is the caller's: each authorization URL is printed, and the caller
// answers on stdin with the query the redirect came back with.
//
//   node oauth_client.mjs <mcp url> '{"calls": [{"name": "whoami", "arguments": {}}], "grant_types": [...],
//                                     "client_id": "..."}'
//
// grant_types: what the client registers for (default: code and refresh tokens); client_id: a client registered
// beforehand, used instead of registering one.
//
// stdout, one JSON object a line:
//   {"authorize": url}                          then reads one line: {"code", "state", "iss"} (a redirect's query)
//   {"signed_in": {sub, aud, scope, client_id}} the new access token's claims (never the token itself)
//   {"requests": [[method, url], ...]}          every request the client made since the last such line, up to the
//                                               token (the browser's aside)
//   {"tools": [names]}
//   {"called": name, "content": [texts], "isError": bool} or {"called": name, "error": {name, code, message}}
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [mcpUrl, planText] = process.argv.slice(2);
const plan = JSON.parse(planText ?? '{}');
const say = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const answers = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const requests = [];

// Every request of the client, the OAuth ones included: the transport hands its fetch to the SDK's auth flow.
async function counted(input, init) {
  const url = new URL(input instanceof Request ? input.url : input);
  requests.push([init?.method ?? (input instanceof Request ? input.method : 'GET'), `${url.origin}${url.pathname}`]);
  return fetch(input, init);
}

// What an app keeps between the redirect and the callback, in memory; the SDK calls each method when it needs it.
class HeadlessProvider {
  client = plan.client_id ? { client_id: plan.client_id } : undefined;

  redirectUrl = 'http://127.0.0.1:9/callback'; // never reached: the caller's "browser" stops at the redirect

  get clientMetadata() {
    return { client_name: 'typescript test client', redirect_uris: [this.redirectUrl], response_types: ['code'],
      grant_types: plan.grant_types ?? ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none' };
  }

  state() {
    this.sentState = randomBytes(16).toString('hex');
    return this.sentState;
  }

  clientInformation() { return this.client; }

  saveClientInformation(client) { this.client = client; }

  tokens() { return this.held; }

  saveTokens(tokens) { this.held = tokens; }

  saveCodeVerifier(verifier) { this.verifier = verifier; }

  codeVerifier() { return this.verifier; }

  redirectToAuthorization(url) { say({ authorize: url.href }); }
}

const provider = new HeadlessProvider();

// The callback: the redirect's query comes back on stdin; its state must be the one this client sent (CSRF).
async function finishSignIn(transport) {
  const { value, done } = await answers.next();
  if (done) throw new Error('stdin closed before the authorization answer');
  const answer = JSON.parse(value);
  if (answer.state !== provider.sentState) throw new Error('the authorization answer is not for this request');
  if (!answer.code) throw new Error(`authorization refused: ${answer.error}: ${answer.error_description}`);
  await transport.finishAuth(answer.code);
  const claims = JSON.parse(Buffer.from(provider.held.access_token.split('.')[1], 'base64url').toString());
  const { sub, aud, scope, client_id: clientId } = claims;
  say({ signed_in: { sub, aud, scope, client_id: clientId } });
  say({ requests: requests.splice(0) });
}

// The first connection is refused (401) and starts the sign-in; once it is finished, a new transport connects with
// the token (a started transport cannot be started again).
async function connect() {
  const first = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: counted });
  try {
    return await connected(first);
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
  }
  await finishSignIn(first);
  return connected(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: counted }));
}

async function connected(transport) {
  const client = new Client({ name: 'typescript-oauth-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

// A call refused for want of a scope sends the user to authorize it (the SDK's step-up), then is made again once.
async function call({ name, arguments: args = {} }, client, transport) {
  try {
    return await client.callTool({ name, arguments: args });
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
  }
  await finishSignIn(transport);
  return client.callTool({ name, arguments: args });
}

const { client, transport } = await connect();
say({ tools: (await client.listTools()).tools.map((tool) => tool.name) });
for (const wanted of plan.calls ?? []) {
  try {
    const result = await call(wanted, client, transport);
    say({ called: wanted.name, content: result.content.map((part) => part.text), isError: result.isError ?? false });
  } catch (error) {
    say({ called: wanted.name, error: { name: error.constructor.name, code: error.code, message: error.message } });
  }
}
await client.close();
process.exit(0); // stdin stays open for answers that will not come
