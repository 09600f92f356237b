import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, describe, it } from 'node:test';

import { Api, ApiError, retryAfterMs } from '../src/board/api.js';
import { DevAuth } from '../src/board/auth.js';

// A loopback server standing in for the gateway's REST: /dev/token mints
// numbered tokens, /api/v1/items/{key} checks the token and If-Match.
let base = '';
let minted = 0;
/** @type {Array<{method: string, url: string, headers: import('node:http').IncomingHttpHeaders, body: string}>} */
const seen = [];
/** @type {Map<string, number>} */
const refusals = new Map();
const server = createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/dev/token') {
      minted++;
      const ttl = url.searchParams.get('ttl') === '30s' ? 30 : 3600;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ token: `t${minted}`, subject: url.searchParams.get('subject'), expires_at: Math.floor(Date.now() / 1000) + ttl }));
      return;
    }
    const problem = (/** @type {number} */ status, /** @type {string} */ title, /** @type {string} */ detail, extra = {}) => {
      res.statusCode = status;
      res.setHeader('Content-Type', 'application/problem+json');
      res.end(JSON.stringify({ type: 'about:blank', title, status, detail, ...extra }));
    };
    if (url.pathname === '/api/v1/projects/P/items' && req.method === 'POST') {
      problem(422, 'Unprocessable Entity', 'title: longer than 5 characters', { limit: 'title_chars', max: 5 });
      return;
    }
    if (req.headers.authorization === 'Bearer t1' && url.pathname === '/api/v1/items/P-401') {
      problem(401, 'Unauthorized', 'the access token is not valid (expired)');
      return;
    }
    if (url.pathname === '/api/v1/items/P-1' && req.method === 'PATCH') {
      if (req.headers['if-match'] !== '"3"') {
        problem(412, 'Precondition Failed', 'P-1 is at version 3');
        return;
      }
      res.setHeader('Content-Type', 'application/json');
      res.setHeader('ETag', '"4"');
      res.end(JSON.stringify({ key: 'P-1', version: 4, ...JSON.parse(body) }));
      return;
    }
    // Listings in pages: the cursor is the index of the next entry.
    const lists = { '/api/v1/projects/P/items': ['items', 5], '/api/v1/projects/P/planner/sessions': ['sessions', 3], '/api/v1/projects/LOOP/items': ['items', 9] };
    const list = lists[/** @type {keyof typeof lists} */ (url.pathname)];
    if (list) {
      const [field, n] = list;
      const from = Number(url.searchParams.get('after') ?? 0);
      const to = Math.min(from + 2, n);
      const entries = Array.from({ length: to - from }, (_, i) => ({ key: `P-${from + i + 1}` }));
      const next = url.pathname.includes('LOOP') ? '2' : to < n ? String(to) : null;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ ...(field === 'items' ? { seq: 40 + from } : {}), [field]: entries, next }));
      return;
    }
    // Refused with Retry-After a number of times (the path's last part), then served.
    const busy = url.pathname.match(/^\/api\/v1\/items\/BUSY-(\d+)-(429|503)$/);
    if (busy) {
      const n = (refusals.get(url.pathname) ?? 0) + 1;
      refusals.set(url.pathname, n);
      if (n <= Number(busy[1])) {
        res.setHeader('Retry-After', '2');
        problem(Number(busy[2]), 'Too Many Requests', 'rate exceeded', { limit: 'rest_requests', max: 50 });
        return;
      }
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ key: 'BUSY', version: 1 }));
      return;
    }
    if (url.pathname === '/api/v1/items/P-401') {
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ key: 'P-401', version: 1 }));
      return;
    }
    res.statusCode = 502;
    res.end('bad gateway');
  });
});
before(async () => {
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  base = `http://127.0.0.1:${/** @type {any} */ (server.address()).port}`;
});
after(() => new Promise((resolve) => server.close(() => resolve(undefined))));

describe('DevAuth', () => {
  it('caches a token while it is valid and mints a fresh one on demand', async () => {
    const auth = new DevAuth('alice', { base });
    const first = await auth.token();
    assert.equal(await auth.token(), first);
    const fresh = await auth.token({ fresh: true });
    assert.notEqual(fresh, first);
    assert.equal(await auth.token(), fresh);
    assert.match(seen.find((r) => r.url.startsWith('/dev/token'))?.url ?? '', /subject=alice/);
  });

  it('renews tokens about to expire', async () => {
    const auth = new DevAuth('bob', { base, ttl: '30s' });
    const a = await auth.token();
    const b = await auth.token();
    assert.notEqual(a, b); // 30 s is within the renewal margin
    assert.match(seen[seen.length - 1].url, /ttl=30s/);
  });
});

