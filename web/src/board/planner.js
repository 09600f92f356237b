// The planner chat panel: sessions over REST, the conversation over /rpc
// (planner.send, planner.cancel), and the turn's live output streamed from
// planner.watch as it is generated. The watch starts from the beginning of
// a running turn and resumes where it was after a dropped connection, so
// the live answer is shown whole, once.

import { Code, errorCode, utf8Length } from '../client/index.js';
import { ApiError } from './api.js';
import { h, relativeTime } from './dom.js';

/**
 * @typedef {import('./api.js').Api} Api
 * @typedef {import('./api.js').Message} Message
 * @typedef {import('./api.js').Session} Session
 * @typedef {import('../client/watch.js').PlannerOutput} PlannerOutput
 */

/** @param {any} input */
function formatInput(input) {
  if (input === undefined || input === null) return '';
  if (typeof input === 'string') return input;
  try {
    return JSON.stringify(input);
  } catch {
    return String(input);
  }
}

export class PlannerPanel {
  /**
   * @param {{root: HTMLElement, api: Api, client: import('../client/index.js').Client,
   *   project: string, toast: (text: string, kind?: 'info'|'error') => void}} o
   */
  constructor(o) {
    this.root = o.root;
    this.api = o.api;
    this.client = o.client;
    this.project = o.project;
    this.toast = o.toast;
    /** @type {Session[]} */
    this.sessions = [];
    /** @type {string|null} */
    this.current = null;
    /** @type {import('../client/index.js').Watch|null} */
    this.watch = null;
    this.running = false;
    this.available = true;
    /** @type {HTMLElement|null} the assistant bubble being streamed */
    this.live = null;
    /** @type {HTMLElement|null} */
    this.liveText = null;
    /**
     * The transcript seq of the running turn's human message, when the live
     * bubble shows that turn from its start: the stored messages after it
     * are in the bubble already.
     * @type {number|null}
     */
    this.turnSeq = null;
    this.loadGen = 0;

    this.select = /** @type {HTMLSelectElement} */ (h('select', { id: 'planner-session', onchange: () => this.choose(this.select.value || null) }));
    this.transcript = h('ol', { class: 'transcript', role: 'log', 'aria-live': 'polite', 'aria-label': 'Conversation' });
    // The server's planner_message_bytes bounds the message, in bytes of UTF-8: checkLength,
    // not maxlength, which counts UTF-16 code units.
    this.count = h('span', { id: 'planner-count', class: 'planner-count' });
    this.input = /** @type {HTMLTextAreaElement} */ (h('textarea', {
      id: 'planner-input', name: 'text', rows: 2, required: true, 'aria-describedby': 'planner-count',
      placeholder: 'Ask the planner, e.g. “create Write the release notes” or “list”',
      oninput: () => this.checkLength(),
      onkeydown: (/** @type {KeyboardEvent} */ e) => {
        if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
          e.preventDefault();
          this.form.requestSubmit();
        }
      },
    }));
    this.sendBtn = /** @type {HTMLButtonElement} */ (h('button', { type: 'submit', class: 'primary' }, 'Send'));
    this.stopBtn = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', hidden: true, onclick: () => this.cancel() }, 'Stop'));
    this.status = h('p', { class: 'planner-status', role: 'status' });
    this.form = /** @type {HTMLFormElement} */ (h('form', {
      class: 'planner-form',
      onsubmit: (/** @type {SubmitEvent} */ e) => {
        e.preventDefault();
        void this.send(this.input.value);
      },
    },
    h('label', { for: 'planner-input', class: 'visually-hidden' }, 'Message to the planner'),
    this.input,
    h('div', { class: 'planner-buttons' }, this.count, this.stopBtn, this.sendBtn)));
    this.root.append(
      h('div', { class: 'planner-head' },
        h('h2', { id: 'planner-title' }, 'Planner'),
        h('label', { for: 'planner-session', class: 'visually-hidden' }, 'Conversation'),
        this.select,
        h('button', { type: 'button', class: 'ghost', onclick: () => this.choose(null) }, 'New chat')),
      this.transcript, this.status, this.form);
    this.setRunning(false);
  }

  /** init lists the sessions and opens the newest. */
  async init() {
    try {
      this.sessions = await this.api.sessions(this.project);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        this.unavailable('This server has no planner.');
        return;
      }
      throw err;
    }
    this.renderSessions();
    await this.choose(this.sessions[0]?.id ?? null);
  }

  /** @param {string} why */
  unavailable(why) {
    this.available = false;
    this.root.setAttribute('data-planner', 'unavailable');
    this.status.textContent = why;
    for (const el of this.root.querySelectorAll('.planner-head select, .planner-head button')) /** @type {HTMLElement} */ (el).hidden = true;
    this.transcript.replaceChildren(h('li', { class: 'msg assistant' }, h('p', {},
      'The planner answers here once the gateway runs it: ask it to create items or list them, and watch its answer stream in.')));
    this.input.disabled = true;
    this.sendBtn.disabled = true;
  }

  renderSessions() {
    const opts = this.sessions.map((s) => h('option', { value: s.id }, `${s.title || 'Untitled'} · ${relativeTime(s.created_at)}`));
    opts.unshift(h('option', { value: '' }, 'New conversation'));
    this.select.replaceChildren(...opts);
    this.select.value = this.current ?? '';
  }

  /**
   * choose switches to session id (null: a new conversation, created on
   * the first message).
   * @param {string|null} id
   */
  async choose(id) {
    if (id === this.current && (id === null || this.watch)) return;
    const old = this.watch;
    this.watch = null;
    this.current = id;
    this.select.value = id ?? '';
    this.root.setAttribute('data-session', id ?? '');
    this.endLive();
    this.transcript.replaceChildren();
    this.setRunning(false);
    // Gone before the next watch: a connection follows a session once (a second watch of
    // the same session on it is refused).
    if (old) await old.unsubscribe().catch(() => {});
    if (!id) {
      this.status.textContent = 'Start a conversation: the planner can create and list items.';
      return;
    }
    try {
      this.watch = await this.client.plannerWatch(id, {
        fromTurnStart: true,
        onOutput: (o) => this.output(o),
        // Only when output was missed: the stored transcript is the truth.
        onResume: (running) => {
          this.endLive();
          this.setRunning(running);
          void this.reload();
        },
        onEnd: (err) => {
          if (err && this.current === id) this.toast(`Planner updates stopped: ${err.message}`, 'error');
        },
      });
    } catch (err) {
      if (errorCode(err) === Code.MethodNotFound) {
        this.unavailable('This server does not run the planner.');
        return;
      }
      this.toast(`Cannot follow the conversation: ${/** @type {Error} */ (err).message}`, 'error');
    }
    if (this.current !== id) return;
    this.setRunning(this.watch?.running ?? false);
    await this.reload();
  }

  /** reload renders the stored transcript, and the live turn after it. */
  async reload() {
    const id = this.current;
    if (!id) return;
    const gen = ++this.loadGen;
    let sess;
    try {
      sess = await this.api.session(id);
    } catch (err) {
      this.toast(`Cannot load the conversation: ${/** @type {Error} */ (err).message}`, 'error');
      return;
    }
    if (gen !== this.loadGen || id !== this.current) return;
    const live = this.live && this.running ? this.live : null;
    // While a turn streams, its bubble shows what it stored so far.
    const upTo = live && this.turnSeq !== null ? this.turnSeq : Infinity;
    this.transcript.replaceChildren(...sess.messages.filter((m) => m.seq <= upTo).map((m) => this.message(m)));
    if (live) this.transcript.append(live);
    else this.endLive();
    if (!this.running) this.setRunning(sess.running);
    this.scroll();
  }

  /**
   * message renders one stored message.
   * @param {Message} m
   */
  message(m) {
    const c = m.content;
    if (m.role === 'human') {
      return h('li', { class: 'msg human', 'data-seq': m.seq }, h('span', { class: 'who' }, 'You'), h('p', {}, String(c)));
    }
    if (m.role === 'assistant') {
      const calls = Array.isArray(c?.tool_calls) ? c.tool_calls : [];
      return h('li', { class: 'msg assistant', 'data-seq': m.seq },
        h('span', { class: 'who' }, 'Planner'),
        c?.text ? h('p', {}, String(c.text)) : null,
        ...calls.map((/** @type {any} */ t) => this.toolCall(t.name, t.input)));
    }
    const results = Array.isArray(c?.results) ? c.results : [];
    return h('li', { class: 'msg tool', 'data-seq': m.seq },
      ...results.map((/** @type {any} */ r) => this.toolResult(r.tool, r.text, r.is_error)));
  }

  /** @param {string} tool @param {any} input */
  toolCall(tool, input) {
    return h('div', { class: 'tool-call' }, h('span', { class: 'tool-icon', 'aria-hidden': 'true' }, '⚙'),
      h('span', {}, 'Calls '), h('code', { class: 'tool-name' }, tool ?? 'a tool'), h('code', { class: 'tool-input' }, formatInput(input)));
  }

  /** @param {string|undefined} tool @param {string} text @param {boolean} [isError] */
  toolResult(tool, text, isError) {
    return h('div', { class: `tool-result${isError ? ' is-error' : ''}` },
      h('span', { class: 'tool-label' }, `${tool ?? 'tool'} ${isError ? 'failed' : 'answered'}`),
      h('pre', {}, String(text ?? '')));
  }

  /** liveBubble returns the assistant bubble of the running turn. */
  liveBubble() {
    if (!this.live) {
      this.liveText = h('p', { class: 'live-text' });
      this.live = h('li', { class: 'msg assistant live', 'aria-busy': 'true' }, h('span', { class: 'who' }, 'Planner'), this.liveText);
      this.transcript.append(this.live);
    }
    return this.live;
  }

  endLive() {
    this.live?.setAttribute('aria-busy', 'false');
    this.live?.classList.remove('live');
    this.live = null;
    this.liveText = null;
    this.turnSeq = null;
  }

  /**
   * output shows one planner.output as it arrives.
   * @param {PlannerOutput} o
   */
  output(o) {
    if (o.session !== this.current) return;
    switch (o.type) {
      case 'text': {
        this.setRunning(true);
        const bubble = this.liveBubble();
        let p = /** @type {HTMLElement} */ (bubble.lastElementChild);
        if (!p.classList.contains('live-text')) {
          p = h('p', { class: 'live-text' });
          bubble.append(p);
        }
        p.textContent += o.text ?? '';
        break;
      }
      case 'tool_call':
        this.setRunning(true);
        this.liveBubble().append(this.toolCall(o.tool ?? '', o.input));
        break;
      case 'tool_result':
        this.liveBubble().append(this.toolResult(o.tool, o.text ?? '', o.is_error));
        break;
      case 'error':
        this.liveBubble().append(h('p', { class: 'turn-error', role: 'alert' }, o.text ?? 'The planner failed.'));
        break;
      case 'done':
        this.liveBubble().append(h('p', { class: 'turn-done' }, o.text === 'end_turn' ? 'Done.' : `Stopped: ${o.text ?? ''}`));
        this.endLive();
        this.setRunning(false);
        void this.reload();
        break;
      case 'message':
        // A turn's first output stores the human's message.
        if (o.offset === 1) {
          this.endLive();
          this.setRunning(true);
          this.turnSeq = o.seq ?? null;
        }
        break;
      default: // compacted: the transcript is reloaded at done
    }
    this.scroll();
  }

  /** @param {boolean} running */
  setRunning(running) {
    this.running = running;
    this.root.setAttribute('data-running', String(running));
    this.stopBtn.hidden = !running;
    if (!this.available) return;
    this.sendBtn.disabled = running;
    this.status.textContent = running ? 'The planner is answering…' : '';
  }

  scroll() {
    this.transcript.scrollTop = this.transcript.scrollHeight;
  }

  /**
   * checkLength holds the message to the server's planner_message_bytes (none from a server
   * that advertises none): near it the box shows the message's bytes of UTF-8, and past it
   * the box is invalid, so the form does not submit, and says so.
   * @returns {boolean} whether the message is within the limit
   */
  checkLength() {
    const max = this.client.limits?.planner_message_bytes;
    const bytes = max ? utf8Length(this.input.value.trim()) : 0;
    const over = !!max && bytes > max;
    this.input.setCustomValidity(over ? `Too long for the planner: ${bytes} bytes, at most ${max}.` : '');
    this.count.textContent = max && bytes > max * 0.8 ? `${bytes} / ${max} bytes` : '';
    this.count.classList.toggle('over', over);
    return !over;
  }

  /** @param {string} raw */
  async send(raw) {
    const text = raw.trim();
    if (!text || this.running || !this.available) return;
    if (!this.checkLength()) {
      this.input.reportValidity();
      return;
    }
    this.sendBtn.disabled = true;
    try {
      if (!this.current) {
        const sess = await this.api.createSession(this.project, text.slice(0, 60));
        this.sessions.unshift(sess);
        this.renderSessions();
        await this.choose(sess.id);
      }
      const id = /** @type {string} */ (this.current);
      this.transcript.append(h('li', { class: 'msg human pending' }, h('span', { class: 'who' }, 'You'), h('p', {}, text)));
      this.scroll();
      this.input.value = '';
      this.checkLength();
      this.setRunning(true);
      await this.client.plannerSend(id, text);
    } catch (err) {
      this.transcript.querySelector('.msg.human.pending:last-child')?.remove();
      this.setRunning(false);
      const code = errorCode(err);
      if (code === Code.Conflict) this.toast('The planner is still answering; wait for it or stop it.', 'error');
      else if (code === Code.MethodNotFound) this.unavailable('This server does not run the planner.');
      else this.toast(`Not sent: ${/** @type {Error} */ (err).message}`, 'error');
      if (!this.input.value) this.input.value = text;
      this.checkLength();
    } finally {
      if (!this.running && this.available) this.sendBtn.disabled = false;
    }
  }

  async cancel() {
    if (!this.current) return;
    try {
      await this.client.plannerCancel(this.current);
    } catch (err) {
      this.toast(`Cannot stop: ${/** @type {Error} */ (err).message}`, 'error');
    }
  }

  /**
   * projectEvent follows planner.message events of the project stream: a
   * conversation started elsewhere appears in the list (and opens when
   * none is), a message stored in the open one shows up.
   * @param {import('../client/subscription.js').StreamEvent} ev
   */
  async projectEvent(ev) {
    if (ev.type !== 'planner.message' || !this.available) return;
    const id = String(ev.payload?.session ?? ev.entity_id);
    if (!this.sessions.some((s) => s.id === id)) {
      try {
        this.sessions = await this.api.sessions(this.project);
      } catch {
        return;
      }
      this.renderSessions();
      if (!this.current) await this.choose(id);
      return;
    }
    if (id === this.current && !this.running) await this.reload();
  }

  /** reconnected reloads after the connection was re-established. */
  resumed() {
    void this.reload();
  }
}
