// End-to-end test of the board in headless Chromium, run by TestBrowserBoard
// (web/e2e_test.go) against a real `ballet-gateway dev` behind a test server.
//
// Environment: BOARD_URL (the test server), CHROMIUM (the browser),
// ARTIFACTS (where board.png goes). POST $BOARD_URL/__test/proxy/down|up
// cuts and restores /rpc.

import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import path from 'node:path';

import {
  BASE, PROJECT, WAIT, answered, card, createItem, inColumn, launch, log, matchesServer, recordAnswers, rest, snapshot,
  status, step, tally,
} from './common.mjs';

const ARTIFACTS = process.env.ARTIFACTS ?? path.resolve('test-artifacts');
const REPLAY_LIMIT = Number(process.env.REPLAY_LIMIT ?? 1000);
// The planner's slow answer to "tell a story" (see e2e_test.go).
const STORY = process.env.STORY ?? '';
// The gateway's BALLET_MAX_PLANNER_MESSAGE_BYTES and BALLET_MAX_TITLE_CHARS (see e2e_test.go).
const PLANNER_MESSAGE_BYTES = Number(process.env.PLANNER_MESSAGE_BYTES ?? 32768);
const TITLE_CHARS = Number(process.env.TITLE_CHARS ?? 200);

const control = async (op) => {
  const res = await fetch(`${BASE}/__test/proxy/${op}`, { method: 'POST' });
  assert.equal(res.status, 200, `proxy ${op}`);
};

// ---- the run ----