describe('Api', () => {
  it('sends If-Match with the version and the bearer token', async () => {
    const api = new Api({ base, token: async () => 'tok' });
    const it = await api.patchItem('P-1', { state: 'done' }, 3);
    assert.equal(it.version, 4);
    const req = seen[seen.length - 1];
    assert.equal(req.headers['if-match'], '"3"');
    assert.equal(req.headers.authorization, 'Bearer tok');
    assert.equal(req.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(req.body), { state: 'done' });
  });

  it('turns problems into ApiError with status and detail', async () => {
    const api = new Api({ base, token: async () => 'tok' });
    await assert.rejects(api.patchItem('P-1', { state: 'done' }, 2), (err) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.status, 412);
      assert.equal(err.detail, 'P-1 is at version 3');
      return true;
    });
    await assert.rejects(api.item('P-2'), (err) => err instanceof ApiError && err.status === 502 && err.detail === 'bad gateway'
      && err.limit === '' && err.max === 0);
  });

  it('keeps the limit and max of a problem that names them', async () => {
    const api = new Api({ base, token: async () => 'tok' });
    await assert.rejects(api.createItem('P', { title: 'too long' }), (err) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.status, 422);
      assert.equal(err.detail, 'title: longer than 5 characters');
      assert.equal(err.limit, 'title_chars');
      assert.equal(err.max, 5);
      return true;
    });
  });

  it('waits out Retry-After on 429 and 503 and sends the request again', async () => {
    /** @type {number[]} */
    const slept = [];
    const api = new Api({ base, token: async () => 'tok', sleep: async (ms) => { slept.push(ms); } });
    assert.equal((await api.item('BUSY-2-429')).key, 'BUSY');
    assert.equal((await api.item('BUSY-1-503')).key, 'BUSY');
    assert.equal(slept.length, 3);
    for (const ms of slept) assert.ok(ms >= 2000 && ms <= 2501, `slept ${ms} ms, want Retry-After's 2 s and up to a quarter more`);
  });

  it('gives up after its retries, with the refusal and its Retry-After', async () => {
    /** @type {number[]} */
    const slept = [];
    const api = new Api({ base, token: async () => 'tok', retries: 2, sleep: async (ms) => { slept.push(ms); } });
    await assert.rejects(api.item('BUSY-9-429'), (err) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.status, 429);
      assert.equal(err.limit, 'rest_requests');
      assert.equal(err.retryAfterMs, 2000);
      return true;
    });
    assert.equal(slept.length, 2);
    const tooLong = new Api({ base, token: async () => 'tok', maxRetryWaitMs: 1000, sleep: async () => { throw new Error('slept'); } });
    await assert.rejects(tooLong.item('BUSY-9-503'), (err) => err instanceof ApiError && err.status === 503);
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    const now = Date.parse('2026-12-03T10:00:00Z');
    assert.equal(retryAfterMs('5', now), 5000);
    assert.equal(retryAfterMs('Thu, 03 Dec 2026 10:00:07 GMT', now), 7000);
    assert.equal(retryAfterMs('Thu, 03 Dec 2026 09:00:00 GMT', now), 0);
    assert.equal(retryAfterMs('soon', now), null);
    assert.equal(retryAfterMs(null, now), null);
  });

  it('follows next to load every page of a listing', async () => {
    const api = new Api({ base, token: async () => 'tok' });
    const start = seen.length;
    const snap = await api.snapshot('P');
    assert.equal(snap.seq, 40); // the first page's
    assert.deepEqual(snap.items.map((i) => i.key), ['P-1', 'P-2', 'P-3', 'P-4', 'P-5']);
    assert.deepEqual(seen.slice(start).map((r) => r.url), [
      '/api/v1/projects/P/items', '/api/v1/projects/P/items?after=2', '/api/v1/projects/P/items?after=4',
    ]);
    const sessions = await api.sessions('P');
    assert.deepEqual(sessions.map((s) => /** @type {any} */ (s).key), ['P-1', 'P-2', 'P-3']);
    await assert.rejects(api.snapshot('LOOP'), (err) => err instanceof ApiError && /again/.test(err.detail));
  });

  it('tries once more with a fresh token after a 401', async () => {
    /** @type {boolean[]} */
    const asked = [];
    const api = new Api({ base, token: async (o) => { asked.push(!!o?.fresh); return o?.fresh ? 't2' : 't1'; } });
    const it = await api.item('P-401');
    assert.equal(it.key, 'P-401');
    assert.deepEqual(asked, [false, true]);
  });
});
