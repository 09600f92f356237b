// The item view: one item in a dialog, live. While it is open the user is
// present on the item's stream (item presence), so every other board shows
// them on the item's card, and the view shows who else has it open.

import { STATE_LABELS } from './model.js';
import { $, h, people } from './dom.js';

/**
 * @typedef {object} ItemViewOptions
 * @property {HTMLDialogElement} root
 * @property {import('../client/index.js').Client} client
 * @property {import('./model.js').BoardModel} model
 * @property {string} me the signed-in subject
 * @property {(text: string, kind?: string) => void} toast
 */

export class ItemView {
  /** @param {ItemViewOptions} o */
  constructor(o) {
    this.o = o;
    /** The item shown, or null. @type {string|null} */
    this.key = null;
    /** @type {import('../client/subscription.js').Subscription|null} */
    this.sub = null;
    /** Counts opens, so that a subscribe that completes late knows it is stale. */
    this.gen = 0;
    $('#item-view-close', o.root).addEventListener('click', () => o.root.close());
    o.root.addEventListener('close', () => void this.stop());
  }

  /**
   * open shows key and follows it; another item shown before is closed.
   * @param {string} key
   */
  async open(key) {
    if (this.key === key && this.o.root.open) return;
    await this.stop();
    const gen = ++this.gen;
    this.key = key;
    this.showPresent([]);
    this.render();
    if (!this.o.root.open) this.o.root.showModal();
    try {
      const sub = await this.o.client.subscribe(`item:${key}`, {
        onPresence: (present) => {
          if (gen === this.gen) this.showPresent(present);
        },
        // The board's project stream brings the same events to the model.
        onEvent: () => queueMicrotask(() => gen === this.gen && this.render()),
        onEnd: (err) => {
          if (!err || gen !== this.gen) return;
          this.o.toast(`${key}: ${err.message}`, 'error');
          this.o.root.close();
        },
      });
      if (gen !== this.gen) {
        await sub.unsubscribe();
        return;
      }
      this.sub = sub;
    } catch (err) {
      if (gen !== this.gen) return;
      this.o.toast(`Cannot open ${key}: ${/** @type {Error} */ (err).message}`, 'error');
      this.o.root.close();
    }
  }

  /** stop ends following the item shown (the dialog is closing or shows another). */
  async stop() {
    this.gen++;
    this.key = null;
    const sub = this.sub;
    this.sub = null;
    if (sub) {
      try {
        await sub.unsubscribe();
      } catch { /* the connection is gone: so is the subscription */ }
    }
  }

  /** render shows the item as the model has it now. */
  render() {
    const root = this.o.root;
    const key = this.key;
    if (!key) return;
    const it = this.o.model.items.get(key);
    $('#item-view-key', root).textContent = key;
    $('#item-view-title', root).textContent = it?.title ?? 'This item is gone';
    const state = $('#item-view-state', root);
    state.textContent = it ? STATE_LABELS[/** @type {keyof STATE_LABELS} */ (it.state)] ?? it.state : '';
    state.setAttribute('data-state', it?.state ?? '');
    const desc = $('#item-view-description', root);
    desc.textContent = it?.description ?? '';
    desc.hidden = !it?.description;
    const blockers = $('#item-view-blockers', root);
    blockers.replaceChildren(...(it?.blocked_by ?? []).map((b) => {
      const o = this.o.model.items.get(b);
      return h('li', {}, o ? `${b} · ${o.title} (${STATE_LABELS[/** @type {keyof STATE_LABELS} */ (o.state)] ?? o.state})` : b);
    }));
    blockers.hidden = !it?.blocked_by.length;
    $('#item-view-version', root).textContent = it ? `v${it.version}` : '';
  }

  /**
   * showPresent lists who has the item open, the user first.
   * @param {string[]} present
   */
  showPresent(present) {
    const me = this.o.me;
    const names = [...present.filter((s) => s === me), ...present.filter((s) => s !== me)];
    people($('#item-present', this.o.root), names, (s) => h('li', {
      class: s === me ? 'present-me' : 'present-other', 'data-subject': s, title: s === me ? `${s} (you)` : s,
    }, s), 12);
  }
}
