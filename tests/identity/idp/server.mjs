// A real authorization server for the tests: oidc-provider (OpenID Certified) configured from one JSON argument,
// with headless interactions, JWT access tokens for any resource on 127.0.0.1, and RFC 8693 token exchange.
// Test-only routes under /test/ let the tests pick the next user and read counters; nothing here is for production.
//
//   node server.mjs '{"port": 4000, "users": {"alice": {"groups": ["finance"]}}, "clients": [...], ...}'
//
// Prints one JSON line {"ready": "<issuer>"} on stdout once it listens.
import { generateKeyPairSync, randomBytes } from 'node:crypto';

// The npm packages live in tests/clients/node_modules (one install for every JS tool the tests run); ESM has no
// NODE_PATH, so they are imported by path.
const modules = new URL('../../clients/node_modules/', import.meta.url);
const { default: Provider, errors } = await import(new URL('oidc-provider/lib/index.js', modules));
const { createLocalJWKSet, jwtVerify } = await import(new URL('jose/dist/webapi/index.js', modules));

const config = JSON.parse(process.argv[2] ?? '{}');
const { port } = config; // the issuer names it, so it is chosen before start
if (!port) throw new Error('config.port is required');
const issuer = `http://127.0.0.1:${port}`;
const users = config.users ?? { alice: {} };
const scopes = (config.scopes ?? ['tools', 'read', 'write', 'admin', 'finance', 'support']).join(' ');
const words = (text) => text.split(' ').filter(Boolean);
// RFC 6749 section 3.3: a request without `scope` gets a default, not a refusal (oidc-provider denies an empty grant).
const defaultScope = words(scopes)[0];
const resources = config.resources ?? {}; // resource URL -> {scope?, alg?, ttl?, format?}: overrides for one resource
const accessTokenTTL = config.access_token_ttl ?? 600;
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

// Fresh keys each start, so no test can depend on a key another run saw; two algorithms so that a resource server's
// key selection by `kid` is exercised (a resource may ask for ES256 through `resources`).
function signingKey(type, options, alg) {
  const { privateKey, publicKey } = generateKeyPairSync(type, options);
  const named = { kid: `${alg.toLowerCase()}-${randomBytes(4).toString('hex')}`, alg, use: 'sig' };
  return { private: { ...privateKey.export({ format: 'jwk' }), ...named },
    public: { ...publicKey.export({ format: 'jwk' }), ...named } };
}
const keys = [signingKey('rsa', { modulusLength: 2048 }, 'RS256'), signingKey('ec', { namedCurve: 'P-256' }, 'ES256')];
const publicKeys = createLocalJWKSet({ keys: keys.map((key) => key.public) });

const state = { nextUser: Object.keys(users)[0], jwks: 0, tokens: {}, registrations: 0 };

function resourceServer(resource) {
  const own = resources[resource];
  if (!own && !resource.startsWith('http://127.0.0.1:')) throw new errors.InvalidTarget(`unknown resource ${resource}`);
  return { scope: own?.scope ?? scopes, audience: resource, accessTokenFormat: own?.format ?? 'jwt',
    accessTokenTTL: own?.ttl ?? accessTokenTTL, jwt: { sign: { alg: own?.alg ?? 'RS256' } } };
}

const provider = new Provider(issuer, {
  clients: config.clients ?? [],
  clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic' },
  findAccount: (ctx, sub) => (users[sub] ? { accountId: sub, claims: () => ({ sub, ...users[sub] }) } : undefined),
  claims: { openid: ['sub'], email: ['email'], profile: ['name', 'groups', 'roles'] },
  // The resources' scopes are listed too: registration refuses a client `scope` naming any other (the MCP SDKs
  // register with the scopes a resource advertises), and discovery then advertises them.
  scopes: [...new Set(['openid', 'offline_access', ...words(scopes),
    ...Object.values(resources).flatMap((r) => words(r.scope ?? ''))])],
  responseTypes: ['code'], // OAuth 2.1: no implicit or hybrid flows
  cookies: { keys: [randomBytes(32).toString('hex')] },
  jwks: { keys: keys.map((key) => key.private) },
  pkce: { required: () => true },
  // A resource's own `ttl` (resourceServer's accessTokenTTL) first: a number here would override it.
  ttl: { AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL ?? accessTokenTTL,
    ClientCredentials: accessTokenTTL, AuthorizationCode: 60, IdToken: 600,
    Interaction: 600, Session: 3600, Grant: 86400, RefreshToken: 86400 },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true, initialAccessToken: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      getResourceServerInfo: (ctx, resource) => resourceServer(resource),
      // The token request may omit `resource` when the grant has one (the MCP SDKs resend it anyway).
      useGrantedResource: () => true,
    },
  },
  // Every code comes with a refresh token, whatever the scope: the gateway's refresh logic needs one to refresh.
  issueRefreshToken: (ctx, client) => client.grantTypeAllowed('refresh_token'),
  extraTokenClaims(ctx, token) {
    const claims = { ...(users[token.accountId] ?? {}) };
    // RFC 8693 section 4.1: the exchanged token names who acts for the subject.
    if (token.gty === TOKEN_EXCHANGE) claims.act = { sub: token.clientId };
    return claims;
  },
});

