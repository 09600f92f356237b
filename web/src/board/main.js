// The demo project board: signs in with the development issuer, follows a
// project over /rpc (the client recipe: subscribe, load the snapshot, apply
// events idempotently, reload on resync), writes over REST, and hosts the
// planner chat.

import { Client, errorCode, Code } from '../client/index.js';
import { Api, ApiError } from './api.js';
import { DevAuth } from './auth.js';
import { $, h, people, Toasts } from './dom.js';
import { BoardModel, STATES, STATE_LABELS } from './model.js';
import { PlannerPanel } from './planner.js';
import { ItemView } from './itemview.js';
import { BoardView } from './view.js';

const params = new URLSearchParams(location.search);
const storage = {
  /** @param {string} k */
  get(k) {
    try {
      return localStorage.getItem(`ballet.${k}`);
    } catch {
      return null;
    }
  },
  /** @param {string} k @param {string} v */
  set(k, v) {
    try {
      localStorage.setItem(`ballet.${k}`, v);
    } catch { /* private mode */ }
  },
};

const toasts = new Toasts($('#toasts'));
/** The most people the header lists by name; the rest are "+N". */
const MAX_PRESENT = 8;
const toast = toasts.show.bind(toasts);

/** @type {Record<string, string>} */
const STATUS_TEXT = {
  connecting: 'Connecting…',
  connected: 'Live',
  reconnecting: 'Reconnecting…',
  closed: 'Offline',
};

/** @param {string} state @param {Error} [err] */
function showStatus(state, err) {
  const el = $('#status');
  el.setAttribute('data-state', state);
  $('.status-text', el).textContent = STATUS_TEXT[state] ?? state;
  el.title = err ? `${STATUS_TEXT[state]} (${err.message})` : STATUS_TEXT[state] ?? '';
}

/** @param {string} text */
function fatal(text) {
  const main = $('#main');
  main.replaceChildren(h('div', { class: 'fatal', role: 'alert' }, h('h2', {}, 'The board cannot start'), h('p', {}, text)));
  showStatus('closed');
}

