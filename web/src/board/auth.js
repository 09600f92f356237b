// Signing in with the development issuer of `ballet-gateway dev`:
// GET /dev/token?subject=NAME answers {"token", "subject", "expires_at"}.

/** Tokens are renewed this long before they expire. */
const MARGIN_MS = 60_000;

export class DevAuth {
  /**
   * @param {string} subject
   * @param {{base?: string, ttl?: string, fetch?: typeof fetch}} [o] ttl: a Go duration for the tokens ("12h" when unset)
   */
  constructor(subject, o = {}) {
    this.subject = subject;
    this.base = o.base ?? '';
    this.ttl = o.ttl ?? '';
    this.fetch = o.fetch ?? ((/** @type {any} */ u, /** @type {any} */ i) => fetch(u, i));
    /** @type {{token: string, expiresAt: number}|null} */
    this.cached = null;
    /** @type {Promise<string>|null} */
    this.inflight = null;
  }

  /**
   * token returns a token for the subject: the cached one while it is valid
   * for another minute, else (or with fresh) a new one.
   * @param {{fresh?: boolean, signal?: AbortSignal}} [opts]
   * @returns {Promise<string>}
   */
  async token(opts = {}) {
    if (!opts.fresh && this.cached && this.cached.expiresAt - Date.now() > MARGIN_MS) return this.cached.token;
    if (!opts.fresh && this.inflight) return this.inflight;
    const p = this.mint(opts.signal);
    this.inflight = p;
    try {
      return await p;
    } finally {
      if (this.inflight === p) this.inflight = null;
    }
  }

  /** @param {AbortSignal} [signal] */
  async mint(signal) {
    const q = new URLSearchParams({ subject: this.subject });
    if (this.ttl) q.set('ttl', this.ttl);
    const res = await this.fetch(`${this.base}/dev/token?${q}`, { cache: 'no-store', signal });
    if (!res.ok) throw new Error(`sign-in failed: /dev/token answered ${res.status}`);
    /** @type {{token: string, subject: string, expires_at: number}} */
    const body = await res.json();
    this.cached = { token: body.token, expiresAt: body.expires_at * 1000 };
    return body.token;
  }
}