for (const f of ['board.png', 'failure-a.png', 'failure-b.png', 'failure-c.png']) await rm(path.join(ARTIFACTS, f), { force: true });
const { context, userDataDir } = await launch();
/** @type {string[]} */
const consoleErrors = [];
const pages = [];
let a;
let b;
try {
  a = await context.newPage();
  b = await context.newPage();
  for (const [name, page] of [['A', a], ['B', b]]) {
    pages.push(page);
    page.on('pageerror', (err) => consoleErrors.push(`${name}: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() === 'error') consoleErrors.push(`${name}: ${msg.text()}`);
    });
  }

  await step('both pages open the board live', async () => {
    // Page B speaks JSON and gets tokens that expire after 20 s: it must refresh them on the
    // open connection, at 80 % of their life (4 s before expiry, room for a loaded machine;
    // a 3 s token left 0.6 s, which a loaded machine missed).
    await Promise.all([a.goto(`${BASE}/?project=${PROJECT}`), b.goto(`${BASE}/?project=${PROJECT}&codec=json&ttl=20s`)]);
    for (const page of [a, b]) {
      await status(page, 'connected');
      await inColumn(page, 'DEMO-1', 'done');
      await inColumn(page, 'DEMO-2', 'in_progress');
      await inColumn(page, 'DEMO-3', 'ready');
      await card(page, 'DEMO-3').locator('.badge[data-blocker="DEMO-2"]').waitFor({ timeout: WAIT });
      await matchesServer(page);
    }
  });

  let key = '';
  await step('an item created over REST appears live on both pages', async () => {
    const it = await createItem('Created through the REST API');
    key = it.key;
    await Promise.all([inColumn(a, key, 'backlog'), inColumn(b, key, 'backlog')]);
  });

  await step('a move button on one page moves the card on both (PATCH with If-Match)', async () => {
    await a.getByRole('button', { name: `Move ${key} to Ready` }).click();
    await Promise.all([inColumn(a, key, 'ready'), inColumn(b, key, 'ready')]);
    const it = await rest('GET', `/api/v1/items/${key}`);
    assert.equal(it.state, 'ready');
    assert.equal(it.version, 2);
  });

  await step('dragging a card to another column moves it', async () => {
    await card(b, key).dragTo(b.locator('#columns .column[data-state="in_progress"]'));
    await Promise.all([inColumn(a, key, 'in_progress'), inColumn(b, key, 'in_progress')]);
  });

  await step('a change made elsewhere moves the card on both pages', async () => {
    await rest('PATCH', `/api/v1/items/${key}`, { state: 'done' }, { 'If-Match': '"3"' });
    await Promise.all([inColumn(a, key, 'done'), inColumn(b, key, 'done')]);
  });

  await step('dependencies appear as blocked-by badges', async () => {
    const blocker = await createItem('Blocks the REST item', 'ready');
    await rest('PUT', `/api/v1/items/DEMO-4/dependencies/${blocker.key}`);
    for (const page of [a, b]) {
      const badge = card(page, 'DEMO-4').locator(`.badge-open[data-blocker="${blocker.key}"]`);
      await badge.waitFor({ timeout: WAIT });
      await card(page, 'DEMO-4').locator('.blocked-flag').waitFor({ state: 'visible', timeout: WAIT });
    }
    // Done blockers stop blocking.
    await rest('PATCH', `/api/v1/items/${blocker.key}`, { state: 'done' });
    await card(b, 'DEMO-4').locator(`.badge-resolved[data-blocker="${blocker.key}"]`).waitFor({ timeout: WAIT });
    // Remove it from page A.
    await a.getByRole('button', { name: `Remove: ${blocker.key} blocks DEMO-4` }).click();
    await card(b, 'DEMO-4').locator('.badge').waitFor({ state: 'detached', timeout: WAIT });
  });

  await step('the create form adds an item', async () => {
    await a.getByLabel('Title of the new item').fill('Typed into the form');
    await a.getByLabel('Column').selectOption('ready');
    await a.getByRole('button', { name: 'Add item' }).click();
    for (const page of [a, b]) {
      await page.locator('#columns .column[data-state="ready"] .card', { hasText: 'Typed into the form' }).waitFor({ timeout: WAIT });
    }
  });

  await step('the create form shows the server’s problem for a title beyond BALLET_MAX_TITLE_CHARS', async () => {
    const title = a.getByLabel('Title of the new item');
    const long = 'x'.repeat(TITLE_CHARS + 1); // within the field's default maxlength
    await title.fill(long);
    await a.getByRole('button', { name: 'Add item' }).click();
    await a.locator('.toast', { hasText: `Not created: title: longer than ${TITLE_CHARS} characters` }).waitFor({ timeout: WAIT });
    assert.equal(await title.inputValue(), long, 'the title is kept to be shortened');
    assert.equal(await title.evaluate((el) => /** @type {HTMLInputElement} */ (el).maxLength), TITLE_CHARS, 'the problem’s max bounds the field');
    await title.fill('');
  });

  await step('the planner box counts bytes against planner_message_bytes and sends nothing longer', async () => {
    const box = a.getByLabel('Message to the planner');
    const count = a.locator('#planner-count');
    const sent = await a.locator('#planner .msg.human').count();
    const over = 'é'.repeat(PLANNER_MESSAGE_BYTES / 2 + 1); // fewer characters than the limit, more bytes
    await box.fill(over);
    await a.locator('#planner-count.over', { hasText: `${PLANNER_MESSAGE_BYTES + 2} / ${PLANNER_MESSAGE_BYTES} bytes` }).waitFor({ timeout: WAIT });
    assert.equal(await box.evaluate((el) => /** @type {HTMLTextAreaElement} */ (el).validity.valid), false);
    await a.locator('#planner').getByRole('button', { name: 'Send' }).click();
    await box.press('Enter');
    assert.equal(await a.locator('#planner .msg.human').count(), sent, 'a message beyond the limit was sent');
    assert.equal(await box.inputValue(), over);
    await box.fill('é'.repeat(PLANNER_MESSAGE_BYTES / 2));
    await a.locator('#planner-count:not(.over)', { hasText: `${PLANNER_MESSAGE_BYTES} / ${PLANNER_MESSAGE_BYTES} bytes` }).waitFor({ timeout: WAIT });
    assert.equal(await box.evaluate((el) => /** @type {HTMLTextAreaElement} */ (el).validity.valid), true);
    await box.fill('');
    assert.equal(await count.textContent(), '');
  });

  await step('the planner streams its answer and its tool creates an item on both boards', async () => {
    // Record the live bubble's text as it grows, and tool calls as they appear.
    await a.evaluate(() => {
      const seen = { texts: [], tools: [], results: [] };
      window.__seen = seen;
      new MutationObserver(() => {
        const live = document.querySelector('#planner .msg.assistant.live');
        if (!live) return;
        const t = live.querySelector('.live-text')?.textContent ?? '';
        if (t && seen.texts[seen.texts.length - 1] !== t) seen.texts.push(t);
        seen.tools = [...live.querySelectorAll('.tool-call .tool-name')].map((e) => e.textContent);
        seen.results = [...live.querySelectorAll('.tool-result pre')].map((e) => e.textContent);
      }).observe(document.querySelector('#planner'), { subtree: true, childList: true, characterData: true });
    });
    await a.getByLabel('Message to the planner').fill('create Planner made this');
    await a.locator('#planner').getByRole('button', { name: 'Send' }).click();
    // done: the turn is over and the stored transcript replaces the live bubble.
    await a.locator('#planner .msg.assistant:not(.live)', { hasText: 'Done. The tracker answered' }).waitFor({ timeout: WAIT });
    await a.locator('#planner .msg.tool .tool-result').waitFor({ timeout: WAIT });
    await a.locator('#planner[data-running="false"]').waitFor({ timeout: WAIT });
    const seen = await a.evaluate(() => window.__seen);
    assert.ok(seen.texts.length >= 2, `the answer arrived in pieces: ${JSON.stringify(seen.texts)}`);
    assert.ok(seen.texts.some((t) => t.startsWith('Creating')), JSON.stringify(seen.texts));
    assert.deepEqual(seen.tools, ['create_item']);
    assert.equal(seen.results.length, 1);
    for (const page of [a, b]) {
      await page.locator('#columns .card', { hasText: 'Planner made this' }).waitFor({ timeout: WAIT });
    }
    // Page B follows the conversation started on page A.
    await b.locator('#planner .msg.human', { hasText: 'create Planner made this' }).waitFor({ timeout: WAIT });
    await b.locator('#planner .msg.assistant', { hasText: 'Done. The tracker answered' }).waitFor({ timeout: WAIT });
    await b.locator('#planner[data-running="false"]').waitFor({ timeout: WAIT });
    // A second turn, listing the items, streams on both pages now that B watches too.
    await b.getByLabel('Message to the planner').fill('list');
    await b.locator('#planner').getByRole('button', { name: 'Send' }).click();
    for (const page of [a, b]) {
      await page.locator('#planner .msg.assistant:not(.live)', { hasText: 'Here is what the tracker has' }).waitFor({ timeout: WAIT });
      await page.locator('#planner .msg.tool', { hasText: 'list_items answered' }).filter({ hasText: 'Planner made this' }).waitFor({ timeout: WAIT });
    }
  });

  await step('the chat survives a dropped connection mid-answer, and a page opened mid-answer shows it from the start', async () => {
    assert.ok(STORY.length > 200, 'STORY is set');
    await a.evaluate(recordAnswers);
    await b.evaluate(recordAnswers);
    const connects = await a.evaluate(() => window.__ballet.stats.connects);
    await a.getByLabel('Message to the planner').fill('tell a story');
    await a.locator('#planner').getByRole('button', { name: 'Send' }).click();
    // Mid-answer: the connection drops, and a third page opens.
    await a.waitForFunction(() => (document.querySelector('#planner .msg.assistant.live .live-text')?.textContent ?? '').length >= 60,
      null, { timeout: WAIT });
    await a.evaluate(() => window.__ballet.dropConnection());
    const c = await context.newPage();
    pages.push(c);
    c.on('pageerror', (err) => consoleErrors.push(`C: ${err.message}`));
    c.on('console', (msg) => {
      if (msg.type() === 'error') consoleErrors.push(`C: ${msg.text()}`);
    });
    await c.addInitScript(recordAnswers);
    await c.goto(`${BASE}/?project=${PROJECT}`);
    await c.locator('#planner[data-running="true"] .msg.assistant.live').waitFor({ timeout: WAIT });
    for (const [name, page] of [['A', a], ['B', b], ['C', c]]) {
      const rec = await answered(page);
      assert.equal(rec.answers.at(-1), STORY, `page ${name} showed the answer whole, once`);
      assert.ok(rec.first && STORY.startsWith(rec.first), `page ${name} showed the answer from its start: ${rec.first}`);
    }
    const c1 = await c.evaluate(() => window.__answers.first);
    assert.ok(c1.length < STORY.length, 'page C opened before the answer ended');
    await status(a, 'connected');
    assert.ok(await a.evaluate(() => window.__ballet.stats.connects) > connects, 'page A reconnected');
    await c.locator('#planner .msg.assistant:not(.live)', { hasText: 'The end.' }).waitFor({ timeout: WAIT });
    assert.equal(await c.locator('#planner .msg.human', { hasText: 'tell a story' }).count(), 1);
    pages.pop();
    await c.close();
  });

  await step('presence: the board shows who else has it open, and who has which item open, live', async () => {
    for (const page of [a, b]) {
      await page.locator('#present li[data-subject="dev-user"]').waitFor({ timeout: WAIT });
    }
    const v = await context.newPage();
    pages.push(v);
    v.on('pageerror', (err) => consoleErrors.push(`V: ${err.message}`));
    await v.goto(`${BASE}/?project=${PROJECT}&user=dev-viewer`);
    await status(v, 'connected');
    for (const page of [a, b, v]) {
      await page.locator('#present li[data-subject="dev-viewer"]').waitFor({ timeout: WAIT });
      await page.locator('#present li[data-subject="dev-user"]').waitFor({ timeout: WAIT });
      // Two pages of dev-user count once.
      assert.equal(await page.locator('#present li').count(), 2);
    }
    assert.equal(await v.locator('#present li.present-me').textContent(), 'dev-viewer');

    // Who has an item open: the viewer opens one; every dev-user board shows it on the card.
    const key = (await snapshot()).items[0].key;
    const viewer = (page, subject) => card(page, key).locator(`.viewers li[data-subject="${subject}"]`);
    await card(v, key).locator('[data-action="open"]').click();
    await v.locator('#item-view[open]').waitFor({ timeout: WAIT });
    assert.equal(await v.locator('#item-view-key').textContent(), key);
    await v.locator('#item-present li.present-me[data-subject="dev-viewer"]').waitFor({ timeout: WAIT });
    for (const page of [a, b]) await viewer(page, 'dev-viewer').waitFor({ timeout: WAIT });
    assert.equal(await viewer(v, 'dev-viewer').count(), 0, 'a board does not show its own user on a card');
    // dev-user opens it too: the viewer's item view and board show them; A shows no dev-user.
    await card(a, key).locator('[data-action="open"]').click();
    await a.locator('#item-present li[data-subject="dev-viewer"]').waitFor({ timeout: WAIT });
    await v.locator('#item-present li[data-subject="dev-user"]').waitFor({ timeout: WAIT });
    await viewer(v, 'dev-user').waitFor({ timeout: WAIT });
    assert.equal(await viewer(a, 'dev-user').count(), 0);
    assert.equal(await card(b, key).locator('.viewers li').count(), 1, 'page B lists the viewer only (dev-user is B\'s own user)');
    // The viewer closes the item: it leaves every card and A's item view.
    await v.locator('#item-view-close').click();
    await v.locator('#item-view[open]').waitFor({ state: 'detached', timeout: WAIT });
    for (const page of [a, b]) await viewer(page, 'dev-viewer').waitFor({ state: 'detached', timeout: WAIT });
    await a.locator('#item-present li[data-subject="dev-viewer"]').waitFor({ state: 'detached', timeout: WAIT });
    await a.keyboard.press('Escape');
    await a.locator('#item-view[open]').waitFor({ state: 'detached', timeout: WAIT });
    await viewer(v, 'dev-user').waitFor({ state: 'detached', timeout: WAIT });

    pages.pop();
    await v.close();
    await a.locator('#present li[data-subject="dev-viewer"]').waitFor({ state: 'detached', timeout: WAIT });
    assert.equal(await a.locator('#present li').count(), 1);
  });

  await step('a dropped connection recovers without losing an event', async () => {
    await a.evaluate(() => window.__ballet.dropConnection());
    const it = await createItem('Created while page A reconnects');
    await status(a, 'connected');
    await inColumn(a, it.key, 'backlog');
    await matchesServer(a);
  });

  await step('an outage of /rpc on both pages loses nothing', async () => {
    await control('down');
    await Promise.all([status(a, 'reconnecting'), status(b, 'reconnecting')]);
    const made = [];
    for (let i = 1; i <= 3; i++) made.push(await createItem(`Created during the outage ${i}`));
    await rest('PATCH', `/api/v1/items/${made[0].key}`, { state: 'in_progress' });
    await rest('PUT', `/api/v1/items/${made[1].key}/dependencies/${made[0].key}`);
    await rest('PATCH', `/api/v1/items/${made[2].key}`, { title: 'Renamed during the outage' });
    // Page A is behind: its move is refused (412) and it shows the item as it is.
    await rest('PATCH', `/api/v1/items/${key}`, { state: 'ready' });
    await a.getByRole('button', { name: `Move ${key} to In progress` }).click();
    await a.locator('.toast', { hasText: `${key} was changed meanwhile` }).waitFor({ timeout: WAIT });
    await inColumn(a, key, 'ready');
    await control('up');
    await Promise.all([status(a, 'connected'), status(b, 'connected')]);
    for (const page of [a, b]) {
      await inColumn(page, made[0].key, 'in_progress');
      await card(page, made[1].key).locator(`.badge[data-blocker="${made[0].key}"]`).waitFor({ timeout: WAIT });
      await card(page, made[2].key).locator('.title', { hasText: 'Renamed during the outage' }).waitFor({ timeout: WAIT });
      await matchesServer(page);
    }
  });

  await step('an outage longer than the replay limit resyncs from a fresh snapshot', async () => {
    await control('down');
    await Promise.all([status(a, 'reconnecting'), status(b, 'reconnecting')]);
    const edits = REPLAY_LIMIT + 5;
    for (let i = 1; i <= edits; i++) await rest('PATCH', '/api/v1/items/DEMO-4', { title: `Keyboard shortcuts, edit ${i}` });
    // Counted rather than looked for: the toast that says so lasts 4 s, which one page's
    // checks may outlast on a loaded machine before the other page's are made.
    const before = await Promise.all([a, b].map((page) => page.evaluate(() => window.__ballet.stats.resyncs)));
    await control('up');
    await Promise.all([a, b].map((page, i) =>
      page.waitForFunction((n) => window.__ballet.stats.resyncs > n, before[i], { timeout: WAIT })));
    for (const page of [a, b]) {
      await card(page, 'DEMO-4').locator('.title', { hasText: `edit ${edits}` }).waitFor({ timeout: WAIT });
      await matchesServer(page);
    }
  });

  await step('page B refreshed its short-lived token on the open connection', async () => {
    await b.waitForFunction(() => window.__ballet.stats.refreshes > 0, null, { timeout: WAIT });
    const stats = await b.evaluate(() => window.__ballet.stats);
    assert.ok(!stats.states.some((s) => /4001/.test(s)), `closed for an expired token: ${stats.states.join(' | ')}`);
  });

  await step('the page reports no script errors', async () => {
    // Failed WebSocket handshakes during the outage are logged by the browser itself.
    const real = consoleErrors.filter((e) => !/WebSocket connection to .* failed|Failed to load resource/.test(e));
    assert.deepEqual(real, []);
  });

  await a.bringToFront();
  await a.evaluate(() => document.querySelectorAll('.toast').forEach((t) => t.remove()));
  await a.screenshot({ path: path.join(ARTIFACTS, 'board.png'), fullPage: false });
  log(`screenshot: ${path.join(ARTIFACTS, 'board.png')}`);
} catch (err) {
  console.error(err);
  for (const [i, page] of pages.entries()) {
    await page.screenshot({ path: path.join(ARTIFACTS, `failure-${'abc'[i] ?? i}.png`) }).catch(() => {});
  }
  if (consoleErrors.length) console.error(`page console errors:\n${consoleErrors.join('\n')}`);
  process.exitCode = 1;
} finally {
  await context.close();
  await rm(userDataDir, { recursive: true, force: true });
}
console.log(`board e2e: ${tally.passed} passed, ${tally.failed} failed`);
