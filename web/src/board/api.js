// The REST API the board uses: the tracker (/api/v1/projects, /items) and
// planner sessions. Errors are RFC 7807 problems; listings come in pages,
// which are followed to their end.

/**
 * An HTTP error answered as application/problem+json (or anything else).
 * limit and max name the limit a request went beyond, when the problem
 * does (a title's "title_chars" on 422, "planner_sessions" on 429).
 */
export class ApiError extends Error {
  /**
   * @param {number} status @param {string} title @param {string} [detail]
   * @param {{limit?: string, max?: number}} [limited]
   * @param {number} [retryAfterMs] the answer's Retry-After, in milliseconds (0: none)
   */
  constructor(status, title, detail, limited = {}, retryAfterMs = 0) {
    super(detail ? `${title}: ${detail}` : title);
    this.name = 'ApiError';
    this.status = status;
    this.title = title;
    this.detail = detail ?? '';
    this.limit = limited.limit ?? '';
    this.max = limited.max ?? 0;
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * retryAfterMs reads a Retry-After header (delay-seconds or an HTTP-date) in
 * milliseconds; null when absent or unreadable.
 * @param {string|null} v @param {number} now
 * @returns {number|null}
 */
export function retryAfterMs(v, now = Date.now()) {
  if (v == null || v.trim() === '') return null;
  if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** The statuses a refusal is answered with before a request is served (rate, overload). */
const retryable = new Set([429, 503]);

/**
 * @typedef {import('./model.js').Item} Item
 * @typedef {{key: string, name: string, role?: string, created_at: string}} Project
 * @typedef {{id: string, project: string, title: string, created_by: string, created_at: string, running: boolean}} Session
 * @typedef {{seq: number, role: 'human'|'assistant'|'tool', content: any, created_at: string}} Message
 */

export class Api {
  /**
   * retries is how many times a request refused 429 or 503 with Retry-After
   * is sent again after that wait (plus up to a quarter more, so that
   * refused tabs do not return together); maxRetryWaitMs is the longest
   * wait taken, past which the refusal is thrown at once.
   * @param {{token: (opts?: {fresh?: boolean}) => Promise<string>, base?: string, fetch?: typeof fetch,
   *   retries?: number, maxRetryWaitMs?: number, sleep?: (ms: number) => Promise<void>}} o
   */
  constructor(o) {
    this.token = o.token;
    this.base = o.base ?? '';
    this.fetch = o.fetch ?? ((/** @type {any} */ u, /** @type {any} */ i) => fetch(u, i));
    this.retries = o.retries ?? 3;
    this.maxRetryWaitMs = o.maxRetryWaitMs ?? 30_000;
    this.sleep = o.sleep ?? ((/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /**
   * request sends one call; a 401 is tried once more with a fresh token, and
   * a 429 or 503 with Retry-After (a rate or an overloaded replica: the
   * request was not served) is sent again once that time has passed, up to
   * retries times.
   * @param {string} method @param {string} path
   * @param {{body?: object, ifMatch?: number}} [opts]
   * @returns {Promise<{status: number, body: any, etag: string|null}>}
   */
  async request(method, path, opts = {}) {
    for (let refreshed = false, retried = 0; ;) {
      /** @type {Record<string, string>} */
      const headers = { Authorization: `Bearer ${await this.token({ fresh: refreshed })}`, Accept: 'application/json' };
      if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
      if (opts.ifMatch !== undefined) headers['If-Match'] = `"${opts.ifMatch}"`;
      const res = await this.fetch(this.base + path, {
        method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body), cache: 'no-store',
      });
      if (res.status === 401 && !refreshed) {
        refreshed = true;
        continue;
      }
      const wait = retryable.has(res.status) ? retryAfterMs(res.headers.get('Retry-After')) : null;
      if (wait !== null && retried < this.retries && wait <= this.maxRetryWaitMs) {
        retried++;
        await res.text().catch(() => '');
        await this.sleep(wait + Math.floor(Math.random() * (wait / 4 + 1)));
        continue;
      }
      const text = await res.text();
      let body = null;
      if (text) {
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
      }
      if (!res.ok) {
        const p = body && typeof body === 'object' ? body : {};
        const limited = typeof p.limit === 'string' && typeof p.max === 'number' ? { limit: p.limit, max: p.max } : {};
        throw new ApiError(res.status, String(p.title ?? res.statusText ?? 'Error'), p.detail ?? (typeof body === 'string' ? body : ''), limited,
          wait ?? 0);
      }
      return { status: res.status, body, etag: res.headers.get('ETag') };
    }
  }

  /**
   * all loads every page of a listing: it follows each page's next (the
   * cursor of the page after it, null on the last) and returns the first
   * page's answer (its seq, for items) with the entries of every page.
   * @param {string} path @param {string} field the entries' field
   * @returns {Promise<any>}
   */
  async all(path, field) {
    const first = (await this.request('GET', path)).body;
    const entries = [...first[field]];
    const sep = path.includes('?') ? '&' : '?';
    for (let next = first.next, seen = new Set(); next != null;) {
      if (seen.has(next)) throw new ApiError(0, 'Listing loops', `${path}: next ${next} again`);
      seen.add(next);
      const page = (await this.request('GET', `${path}${sep}after=${encodeURIComponent(next)}`)).body;
      entries.push(...page[field]);
      next = page.next;
    }
    return { ...first, [field]: entries, next: null };
  }

  /** @returns {Promise<Project[]>} */
  async projects() {
    return (await this.request('GET', '/api/v1/projects')).body.projects;
  }

  /**
   * snapshot loads every page of the project's items (step 2 of the client
   * recipe): seq is the first page's, after which events are applied.
   * @param {string} key @returns {Promise<{seq: number, items: Item[]}>}
   */
  async snapshot(key) {
    return this.all(`/api/v1/projects/${encodeURIComponent(key)}/items`, 'items');
  }

  /** @param {string} key @returns {Promise<Item>} */
  async item(key) {
    return (await this.request('GET', `/api/v1/items/${encodeURIComponent(key)}`)).body;
  }

  /**
   * @param {string} project @param {{title: string, description?: string, state?: string}} input
   * @returns {Promise<Item>}
   */
  async createItem(project, input) {
    return (await this.request('POST', `/api/v1/projects/${encodeURIComponent(project)}/items`, { body: input })).body;
  }

  /**
   * patchItem changes an item if it is still at version (412 otherwise).
   * @param {string} key @param {{title?: string, description?: string, state?: string}} patch @param {number} version
   * @returns {Promise<Item>}
   */
  async patchItem(key, patch, version) {
    return (await this.request('PATCH', `/api/v1/items/${encodeURIComponent(key)}`, { body: patch, ifMatch: version })).body;
  }

  /** @param {string} key @param {number} version */
  async deleteItem(key, version) {
    await this.request('DELETE', `/api/v1/items/${encodeURIComponent(key)}`, { ifMatch: version });
  }

  /** addDependency records that blocker blocks key. @param {string} key @param {string} blocker @returns {Promise<Item>} */
  async addDependency(key, blocker) {
    return (await this.request('PUT', `/api/v1/items/${encodeURIComponent(key)}/dependencies/${encodeURIComponent(blocker)}`)).body;
  }

  /** @param {string} key @param {string} blocker @returns {Promise<Item>} */
  async removeDependency(key, blocker) {
    return (await this.request('DELETE', `/api/v1/items/${encodeURIComponent(key)}/dependencies/${encodeURIComponent(blocker)}`)).body;
  }

  /** @param {string} project @returns {Promise<Session[]>} every page, newest first */
  async sessions(project) {
    return (await this.all(`/api/v1/projects/${encodeURIComponent(project)}/planner/sessions`, 'sessions')).sessions;
  }

  /** @param {string} project @param {string} title @returns {Promise<Session>} */
  async createSession(project, title) {
    return (await this.request('POST', `/api/v1/projects/${encodeURIComponent(project)}/planner/sessions`, { body: { title } })).body;
  }

  /** @param {string} id @returns {Promise<Session & {messages: Message[]}>} */
  async session(id) {
    return (await this.request('GET', `/api/v1/planner/sessions/${encodeURIComponent(id)}`)).body;
  }
}
