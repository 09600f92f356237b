// A few DOM helpers: element creation without innerHTML (all text is set
// as text, so nothing the server sends is ever parsed as markup).

/**
 * h creates an element. Attributes starting with "on" are listeners;
 * "class", "text", "hidden", "disabled" and data-/aria- attributes are
 * handled as expected; false, null and undefined values are skipped.
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {...(Node|string|null|undefined|false)} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'hidden' || k === 'disabled' || k === 'required' || k === 'draggable') /** @type {any} */ (el)[k] = !!v;
    else if (k === 'value') /** @type {any} */ (el).value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c);
  }
  return el;
}

/**
 * $ returns the element matching selector under root, or throws.
 * @template {Element} [T=HTMLElement]
 * @param {string} selector @param {ParentNode} [root]
 * @returns {T}
 */
export function $(selector, root = document) {
  const el = root.querySelector(selector);
  if (!el) throw new Error(`no element ${selector}`);
  return /** @type {T} */ (/** @type {unknown} */ (el));
}

/** Toasts: short notices in a live region. */
export class Toasts {
  /** @param {HTMLElement} root */
  constructor(root) {
    this.root = root;
  }

  /**
   * show adds a notice that disappears after a while.
   * @param {string} text @param {'info'|'error'} [kind]
   */
  show(text, kind = 'info') {
    const el = h('div', { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : null }, text);
    this.root.append(el);
    while (this.root.children.length > 4) this.root.firstElementChild?.remove();
    setTimeout(() => el.remove(), kind === 'error' ? 8000 : 4000);
  }
}

/**
 * relativeTime says how long ago an RFC 3339 time was, briefly.
 * @param {string} iso @param {number} [now]
 */
export function relativeTime(iso, now = Date.now()) {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (!Number.isFinite(s)) return '';
  if (s < 45) return 'just now';
  if (s < 90 * 60) return `${Math.round(s / 60)} min ago`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

/**
 * people fills list with a chip per subject, at most max of them, then one
 * "+N" chip whose title names the rest: a busy board stays one line.
 * @param {HTMLElement} list
 * @param {string[]} subjects in the order shown
 * @param {(s: string) => HTMLElement} chip
 * @param {number} max
 */
export function people(list, subjects, chip, max) {
  const shown = subjects.length > max ? subjects.slice(0, max - 1) : subjects;
  const rest = subjects.slice(shown.length);
  const items = shown.map(chip);
  if (rest.length) {
    items.push(h('li', { class: 'more', title: rest.join(', '), 'aria-label': `and ${rest.length} more: ${rest.join(', ')}` }, `+${rest.length}`));
  }
  list.replaceChildren(...items);
}
