// The board's columns and cards, kept in step with the model by keyed
// updates (cards are moved, never rebuilt, so focus and open forms stay).

import { h, people } from './dom.js';
import { STATES, STATE_LABELS, neighbour } from './model.js';

const DRAG_TYPE = 'application/x-ballet-item';

/**
 * @typedef {object} BoardActions
 * @property {(key: string, state: string) => void} move
 * @property {(key: string, blocker: string) => void} addBlocker
 * @property {(key: string, blocker: string) => void} removeBlocker
 * @property {(key: string) => void} open shows the item (and makes the user present on it)
 */

export class BoardView {
  /**
   * @param {HTMLElement} root the element that holds the columns
   * @param {import('./model.js').BoardModel} model
   * @param {BoardActions} actions
   */
  constructor(root, model, actions) {
    this.root = root;
    this.model = model;
    this.actions = actions;
    /** @type {Map<string, HTMLElement>} column lists by state */
    this.lists = new Map();
    /** @type {Map<string, HTMLElement>} column counts by state */
    this.counts = new Map();
    /** @type {Map<string, {el: HTMLElement, sig: string}>} */
    this.cards = new Map();
    /** @type {Set<string>} keys with a write in flight */
    this.busy = new Set();
    /** @type {Map<string, string[]>} who else has each item open (item presence), by key */
    this.viewers = new Map();
    this.build();
  }

  build() {
    this.root.replaceChildren();
    for (const state of STATES) {
      const id = `col-${state}`;
      const count = h('span', { class: 'count', 'aria-label': '0 items' }, '0');
      const list = h('ul', { class: 'cards', role: 'list', 'data-state': state });
      const col = h('section', { class: 'column', 'data-state': state, 'aria-labelledby': id },
        h('h3', { id }, h('span', { class: `state-dot state-${state}`, 'aria-hidden': 'true' }), STATE_LABELS[state], count),
        list,
        h('p', { class: 'empty', 'aria-hidden': 'true' }, 'Nothing here'));
      col.addEventListener('dragover', (e) => {
        if (!e.dataTransfer?.types.includes(DRAG_TYPE)) return;
        e.preventDefault();
        e.dataTransfer.dropEffect = 'move';
        col.classList.add('drop-target');
      });
      col.addEventListener('dragleave', (e) => {
        if (!col.contains(/** @type {Node|null} */ (e.relatedTarget))) col.classList.remove('drop-target');
      });
      col.addEventListener('drop', (e) => {
        col.classList.remove('drop-target');
        const key = e.dataTransfer?.getData(DRAG_TYPE);
        if (!key) return;
        e.preventDefault();
        const it = this.model.items.get(key);
        if (it && it.state !== state) this.actions.move(key, state);
      });
      this.lists.set(state, list);
      this.counts.set(state, count);
      this.root.append(col);
    }
  }

  /**
   * render brings the cards in line with the model; changed cards flash.
   * @param {Iterable<string>} [flash] keys to highlight
   */
  render(flash = []) {
    const active = /** @type {HTMLElement|null} */ (document.activeElement);
    const focusKey = active?.closest?.('.card')?.getAttribute('data-key');
    const focusAction = active?.getAttribute?.('data-action');

    const cols = this.model.columns();
    const seen = new Set();
    for (const state of STATES) {
      const list = /** @type {HTMLElement} */ (this.lists.get(state));
      const items = cols[state] ?? [];
      let prev = null;
      for (const it of items) {
        seen.add(it.key);
        const el = this.card(it);
        const want = prev ? prev.nextSibling : list.firstChild;
        if (el.parentNode !== list || want !== el) list.insertBefore(el, want);
        prev = el;
      }
      const count = /** @type {HTMLElement} */ (this.counts.get(state));
      count.textContent = String(items.length);
      count.setAttribute('aria-label', `${items.length} item${items.length === 1 ? '' : 's'}`);
      list.parentElement?.classList.toggle('is-empty', items.length === 0);
    }
    for (const [key, c] of this.cards) {
      if (!seen.has(key)) {
        c.el.remove();
        this.cards.delete(key);
      }
    }
    for (const key of flash) {
      const el = this.cards.get(key)?.el;
      if (!el) continue;
      el.classList.remove('flash');
      void el.offsetWidth; // restart the animation
      el.classList.add('flash');
    }
    if (focusKey && (document.activeElement === document.body || !document.activeElement)) {
      const card = this.cards.get(focusKey)?.el;
      const btn = /** @type {HTMLButtonElement|null} */ (card?.querySelector(`[data-action="${focusAction}"]:not([disabled])`)
        ?? card?.querySelector('button:not([disabled])') ?? null);
      btn?.focus();
    }
  }

