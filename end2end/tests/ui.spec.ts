import { test, expect, Page, WebSocketRoute } from '@playwright/test';
import { adminToken, api, ctrlCToPrompt, domContext, firstStartLink, rows, screenLines, scriptCallsMs, seekTo, typeLine, watchErrors } from '../helpers';

// One server, one session, several browsers: an operator signs in from the first-start
// link, runs a shell, shares it read-only, hands control over, loses the socket, floods it.
test.describe.configure({ mode: 'serial' });

/** What the session really received and printed, read from the server's replay. */
async function serverOutput(page: Page, sid: string): Promise<string> {
  return page.evaluate(async (sid) => {
    const token = sessionStorage.getItem('ptyhost.token')!;
    const b64url = btoa(token).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    const ws = new WebSocket(`ws://${location.host}/sessions/${sid}/attach`, ['pty-ws.v1', `bearer.${b64url}`]);
    return await new Promise<string>((resolve, reject) => {
      let text = '';
      let roleSeq = Infinity;
      ws.onerror = () => reject(new Error('replay socket failed'));
      ws.onmessage = (ev) => {
        const f = JSON.parse(ev.data);
        if (f.op === 'binding_hello') {
          ws.send(JSON.stringify({ op: 'pty.join_session', id: 'e2e-replay', ts: new Date().toISOString(), replay_from: 0, payload: { role: 'observer' } }));
        }
        if (f.op !== 'pty.session_frame') return;
        if (f.payload.kind === 'RoleAssigned') roleSeq = f.sequence;
        if (f.payload.kind === 'Output') text += atob(f.payload.data);
        if (f.payload.kind === 'Keyframe' && f.sequence > roleSeq) { ws.close(); resolve(text); }
      };
    });
  }, sid);
}

let ctl: Page;
let ctlErrors: string[];
let sid: string;
let observerLink: string;
let observer: Page;

test.beforeAll(async ({ browser }) => {
  ctl = await (await domContext(browser)).newPage();
  ctlErrors = watchErrors(ctl);
});