async function start() {
  const subject = params.get('user') ?? storage.get('user') ?? 'dev-user';
  const auth = new DevAuth(subject, { ttl: params.get('ttl') ?? undefined });
  const api = new Api({ token: (o) => auth.token(o) });
  $('#user-name').textContent = subject;
  $('#switch-user').addEventListener('click', () => switchUser(subject));

  try {
    await auth.token();
  } catch (err) {
    fatal(`Signing in failed (${/** @type {Error} */ (err).message}). The board signs in through the development issuer: run “ballet-gateway dev” (make run).`);
    return;
  }

  let projects;
  try {
    projects = await api.projects();
  } catch (err) {
    fatal(`Cannot list projects: ${/** @type {Error} */ (err).message}`);
    return;
  }
  const wanted = params.get('project') ?? storage.get('project') ?? 'DEMO';
  const project = projects.find((p) => p.key === wanted) ?? projects[0];
  if (!project) {
    fatal(`${subject} is a member of no project. Try the user dev-user.`);
    return;
  }
  storage.set('project', project.key);
  const picker = /** @type {HTMLSelectElement} */ ($('#project'));
  picker.replaceChildren(...projects.map((p) => h('option', { value: p.key }, `${p.key} · ${p.name}`)));
  picker.value = project.key;
  picker.addEventListener('change', () => {
    const q = new URLSearchParams(location.search);
    q.set('project', picker.value);
    location.search = q.toString();
  });
  document.title = `${project.key} · Ballet board`;
  const canWrite = project.role !== 'viewer';

  // What the connection went through, for the debug hook.
  const stats = { tokens: 0, refreshes: 0, connects: 0, resyncs: 0, states: /** @type {string[]} */ ([]) };
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const client = new Client(`${scheme}//${location.host}/rpc`, {
    token: () => {
      stats.tokens++;
      if (client.state === 'connected') stats.refreshes++; // for auth.refresh
      return auth.token({ fresh: true });
    },
    codec: params.get('codec') === 'json' ? 'json' : 'msgpack',
    // transport=websocket|http forces one; by default the client falls back to HTTP by itself.
    transport: /** @type {any} */ (['websocket', 'http'].includes(params.get('transport') ?? '') ? params.get('transport') : 'auto'),
    maxBackoff: 10_000,
    onStateChange: (state, err) => {
      if (state === 'connected') stats.connects++;
      stats.states.push(err ? `${state}: ${err.message}` : state);
      if (stats.states.length > 100) stats.states.shift();
      showStatus(state, err);
    },
    logger: {
      debug() {},
      info: (msg, attrs) => console.info(`ballet: ${msg}`, attrs ?? ''),
      warn: (msg, attrs) => console.warn(`ballet: ${msg}`, attrs ?? ''),
    },
  });

  const model = new BoardModel();
  const view = new BoardView($('#columns'), model, {
    move: (key, state) => void write(key, () => {
      const it = model.items.get(key);
      if (!it) throw new Error(`${key} is gone`);
      return api.patchItem(key, { state }, it.version);
    }, `${key} moved to ${STATE_LABELS[/** @type {keyof STATE_LABELS} */ (state)]}`),
    addBlocker: (key, blocker) => void write(key, () => api.addDependency(key, blocker), `${blocker} now blocks ${key}`),
    removeBlocker: (key, blocker) => void write(key, () => api.removeDependency(key, blocker), `${blocker} no longer blocks ${key}`),
    open: (key) => void itemView.open(key),
  });
  const itemView = new ItemView({ root: /** @type {HTMLDialogElement} */ ($('#item-view')), client, model, me: subject, toast });
  const planner = new PlannerPanel({ root: $('#planner'), api, client, project: project.key, toast });

  /**
   * write runs one REST write on an item and applies its answer (the
   * stream's event for it then changes nothing).
   * @param {string} key @param {() => Promise<import('./model.js').Item>} op @param {string} done
   */
  async function write(key, op, done) {
    if (view.busy.has(key)) return;
    view.setBusy(key, true);
    try {
      const it = await op();
      if (model.putItem(it)) rendered([key]);
      announce(done);
    } catch (err) {
      if (err instanceof ApiError && err.status === 412) {
        toast(`${key} was changed meanwhile; here is its current state. Try again.`, 'error');
        await refetch([key]);
      } else {
        toast(`${key}: ${/** @type {Error} */ (err).message}`, 'error');
      }
    } finally {
      view.setBusy(key, false);
    }
  }

  /**
   * rendered shows changes of the model on the board and in the item view.
   * @param {Iterable<string>} [flash]
   */
  function rendered(flash) {
    view.render(flash);
    itemView.render();
  }

  /** @param {string} text */
  function announce(text) {
    $('#announcer').textContent = text;
  }

  /** @param {Iterable<string>} keys */
  async function refetch(keys) {
    for (const key of keys) {
      try {
        if (model.putItem(await api.item(key))) rendered([key]);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) {
          if (model.removeItem(key)) rendered();
        } else {
          toast(`Cannot load ${key}: ${/** @type {Error} */ (err).message}`, 'error');
        }
      }
    }
  }

  /** @param {import('./model.js').Changes} ch @param {boolean} [flash] */
  function applied(ch, flash = true) {
    if (ch.changed.size || ch.removed.size) rendered(flash ? ch.changed : []);
    if (ch.refetch.size) void refetch(ch.refetch);
    for (const ev of ch.other) void planner.projectEvent(ev);
  }

  let loads = 0;
  /** reload loads the snapshot (step 2 of the client recipe), holding events meanwhile. */
  async function reload() {
    const n = ++loads;
    model.beginLoad();
    for (let attempt = 0; ; attempt++) {
      try {
        const snap = await api.snapshot(project.key);
        if (n !== loads) return;
        const first = model.items.size === 0;
        applied(model.loadSnapshot(snap), !first);
        $('#board').setAttribute('aria-busy', 'false');
        if (model.overflowed) void reload();
        return;
      } catch (err) {
        if (n !== loads) return;
        toast(`Cannot load the board: ${/** @type {Error} */ (err).message}`, 'error');
        await new Promise((r) => setTimeout(r, Math.min(1000 * 2 ** attempt, 10_000)));
      }
    }
  }

  // The create form.
  const form = /** @type {HTMLFormElement} */ ($('#create-item'));
  const stateSelect = /** @type {HTMLSelectElement} */ ($('#new-state'));
  stateSelect.replaceChildren(...STATES.map((s) => h('option', { value: s }, STATE_LABELS[s])));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const title = /** @type {HTMLInputElement} */ ($('#new-title'));
    const text = title.value.trim();
    if (!text) return;
    const btn = /** @type {HTMLButtonElement} */ ($('button[type=submit]', form));
    btn.disabled = true;
    try {
      const it = await api.createItem(project.key, { title: text, state: stateSelect.value });
      if (model.putItem(it)) rendered([it.key]);
      title.value = '';
      announce(`${it.key} created`);
    } catch (err) {
      // The server's problem says what was wrong (a title beyond BALLET_MAX_TITLE_CHARS: 422
      // naming title_chars and its max, which then bounds the field too).
      if (err instanceof ApiError && err.limit === 'title_chars' && err.max > 0) title.maxLength = err.max;
      toast(`Not created: ${err instanceof ApiError && err.detail ? err.detail : /** @type {Error} */ (err).message}`, 'error');
    } finally {
      btn.disabled = false;
      title.focus();
    }
  });
  if (!canWrite) {
    for (const el of form.elements) /** @type {HTMLInputElement} */ (el).disabled = true;
    $('#board').classList.add('read-only');
  }

  /** @type {any} */ (window).__ballet = {
    client, model, planner, stats, itemView,
    dropConnection: () => client.dropConnection(),
    snapshot: () => ({
      state: client.state, transport: client.transport, seq: model.seq,
      items: [...model.items.values()].map((i) => ({ key: i.key, state: i.state, version: i.version, title: i.title, blocked_by: i.blocked_by })),
    }),
  };

  try {
    await client.connect({ retry: true });
  } catch (err) {
    if (err instanceof Error && err.name !== 'ClosedError') fatal(err.message);
    return;
  }
  // The client recipe: subscribe, then load the snapshot; events are held
  // until it is loaded and applied idempotently after.
  model.beginLoad();
  try {
    await client.subscribe(`project:${project.key}`, {
      onEvent: (ev) => applied(model.applyEvent(ev)),
      // Presence: who else has this board open, on any tab, device or replica,
      // and who has which item open (shown on its card).
      onPresence: (present) => showPresent(present, subject),
      onItemPresence: (items) => view.setViewers(items, subject),
      onResync: () => {
        stats.resyncs++;
        toast('The board missed too much while offline; reloading it.');
        void reload();
      },
      onEnd: (err) => {
        if (err) toast(`Live updates stopped: ${err.message}`, 'error');
      },
    });
  } catch (err) {
    const code = errorCode(err);
    fatal(code === Code.Forbidden ? `${subject} may not read ${project.key}.` : `Cannot follow ${project.key}: ${/** @type {Error} */ (err).message}`);
    return;
  }
  await reload();
  planner.init().catch((err) => toast(`Planner: ${err.message}`, 'error'));
}

/**
 * showPresent lists who is on the board, the signed-in user first.
 * @param {string[]} present @param {string} me
 */
function showPresent(present, me) {
  const list = $('#present');
  const names = [...present.filter((s) => s === me), ...present.filter((s) => s !== me)];
  people(list, names, (s) => h('li', {
    class: s === me ? 'present-me' : 'present-other', 'data-subject': s, title: s === me ? `${s} (you)` : s,
  }, s), MAX_PRESENT);
}

/** @param {string} current */
function switchUser(current) {
  const dialog = /** @type {HTMLDialogElement} */ ($('#signin'));
  const input = /** @type {HTMLInputElement} */ ($('#signin-name'));
  input.value = current;
  dialog.showModal();
  $('#signin-form').onsubmit = (/** @type {SubmitEvent} */ e) => {
    if (/** @type {HTMLButtonElement|null} */ (e.submitter)?.value === 'cancel') return;
    const name = input.value.trim();
    if (!name) return;
    storage.set('user', name);
    const q = new URLSearchParams(location.search);
    q.delete('user');
    location.search = q.toString();
  };
}

start().catch((err) => {
  console.error(err);
  fatal(String(err?.message ?? err));
});