  /** @param {string} key @param {boolean} busy */
  setBusy(key, busy) {
    if (busy) this.busy.add(key);
    else this.busy.delete(key);
    const c = this.cards.get(key);
    if (c) {
      c.sig = '';
      const it = this.model.items.get(key);
      if (it) this.card(it);
    }
  }

  /**
   * setViewers shows on each card who else has the item open.
   * @param {Map<string, string[]>} items subjects by item key @param {string} me left out
   */
  setViewers(items, me) {
    /** @type {Map<string, string[]>} */
    const next = new Map();
    for (const [key, subjects] of items) {
      const others = subjects.filter((s) => s !== me);
      if (others.length) next.set(key, others);
    }
    const changed = new Set([...this.viewers.keys(), ...next.keys()]);
    this.viewers = next;
    for (const key of changed) {
      const it = this.model.items.get(key);
      if (it) this.card(it);
    }
  }

  /**
   * card returns the card of it, created or updated.
   * @param {import('./model.js').Item} it
   */
  card(it) {
    const open = this.model.openBlockers(it);
    const busy = this.busy.has(it.key);
    const viewers = this.viewers.get(it.key) ?? [];
    const sig = JSON.stringify([it.version, it.state, it.title, it.description, it.blocked_by, open, busy, viewers]);
    let c = this.cards.get(it.key);
    if (!c) {
      c = { el: this.createCard(it.key), sig: '' };
      this.cards.set(it.key, c);
    }
    if (c.sig !== sig) {
      this.updateCard(c.el, it, open, busy, viewers);
      c.sig = sig;
    }
    return c.el;
  }

  /** @param {string} key */
  createCard(key) {
    const titleId = `card-${key}-title`;
    const el = h('li', { class: 'card', 'data-key': key, draggable: true, 'aria-labelledby': titleId },
      h('div', { class: 'card-head' },
        h('span', { class: 'key' }, key),
        h('span', { class: 'blocked-flag', hidden: true }, 'Blocked'),
        h('span', { class: 'version', title: 'version' })),
      h('p', { class: 'title', id: titleId },
        h('button', { type: 'button', class: 'open-item', 'data-action': 'open', title: `Open ${key}` })),
      h('ul', { class: 'viewers', 'aria-label': `Also looking at ${key}`, hidden: true }),
      h('p', { class: 'description' }),
      h('ul', { class: 'badges', 'aria-label': `${key} is blocked by` }),
      h('div', { class: 'card-actions' },
        h('button', { type: 'button', class: 'move move-left', 'data-action': 'left' }, '◀'),
        this.blockerForm(key),
        h('button', { type: 'button', class: 'move move-right', 'data-action': 'right' }, '▶')));
    el.addEventListener('dragstart', (e) => {
      if (!e.dataTransfer) return;
      e.dataTransfer.setData(DRAG_TYPE, key);
      e.dataTransfer.setData('text/plain', key);
      e.dataTransfer.effectAllowed = 'move';
      el.classList.add('dragging');
    });
    el.addEventListener('dragend', () => el.classList.remove('dragging'));
    el.addEventListener('click', (e) => {
      const btn = /** @type {HTMLElement} */ (e.target).closest('button');
      if (!btn || !el.contains(btn)) return;
      const it = this.model.items.get(key);
      if (!it) return;
      const action = btn.getAttribute('data-action');
      if (action === 'left' || action === 'right') {
        const to = neighbour(it.state, action === 'left' ? -1 : 1);
        if (to) this.actions.move(key, to);
      } else if (action === 'open') {
        this.actions.open(key);
      } else if (action === 'unblock') {
        this.actions.removeBlocker(key, String(btn.getAttribute('data-blocker')));
      }
    });
    return el;
  }