test('sign in from the first-start link, start a shell, take control and run a command', async () => {
  await ctl.goto(firstStartLink());
  await expect(ctl.getByRole('heading', { name: 'Sessions' })).toBeVisible();
  expect(ctl.url()).not.toContain('token');
  expect(await ctl.evaluate(() => sessionStorage.getItem('ptyhost.token'))).toBe(adminToken());
  await expect(ctl.locator('nav .who')).toContainText('pty:admin');

  await ctl.getByRole('button', { name: 'Start session' }).click();
  await expect(ctl).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
  sid = ctl.url().split('/sessions/')[1];
  await expect(rows(ctl)).toContainText(/[#$]/);
  await expect(ctl.locator('.role')).toHaveText('observer');

  await ctl.getByRole('button', { name: 'Take control' }).click();
  await expect(ctl.locator('.role')).toHaveText('controller');
  await typeLine(ctl, 'echo hello-$RANDOM');
  await expect(rows(ctl)).toContainText(/hello-\d+/);
  await ctl.screenshot({ path: test.info().outputPath('controller.png') });
});

test('the sessions page lists the session live and opens its terminal', async () => {
  await ctl.goto('/');
  const row = ctl.locator(`tr[data-session="${sid}"]`);
  await expect(row).toContainText('running');
  await expect(row).toContainText('nobody controls it, 0 watching');
  const started = Date.now();
  await row.getByRole('link').click();
  await expect(rows(ctl)).toContainText(/hello-\d+/);
  console.log(`time to first terminal paint, sessions -> terminal: ${Date.now() - started} ms`);
  await ctl.getByRole('button', { name: 'Take control' }).click();
  await expect(ctl.locator('.role')).toHaveText('controller');
});

test("the terminal page lists the session's A2A tasks live and shows a task's output", async () => {
  const send = (text: string) => ctl.evaluate(async ({ sid, text }) => {
    const r = await fetch('/message:send', {
      method: 'POST',
      headers: { 'Authorization': `Bearer ${sessionStorage.getItem('ptyhost.token')}`, 'A2A-Version': '1.0', 'Content-Type': 'application/json' },
      body: JSON.stringify({ message: { messageId: crypto.randomUUID(), role: 'ROLE_USER', contextId: sid, parts: [{ text }] }, configuration: { returnImmediately: true } }),
    });
    return (await r.json()).task.id as string;
  }, { sid, text });
  const ok = await send('echo task-$((6*7))');
  const failing = await send("sh -c 'exit 3'");
  const okRow = ctl.locator(`.tasks li[data-task="${ok}"]`);
  await expect(okRow).toHaveAttribute('data-state', 'completed');
  await expect(okRow).toContainText('echo task-$((6*7))');
  await expect(okRow).toContainText('exit 0');
  await expect(okRow.locator('.dur')).toHaveText(/\d+(\.\d)? m?s/);
  const failRow = ctl.locator(`.tasks li[data-task="${failing}"]`);
  await expect(failRow).toHaveAttribute('data-state', 'failed');
  await expect(failRow).toContainText('exit 3');
  await okRow.getByRole('button').click();
  await expect(ctl.getByLabel('Task output')).toHaveText('task-42\n');
  await expect(rows(ctl)).toContainText('task-42', { timeout: 1000 });
});

/** A call to the API as the signed-in page: the JSON answer. */
test('a finished session plays back: seeks paint the stored screen, and 8x plays in an eighth of the time', async () => {
  const rec = (await api(ctl, 'POST', '/sessions', { command: 'for i in 1 2 3 4 5 6 7 8; do echo line-$i; sleep 0.5; done' })).session_id;
  await expect.poll(async () => (await api(ctl, 'GET', `/sessions/${rec}`)).state, { timeout: 15_000 }).toBe('closed');
  const session = await api(ctl, 'GET', `/sessions/${rec}`);
  const all = (await api(ctl, 'GET', `/sessions/${rec}/frames?after=0`)).frames;
  // When each line appeared, from the stored frames.
  const printed: Record<string, number> = {};
  for (const f of all) {
    if (f.payload?.kind !== 'Output') continue;
    for (const m of atob(f.payload.data).matchAll(/line-(\d)/g)) printed[m[0]] ??= Date.parse(f.ts);
  }
  expect(Object.keys(printed)).toHaveLength(8);

  await ctl.goto(`/sessions/${rec}/play`);
  await expect(ctl.locator('.player .status')).toHaveText('ready');
  for (const [after, before] of [['line-3', 'line-4'], ['line-6', 'line-7']]) {
    const at = (printed[after] + printed[before]) / 2;
    await seekTo(ctl, at);
    // What the session had printed by then, and nothing after it.
    const expected = Object.entries(printed).filter(([, t]) => t <= at).map(([line]) => line);
    await expect.poll(async () => (await screenLines(ctl)).filter((l) => l.startsWith('line-'))).toEqual(expected);
  }
  await ctl.screenshot({ path: test.info().outputPath('player.png') });

  const start = Date.parse(session.created_at);
  const recorded = printed['line-8'] - start;
  await seekTo(ctl, start);
  await expect.poll(async () => (await screenLines(ctl)).filter((l) => l.startsWith('line-'))).toEqual([]);
  await ctl.locator('select[name=speed]').selectOption('8');
  const playing = Date.now();
  await ctl.getByRole('button', { name: 'Play' }).click();
  // Polled every frame: the locator's own retries would add their back-off to the figure.
  await ctl.waitForFunction(() => document.querySelector('.term-host .xterm-rows')?.textContent?.includes('line-8'),
    null, { polling: 'raf', timeout: recorded });
  const took = Date.now() - playing;
  console.log(`8x playback of ${recorded} ms recorded took ${took} ms (an eighth: ${Math.round(recorded / 8)} ms)`);
  expect(took).toBeLessThan(recorded / 4);
});

test("a task's marker on the timeline jumps to the task and plays its output", async () => {
  const sent = await api(ctl, 'POST', '/message:send', { message: { messageId: crypto.randomUUID(), role: 'ROLE_USER', contextId: sid, parts: [{ text: 'echo marker-$((40+2))' }] } });
  expect(sent.task.status.state).toBe('TASK_STATE_COMPLETED');
  // The output is in the store (written behind within a second).
  await expect.poll(async () => (await api(ctl, 'GET', `/sessions/${sid}/frames?at=${Date.now()}&keyframe=true`)).frames
    .some((f: any) => f.payload?.kind === 'Output' && atob(f.payload.data).includes('marker-42'))).toBe(true);
  await ctl.goto(`/sessions/${sid}/play`);
  await expect(ctl.locator('.player .status')).toHaveText('ready');
  await expect(ctl.locator('.player .live')).toBeVisible();
  const marker = ctl.locator(`.markers button[data-task="${sent.task.id}"]`);
  await expect(marker).toHaveAttribute('title', /echo marker-\$\(\(40\+2\)\) \(completed, exit 0\)/);
  // The session's own events: the operator's join, its taking control, the terminal's fit.
  await expect(ctl.locator('.events button[data-event="join"]').first()).toHaveAttribute('title', /joined as (observer|controller)$/);
  await expect(ctl.locator('.events button[data-event="role"]').first()).toHaveAttribute('title', /became controller$/);
  await expect(ctl.locator('.events button[data-event="resize"]').first()).toHaveAttribute('title', /^resized to \d+×\d+$/);
  await ctl.screenshot({ path: test.info().outputPath('player-markers.png'), fullPage: true });
  await marker.click();
  await expect(rows(ctl)).toContainText('marker-42');
  await ctl.locator('.player .live').click();
  await expect(ctl).toHaveURL(new RegExp(`/sessions/${sid}$`));
  await expect(rows(ctl)).toContainText('marker-42');
  await ctl.getByRole('button', { name: 'Take control' }).click();
  await expect(ctl.locator('.role')).toHaveText('controller');
});

test('a file dropped on the terminal uploads into the working directory, shows in ls and downloads from the panel', async () => {
  const content = `dropped at ${Date.now()}\n`;
  const dataTransfer = await ctl.evaluateHandle((content) => {
    const dt = new DataTransfer();
    dt.items.add(new File([content], 'dropped.txt', { type: 'text/plain' }));
    return dt;
  }, content);
  await ctl.dispatchEvent('.term-host', 'dragover', { dataTransfer });
  await ctl.dispatchEvent('.term-host', 'drop', { dataTransfer });
  const upload = ctl.locator('.uploads li', { hasText: 'dropped.txt' });
  await expect(upload).toHaveAttribute('data-state', 'done');
  await expect(upload.locator('progress')).toHaveAttribute('value', String(content.length));

  await typeLine(ctl, 'ls -l dropped.txt && cat dropped.txt');
  await expect(rows(ctl)).toContainText(content.trim());
  const entry = ctl.getByLabel('Working directory').getByRole('button', { name: 'dropped.txt', exact: true });
  await expect(entry).toBeVisible();
  const [download] = await Promise.all([ctl.waitForEvent('download'), entry.click()]);
  expect(download.suggestedFilename()).toBe('dropped.txt');
  const { readFile } = await import('node:fs/promises');
  expect(await readFile((await download.path())!, 'utf8')).toBe(content);
  await ctl.locator('.files').screenshot({ path: test.info().outputPath('files-panel.png') });
});

test('an observer link shows the same screen read-only and its keys never reach the PTY', async ({ browser }) => {
  await ctl.getByRole('button', { name: 'Share read-only link' }).click();
  observerLink = await ctl.locator('.share-url').inputValue();
  expect(observerLink).toMatch(new RegExp(`/sessions/${sid}#token=pth_`));
  await expect(ctl.locator('.links li')).toHaveCount(1);

  observer = await (await domContext(browser)).newPage();
  const observerErrors = watchErrors(observer);
  await observer.goto(observerLink);
  await expect(rows(observer)).toContainText(/hello-\d+/);
  await expect(observer.locator('nav .who')).toContainText('pty:observe');
  await expect(observer.locator('.role')).toHaveText('observer');
  await expect(observer.getByRole('button', { name: 'Take control' })).toBeDisabled();
  await expect(observer.locator('.reason')).toContainText('Read-only link');
  await expect(observer.getByRole('button', { name: 'Share read-only link' })).toHaveCount(0);
  // Downloads are not allowed to observers on this server (no --observer-downloads).
  await expect(observer.locator('.files')).toHaveCount(0);
  await expect(observer.locator('.members li')).toHaveCount(2);
  await expect(ctl.locator('.members li')).toHaveCount(2);

  await typeLine(observer, 'zzz-from-the-observer');
  await typeLine(ctl, 'echo after-the-observer');
  await expect(rows(observer)).toContainText('after-the-observer');
  const printed = await serverOutput(ctl, sid);
  expect(printed).toContain('after-the-observer');
  expect(printed).not.toContain('zzz-from-the-observer');
  await observer.screenshot({ path: test.info().outputPath('observer.png') });
  expect(observerErrors).toEqual([]);
});

test('control passes from one operator to another and back', async ({ browser }) => {
  const other = await (await domContext(browser)).newPage();
  await other.goto(`/sessions/${sid}#token=${adminToken()}`);
  await expect(other.locator('.role')).toHaveText('observer');
  await expect(other.getByRole('button', { name: 'Take control' })).toBeDisabled();
  await expect(other.locator('.reason')).toContainText('has control');

  await ctl.getByRole('button', { name: 'Release' }).click();
  await expect(ctl.locator('.role')).toHaveText('observer');
  await expect(other.getByRole('button', { name: 'Take control' })).toBeEnabled();
  await other.getByRole('button', { name: 'Take control' }).click();
  await expect(other.locator('.role')).toHaveText('controller');
  await typeLine(other, 'echo typed-by-the-other-operator');
  await expect(rows(ctl)).toContainText('typed-by-the-other-operator');
  await expect(rows(observer)).toContainText('typed-by-the-other-operator');

  await other.getByRole('button', { name: 'Release' }).click();
  await ctl.getByRole('button', { name: 'Take control' }).click();
  await expect(ctl.locator('.role')).toHaveText('controller');
  await other.close();
});

test('a dropped socket reconnects and resumes with the replayed output, screen kept', async ({ browser }) => {
  const page = await (await domContext(browser)).newPage();
  const sockets: WebSocketRoute[] = [];
  let holdReconnect: (() => void) | undefined;
  const held = new Promise<void>((r) => { holdReconnect = r; });
  await page.routeWebSocket(/\/attach$/, async (ws) => {
    sockets.push(ws);
    if (sockets.length === 2) await held; // stay disconnected while output happens
    ws.connectToServer();
  });
  await page.goto(`/sessions/${sid}#token=${adminToken()}`);
  await expect(page.locator('.status')).toHaveText('live');
  await expect(rows(page)).toContainText('typed-by-the-other-operator');

  await sockets[0].close({ code: 1006 });
  await expect(page.locator('.status')).not.toHaveText('live');
  await typeLine(ctl, 'echo while-you-were-away');
  await expect(rows(ctl)).toContainText('while-you-were-away');
  await expect(rows(page)).not.toContainText('while-you-were-away');
  holdReconnect!();

  await expect(page.locator('.status')).toHaveText('live');
  await expect(rows(page)).toContainText('while-you-were-away');
  await expect(rows(page)).toContainText('typed-by-the-other-operator');
  await page.screenshot({ path: test.info().outputPath('reconnected.png') });
  await page.close();
});

test('yes for ten seconds keeps the tab responsive, and Ctrl-C brings the prompt back (the time is printed)', async () => {
  await typeLine(ctl, 'yes');
  await ctl.waitForTimeout(10_000);
  const probe = Date.now();
  await ctl.evaluate(() => 1);
  const responsiveMs = Date.now() - probe;
  const { promptMs } = await ctrlCToPrompt(ctl);
  console.log(`yes flood: page answered in ${responsiveMs} ms during the flood; prompt ${Math.round(promptMs)} ms after Ctrl-C`);
  expect(responsiveMs).toBeLessThan(2000);
  await typeLine(ctl, 'echo still-alive');
  await expect(rows(ctl)).toContainText('still-alive');
  await ctl.screenshot({ path: test.info().outputPath('after-yes.png') });
});

test('a revoked observer link is refused with a clear message', async ({ browser }) => {
  await ctl.locator('.links li').getByRole('button', { name: 'Revoke' }).click();
  await expect(ctl.locator('.links li')).toHaveCount(0);
  const page = await (await domContext(browser)).newPage();
  await page.goto(observerLink);
  await expect(page.getByRole('alert')).toContainText('unknown, expired or revoked');
  await expect(page.getByLabel('Access token')).toBeVisible();
  expect(page.url()).not.toContain('token=');
  await page.close();
});

test('the sessions page works at 360 px and the card page shows the card', async ({ browser }) => {
  const page = await (await domContext(browser, { width: 360, height: 740 })).newPage();
  const errors = watchErrors(page);
  await page.goto(firstStartLink());
  await expect(page.locator(`tr[data-session="${sid}"]`)).toBeVisible();
  await page.screenshot({ path: test.info().outputPath('sessions-360.png'), fullPage: true });
  const scroll = await page.evaluate(() => document.documentElement.scrollWidth);
  expect(scroll).toBeLessThanOrEqual(360);
  await page.goto('/card');
  await expect(page.locator('pre.card')).toContainText('https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1');
  expect(errors).toEqual([]);
  expect(ctlErrors).toEqual([]);
});

test("a phone-sized terminal shows the key bar, and its Esc, Ctrl and Ctrl-C reach the PTY as the controller's", async ({ browser }) => {
  const phone = await (await domContext(browser, { width: 390, height: 800 })).newPage();
  const errors = watchErrors(phone);
  await phone.goto(`/sessions/${sid}#token=${adminToken()}`);
  await expect(rows(phone)).toContainText(/[#$]/);
  // The desktop operator hands control over.
  await ctl.getByRole('button', { name: 'Release' }).click();
  await expect(ctl.locator('.role')).toHaveText('observer');
  await phone.getByRole('button', { name: 'Take control' }).click();
  await expect(phone.locator('.role')).toHaveText('controller');
  const keys = phone.getByRole('toolbar', { name: 'Keys' });
  await expect(keys).toBeVisible();
  await phone.screenshot({ path: test.info().outputPath('phone-terminal.png') });

  // Esc reaches cat -v, which shows it as ^[; the bar's sticky Ctrl and a typed c end it.
  await typeLine(phone, 'cat -v');
  await keys.getByRole('button', { name: 'Escape' }).click();
  await phone.keyboard.press('Enter');
  await expect(rows(phone)).toContainText('^[');
  await keys.getByRole('button', { name: 'Ctrl', exact: true }).click();
  await expect(keys.getByRole('button', { name: 'Ctrl', exact: true })).toHaveAttribute('aria-pressed', 'true');
  await phone.keyboard.type('c');
  await expect(keys.getByRole('button', { name: 'Ctrl', exact: true })).toHaveAttribute('aria-pressed', 'false');
  await typeLine(phone, 'echo after-$((1+1))');
  await expect(rows(phone)).toContainText('after-2');

  // The bar's Ctrl-C interrupts a running command.
  await typeLine(phone, 'sleep 30; echo not-interrupted');
  await keys.getByRole('button', { name: 'Ctrl-C' }).click();
  await typeLine(phone, 'echo interrupted-$((2+2))');
  await expect(rows(phone)).toContainText('interrupted-4');
  const printed = await serverOutput(phone, sid);
  expect(printed).toContain('^[');
  // The command line is echoed; its output never came.
  expect(printed).not.toMatch(/(^|\n)not-interrupted/);
  expect(errors).toEqual([]);
  await phone.getByRole('button', { name: 'Release' }).click();
  await expect(phone.locator('.role')).toHaveText('observer');
});

test('search in the scrollback finds a string printed 2,000 lines earlier, and says when nothing matches', async () => {
  // The desktop operator takes control back from the phone.
  await expect(ctl.getByRole('button', { name: 'Take control' })).toBeEnabled();
  await ctl.getByRole('button', { name: 'Take control' }).click();
  await expect(ctl.locator('.role')).toHaveText('controller');
  await typeLine(ctl, 'echo needle-$((6*7)); seq 1 2000');
  await expect(rows(ctl)).toContainText('2000');
  await expect(rows(ctl)).not.toContainText('needle-42');
  const box = ctl.getByRole('searchbox', { name: 'Search the scrollback' });
  await box.fill('needle-42');
  await box.press('Enter');
  await expect(ctl.locator('.search .found')).toHaveAttribute('data-found', 'found');
  await expect(rows(ctl)).toContainText('needle-42');
  // The match is selected, and what is selected is copied.
  await ctl.context().grantPermissions(['clipboard-read', 'clipboard-write']);
  await expect.poll(() => ctl.evaluate(() => navigator.clipboard.readText())).toBe('needle-42');
  await box.fill('printed-nowhere');
  await box.press('Enter');
  await expect(ctl.locator('.search .found')).toHaveAttribute('data-found', 'not found');
});

test('the wall shows every running session live, stays responsive while one floods, and a tile opens its session', async ({ browser }) => {
  const made: string[] = [];
  for (let i = 1; i <= 5; i++) made.push((await api(ctl, 'POST', '/sessions', { command: `echo tile-$((${i}*11)); exec cat`, label: `tile ${i}` })).session_id);
  const flood = (await api(ctl, 'POST', '/sessions', { command: 'yes flood-tile', label: 'flood' })).session_id;
  const wall = await (await domContext(browser)).newPage();
  const errors = watchErrors(wall);
  await wall.goto(`/wall#token=${adminToken()}`);
  for (let i = 1; i <= 5; i++) {
    await expect(wall.locator(`.tile[data-session="${made[i - 1]}"] .tile-screen`)).toContainText(`tile-${i * 11}`);
  }
  const floodTile = wall.locator(`.tile[data-session="${flood}"]`);
  await expect(floodTile.locator('.tile-screen')).toContainText('flood-tile');
  await expect(floodTile).toContainText('yes flood-tile');
  // A script call answers at once while the flood goes on.
  const answers = await scriptCallsMs(wall);
  console.log(`wall with a flooding tile: script calls answered in ${answers[0]}..${answers[9]} ms (median ${answers[5]})`);
  expect(answers[5]).toBeLessThan(100);
  await wall.screenshot({ path: test.info().outputPath('wall.png') });
  // A session that ends leaves the wall; a click on a tile opens its terminal.
  await api(ctl, 'DELETE', `/sessions/${flood}`);
  await expect(floodTile).toHaveCount(0, { timeout: 10_000 });
  await wall.locator(`.tile[data-session="${made[0]}"]`).click();
  await expect(wall).toHaveURL(new RegExp(`/sessions/${made[0]}$`));
  await expect(rows(wall)).toContainText('tile-11');
  expect(errors).toEqual([]);
});
