// End-to-end test of the board over POST /rpc in headless Chromium, run by
// TestBrowserBoardOverHTTP (web/e2e_http_test.go): through a real nginx that
// refuses WebSocket upgrades (HTTP/2 over TLS) in front of two replicas on one
// database.
//
// Environment: BOARD_URL (nginx, https), H1_URL (the same nginx setup without
// TLS: HTTP/1.1), SPKI (the certificate's key hash for Chromium), CHROMIUM,
// STORY (the planner's answer to "tell a story"), CONTROL_URL (POST /kill
// kills the replica with the most POST /rpc responses open).

import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';

import {
  BASE, PROJECT, WAIT, answered, createItem, inColumn, launch, log, matchesServer, recordAnswers, rest, status, step, tally,
} from './common.mjs';

const H1 = process.env.H1_URL ?? '';
const STORY = process.env.STORY ?? '';
const CONTROL = process.env.CONTROL_URL ?? '';
/** How many streaming POSTs one page opens at once in the last step. */
const STREAMS = 12;

/**
 * openBoard opens the board on a new page of context and waits until it is live.
 * @param {import('playwright-core').BrowserContext} context @param {string} base @param {string[]} errors
 */
async function openBoard(context, base, errors) {
  const page = await context.newPage();
  page.on('pageerror', (err) => errors.push(err.message));
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(msg.text());
  });
  await page.goto(`${base}/?project=${PROJECT}`);
  await status(page, 'connected');
  return page;
}

/**
 * liveStreams subscribes page's client to each key's item stream at once,
 * then changes every item over REST, and counts the subscriptions that were
 * answered and those that delivered their item's change within a few seconds,
 * and every subscription of the page the server serves (the board's own too):
 * its streaming POSTs open.
 * @param {import('playwright-core').Page} page @param {string[]} keys @param {string} label
 * @returns {Promise<{answered: number, live: number, open: number}>}
 */
async function liveStreams(page, keys, label) {
  await page.evaluate((ks) => {
    const w = /** @type {any} */ (window);
    w.__streams = { answered: 0, live: new Set(), subs: [] };
    for (const k of ks) {
      w.__ballet.client.subscribe(`item:${k}`, { onEvent: () => w.__streams.live.add(k) })
        .then((/** @type {any} */ s) => { w.__streams.answered++; w.__streams.subs.push(s); }, () => {});
    }
  }, keys);
  await page.waitForTimeout(3000);
  for (const k of keys) await rest('PATCH', `/api/v1/items/${k}`, { title: `Changed while ${STREAMS} streams are open over ${label}` });
  await page.waitForTimeout(3000);
  const got = await page.evaluate(() => {
    const c = window.__ballet.client;
    const open = [...c._subs.values()].filter((e) => e.gen !== 0 && e.gen === c._cur?.gen).length;
    return { answered: window.__streams.answered, live: window.__streams.live.size, open };
  });
  await page.evaluate(() => Promise.all(window.__streams.subs.map((/** @type {any} */ s) => s.unsubscribe())));
  return got;
}

const { context, userDataDir } = await launch([`--ignore-certificate-errors-spki-list=${process.env.SPKI ?? ''}`]);
/** @type {string[]} */
const errors = [];
try {
  /** @type {import('playwright-core').Page} */
  let a;
  const keys = [];
  await step('the board falls back to POST /rpc by itself through a proxy that refuses WebSocket, over HTTP/2', async () => {
    for (let i = 1; i <= STREAMS; i++) keys.push((await createItem(`Item ${i}`, 'backlog')).key);
    a = await openBoard(context, BASE, errors);
    assert.equal(await a.evaluate(() => window.__ballet.client.transport), 'http');
    assert.equal(await a.evaluate(() => performance.getEntriesByType('navigation')[0].nextHopProtocol), 'h2');
    await matchesServer(a);
  });

  await step('items changed by another client appear live', async () => {
    const it = await createItem('Created by another client');
    await inColumn(a, it.key, 'backlog');
    await rest('PATCH', `/api/v1/items/${it.key}`, { state: 'in_progress' });
    await inColumn(a, it.key, 'in_progress');
  });

  await step('a planner answer streams in pieces, whole and once', async () => {
    await a.evaluate(recordAnswers);
    await a.evaluate(() => {
      const w = /** @type {any} */ (window);
      w.__pieces = 0;
      new MutationObserver(() => { w.__pieces++; })
        .observe(document.querySelector('#planner'), { subtree: true, childList: true, characterData: true });
    });
    await a.getByLabel('Message to the planner').fill('tell a story');
    await a.locator('#planner').getByRole('button', { name: 'Send' }).click();
    const rec = await answered(a);
    assert.equal(rec.answers.at(-1), STORY, 'the answer, whole and once');
    assert.ok(rec.first && rec.first.length < STORY.length, `the answer arrived in pieces: first ${rec.first.length} characters`);
  });

  await step('a replica killed mid-stream is survived with no gap', async () => {
    const connects = await a.evaluate(() => window.__ballet.stats.connects);
    const killed = Date.now();
    const said = await (await fetch(`${CONTROL}/kill`, { method: 'POST' })).text();
    log(said.trim());
    for (let i = 1; i <= 3; i++) await createItem(`Created after the kill ${i}`);
    await a.waitForFunction((n) => window.__ballet.stats.connects > n, connects, { timeout: WAIT });
    await status(a, 'connected');
    log(`page A connected again ${Date.now() - killed} ms after the kill`);
    log(`page A: ${(await a.evaluate(() => window.__ballet.stats.states.slice(-3))).join(' | ')}`);
    assert.equal(await a.evaluate(() => window.__ballet.client.transport), 'http');
    await matchesServer(a);
  });

  await step(`one page holds ${STREAMS} streaming POSTs live at once over HTTP/2`, async () => {
    const got = await liveStreams(a, keys, 'HTTP/2');
    log(`HTTP/2: ${got.answered} of ${STREAMS} subscriptions answered, ${got.live} live; ${got.open} streaming POSTs open`);
    assert.deepEqual({ answered: got.answered, live: got.live }, { answered: STREAMS, live: STREAMS });
    assert.equal(got.open, STREAMS + 2, 'and the board’s own two');
  });

  await step('over HTTP/1.1 the browser holds six connections to the proxy (measured, logged)', async () => {
    const h = await openBoard(context, H1, errors);
    assert.equal(await h.evaluate(() => window.__ballet.client.transport), 'http');
    assert.equal(await h.evaluate(() => performance.getEntriesByType('navigation')[0].nextHopProtocol), 'http/1.1');
    const got = await liveStreams(h, keys, 'HTTP/1.1');
    log(`HTTP/1.1: ${got.answered} of ${STREAMS} subscriptions answered, ${got.live} live; ${got.open} streaming POSTs open`);
    await h.close();
  });

  await step('the pages report no script errors', async () => {
    // The refused upgrades and the POSTs cut by the kill are logged by the browser itself.
    const real = errors.filter((e) => !/WebSocket connection to .* failed|Failed to load resource|net::ERR_/.test(e));
    assert.deepEqual(real, []);
  });
} catch (err) {
  console.error(err);
  if (errors.length) console.error(`page console errors:\n${errors.join('\n')}`);
  process.exitCode = 1;
} finally {
  await context.close();
  await rm(userDataDir, { recursive: true, force: true });
}
console.log(`board e2e over HTTP: ${tally.passed} passed, ${tally.failed} failed`);