  /** @param {string} key */
  blockerForm(key) {
    const selectId = `blocker-${key}`;
    const select = h('select', { id: selectId, name: 'blocker' });
    const details = h('details', { class: 'add-blocker' },
      h('summary', { 'aria-label': `Add a blocker to ${key}` }, '+ blocker'),
      h('form', {
        class: 'blocker-form',
        onsubmit: (/** @type {SubmitEvent} */ e) => {
          e.preventDefault();
          const blocker = /** @type {HTMLSelectElement} */ (select).value;
          if (blocker) this.actions.addBlocker(key, blocker);
          /** @type {HTMLDetailsElement} */ (details).open = false;
        },
      },
      h('label', { for: selectId }, `Blocked by`),
      select,
      h('button', { type: 'submit', 'data-action': 'add-blocker' }, 'Add')));
    details.addEventListener('toggle', () => {
      if (!/** @type {HTMLDetailsElement} */ (details).open) return;
      const it = this.model.items.get(key);
      const options = [...this.model.items.values()]
        .filter((o) => o.key !== key && !it?.blocked_by.includes(o.key))
        .sort((a, b) => a.number - b.number)
        .map((o) => h('option', { value: o.key }, `${o.key} · ${o.title}`));
      select.replaceChildren(...options);
      select.focus();
    });
    return details;
  }

  /**
   * @param {HTMLElement} el @param {import('./model.js').Item} it
   * @param {string[]} open keys of blockers not done yet @param {boolean} busy
   * @param {string[]} viewers who else has it open
   */
  updateCard(el, it, open, busy, viewers) {
    el.classList.toggle('is-blocked', open.length > 0);
    el.classList.toggle('busy', busy);
    el.setAttribute('aria-busy', String(busy));
    el.setAttribute('data-state', it.state);
    el.setAttribute('data-version', String(it.version));
    /** @type {HTMLElement} */ (el.querySelector('.open-item')).textContent = it.title;
    const desc = /** @type {HTMLElement} */ (el.querySelector('.description'));
    desc.textContent = it.description;
    desc.hidden = !it.description;
    /** @type {HTMLElement} */ (el.querySelector('.version')).textContent = `v${it.version}`;
    /** @type {HTMLElement} */ (el.querySelector('.blocked-flag')).hidden = open.length === 0;
    const badges = /** @type {HTMLElement} */ (el.querySelector('.badges'));
    badges.replaceChildren(...it.blocked_by.map((b) => {
      const isOpen = open.includes(b);
      const blocker = this.model.items.get(b);
      return h('li', {
        class: `badge ${isOpen ? 'badge-open' : 'badge-resolved'}`,
        'data-blocker': b,
        title: blocker ? `${b}: ${blocker.title} (${blocker.state.replace('_', ' ')})` : b,
      },
      h('span', {}, `${isOpen ? 'blocked by' : 'was blocked by'} ${b}`),
      h('button', { type: 'button', class: 'unblock', 'data-action': 'unblock', 'data-blocker': b, 'aria-label': `Remove: ${b} blocks ${it.key}`, disabled: busy }, '×'));
    }));
    badges.hidden = it.blocked_by.length === 0;
    const list = /** @type {HTMLElement} */ (el.querySelector('.viewers'));
    people(list, viewers, (v) => h('li', { class: 'viewer', 'data-subject': v, title: `${v} has ${it.key} open` }, v), 3);
    list.hidden = viewers.length === 0;
    el.classList.toggle('has-viewers', viewers.length > 0);
    const left = neighbour(it.state, -1);
    const right = neighbour(it.state, 1);
    for (const [sel, to] of /** @type {const} */ ([['.move-left', left], ['.move-right', right]])) {
      const b = /** @type {HTMLButtonElement} */ (el.querySelector(sel));
      b.disabled = !to || busy;
      b.hidden = !to;
      const label = to ? `Move ${it.key} to ${STATE_LABELS[/** @type {keyof STATE_LABELS} */ (to)]}` : '';
      b.setAttribute('aria-label', label);
      b.title = label;
    }
  }
}
