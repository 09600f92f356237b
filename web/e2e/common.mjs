// What the browser tests of the board share (board.e2e.mjs, http.e2e.mjs): the
// board's URL, REST as another user of the tracker writes, waiting on the page,
// comparing it with the server, and named steps.
//
// Environment: BOARD_URL, the board; CHROMIUM, the browser.

import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

import { chromium } from 'playwright-core';

export const BASE = process.env.BOARD_URL ?? 'http://127.0.0.1:8080';
export const PROJECT = 'DEMO';
// What must happen gets 30 s: a loaded machine's reconnect backoff after a long outage can
// outlast 10 s.
export const WAIT = 30_000;

/** How many steps passed and failed. */
export const tally = { passed: 0, failed: 0 };
const started = Date.now();

/** @param {string} msg */
export function log(msg) {
  console.log(`[${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s] ${msg}`);
}

// ---- REST, as another user of the tracker would write ----

let token = '';
export async function rest(method, p, body, headers = {}) {
  if (!token) token = (await (await fetch(`${BASE}/dev/token?subject=dev-user`)).json()).token;
  const res = await fetch(BASE + p, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}
export const createItem = (title, state) => rest('POST', `/api/v1/projects/${PROJECT}/items`, { title, state });
export const snapshot = () => rest('GET', `/api/v1/projects/${PROJECT}/items`);

// ---- page helpers ----

/** @param {import('playwright-core').Page} page @param {string} key */
export const card = (page, key) => page.locator(`#columns .card[data-key="${key}"]`);

/**
 * inColumn waits until key's card is in state's column on page.
 * @param {import('playwright-core').Page} page @param {string} key @param {string} state
 */
export async function inColumn(page, key, state) {
  await page.locator(`#columns .column[data-state="${state}"] .card[data-key="${key}"]`).waitFor({ timeout: WAIT });
}

/** @param {import('playwright-core').Page} page @param {string} state */
export async function status(page, state) {
  await page.locator(`#status[data-state="${state}"]`).waitFor({ timeout: WAIT });
}

/**
 * matchesServer waits until the page's board equals the REST snapshot:
 * every item with its state, version and blockers, and the same log
 * position (nothing lost, nothing applied twice).
 * @param {import('playwright-core').Page} page
 */
export async function matchesServer(page) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    const snap = await snapshot();
    const want = snap.items.map((i) => ({ key: i.key, state: i.state, version: i.version, title: i.title, blocked_by: i.blocked_by }))
      .sort((a, b) => a.key.localeCompare(b.key));
    const got = await page.evaluate(() => window.__ballet.snapshot());
    got.items.sort((a, b) => a.key.localeCompare(b.key));
    try {
      assert.deepEqual(got.items, want);
      assert.equal(got.seq, snap.seq, 'the page reflects the log up to the snapshot position');
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await page.waitForTimeout(100);
  }
}

/**
 * recordAnswers runs in a page: it records the planner's live answer as the
 * chat shows it: window.__answers.first is the live bubble's text when it
 * first had any, answers the bubble's text at each turn's end (before the
 * stored transcript replaces it).
 */
export function recordAnswers() {
  const rec = { first: '', answers: [] };
  /** @type {any} */ (window).__answers = rec;
  new MutationObserver((records) => {
    const live = document.querySelector('#planner .msg.assistant.live .live-text');
    if (!rec.first && live?.textContent) rec.first = live.textContent;
    for (const r of records) {
      for (const n of r.addedNodes) {
        if (n instanceof HTMLElement && n.classList.contains('turn-done')) {
          const bubble = n.closest('.msg');
          rec.answers.push([...(bubble?.querySelectorAll('.live-text') ?? [])].map((p) => p.textContent).join(''));
        }
      }
    }
  }).observe(document, { subtree: true, childList: true, characterData: true });
}

/**
 * answered waits until the chat on page has shown a whole answer and
 * returns what recordAnswers saw.
 * @param {import('playwright-core').Page} page
 * @returns {Promise<{first: string, answers: string[]}>}
 */
export async function answered(page) {
  await page.waitForFunction(() => window.__answers.answers.length > 0, null, { timeout: 3 * WAIT });
  return page.evaluate(() => window.__answers);
}

/**
 * step runs one named check; the first failure ends the run.
 * @param {string} name @param {() => Promise<void>} fn
 */
export async function step(name, fn) {
  log(`${name} …`);
  try {
    await fn();
    tally.passed++;
    log(`${name}: ok`);
  } catch (err) {
    tally.failed++;
    log(`${name}: FAILED`);
    throw err;
  }
}

/**
 * launch starts headless Chromium (CHROMIUM) with a fresh profile and args
 * besides the usual ones; remove userDataDir after closing context.
 * @param {string[]} [args]
 */
export async function launch(args = []) {
  const userDataDir = await mkdtemp(path.join(os.tmpdir(), 'ballet-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', ...args,
    ],
    viewport: { width: 1440, height: 900 },
  });
  return { context, userDataDir };
}