// The headless "login page": logs in the user named by login_hint (or the one the test chose), and consents to
// everything requested in the same step, so a client that just follows redirects ends at its redirect_uri.
async function interact(ctx) {
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { client_id: clientId, login_hint: hint, scope = '', resource } = details.params;
  const sub = hint ?? state.nextUser;
  if (!users[sub]) {
    return provider.interactionFinished(ctx.req, ctx.res,
      { error: 'access_denied', error_description: `no such user: ${sub}` });
  }
  const grant = new provider.Grant({ accountId: sub, clientId });
  const requested = words(scope);
  grant.addOIDCScope(requested.join(' '));
  for (const indicator of [resource ?? []].flat()) grant.addResourceScope(indicator, requested.join(' '));
  const grantId = await grant.save();
  return provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: sub }, consent: { grantId } });
}

// RFC 8693 through oidc-provider's registerGrantType: the subject token must be a JWT access token this server
// signed and that has not expired; the new token keeps its subject for the requested resource.
async function tokenExchange(ctx) {
  const { subject_token: subjectToken, subject_token_type: subjectType, resource, audience, scope } = ctx.oidc.params;
  if (!subjectToken) throw new errors.InvalidRequest('missing subject_token');
  if (subjectType !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest(`unsupported subject_token_type`);
  const target = [resource ?? audience ?? []].flat();
  if (target.length !== 1) throw new errors.InvalidTarget('exactly one resource or audience is required');
  const info = resourceServer(target[0]);
  let subject;
  try {
    ({ payload: subject } = await jwtVerify(subjectToken, publicKeys, { issuer, typ: 'at+jwt' }));
  } catch (error) {
    // RFC 8693 section 2.2.2: an unusable subject_token is an invalid_request.
    throw new errors.InvalidRequest(`subject_token is not valid: ${error.code ?? error.message}`);
  }
  // Never more than the subject had, and only what the target resource defines.
  const had = new Set(words(subject.scope ?? ''));
  const offered = new Set(words(info.scope));
  const wanted = scope ? words(scope) : [...had];
  const granted = wanted.filter((s) => had.has(s) && offered.has(s)).join(' ') || undefined;
  const token = new provider.AccessToken({ accountId: subject.sub, client: ctx.oidc.client, gty: TOKEN_EXCHANGE,
    scope: granted });
  token.resourceServer = new provider.ResourceServer(target[0], info);
  ctx.body = { access_token: await token.save(), issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer',
    expires_in: token.expiration, scope: granted };
}
provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange,
  ['audience', 'resource', 'scope', 'requested_token_type', 'subject_token', 'subject_token_type'],
  ['audience', 'resource']);

async function readJson(ctx) {
  let text = '';
  for await (const chunk of ctx.req) text += chunk;
  try {
    return JSON.parse(text || '{}');
  } catch {
    return ctx.throw(400, 'the body is not JSON');
  }
}

provider.use(async (ctx, next) => {
  const { path, method } = ctx;
  if (path === '/test/stats' && method === 'GET') {
    ctx.body = { jwks_fetches: state.jwks, token_requests: state.tokens, registrations: state.registrations,
      next_user: state.nextUser };
    return;
  }
  if (path === '/test/next-user' && method === 'POST') {
    const { sub } = await readJson(ctx);
    if (!users[sub]) ctx.throw(400, `no such user: ${sub}`);
    state.nextUser = sub;
    ctx.body = { next_user: sub };
    return;
  }
  if (path === '/auth' && !ctx.query.scope) ctx.query = { ...ctx.query, scope: defaultScope };
  if (path.startsWith('/interaction/')) {
    await interact(ctx);
    return;
  }
  // RFC 8414 metadata is the same document as OpenID discovery here (the issuer has no path).
  if (path === '/.well-known/oauth-authorization-server') ctx.path = '/.well-known/openid-configuration';
  await next();
  if (path === '/jwks') state.jwks += 1;
  if (path === '/reg' && ctx.status === 201) state.registrations += 1;
  if (path === '/token') {
    const grantType = ctx.oidc?.params?.grant_type ?? 'unknown';
    state.tokens[grantType] = (state.tokens[grantType] ?? 0) + 1;
  }
});

provider.listen(port, '127.0.0.1', () => console.log(JSON.stringify({ ready: issuer })));
