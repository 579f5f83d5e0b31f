import { test, expect, Page } from '@playwright/test';
import { adminToken, api, ctrlCToPrompt, domContext, rows, scriptCallsMs, signIn, traceSockets, typeLine } from '../helpers';

// The UI's figures, each beside a baseline measured in the same run (scripts/bench-ui.sh):
// Ctrl-C after a flood, the wall's main-thread time, and a seek in a long recording.
test.describe.configure({ mode: 'serial' });

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const round = (xs: number[]) => xs.map((x) => Math.round(x));

/** The page's main-thread busy time per second of wall time, over `ms` (Chrome's TaskDuration). */
async function busyPerSecond(page: Page, ms: number): Promise<number> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const taskSecs = async () => (await cdp.send('Performance.getMetrics')).metrics.find((m) => m.name === 'TaskDuration')!.value;
  const before = await taskSecs();
  const started = Date.now();
  await page.waitForTimeout(ms);
  const busy = (await taskSecs()) - before;
  return (busy * 1000) / ((Date.now() - started) / 1000);
}

test('Ctrl-C after 10 s of yes, five runs, beside Ctrl-C of an idle sleep', async ({ browser }) => {
  test.setTimeout(180_000);
  const context = await domContext(browser);
  await traceSockets(context);
  const page = await context.newPage();
  await signIn(page);
  await page.getByRole('button', { name: 'Start session' }).click();
  await expect(rows(page)).toContainText(/[#$]/);
  await page.getByRole('button', { name: 'Take control' }).click();
  await expect(page.locator('.role')).toHaveText('controller');

  const idle: number[] = [];
  for (let run = 0; run < 5; run++) {
    await typeLine(page, 'sleep 30');
    await page.waitForTimeout(500);
    idle.push((await ctrlCToPrompt(page)).promptMs);
  }
  const flood: { promptMs: number; arrivedMs?: number; bytesBefore?: number }[] = [];
  for (let run = 0; run < 5; run++) {
    await typeLine(page, 'yes');
    await page.waitForTimeout(10_000);
    flood.push(await ctrlCToPrompt(page));
  }
  const prompt = flood.map((f) => f.promptMs);
  console.log(`ctrl-c after an idle sleep: prompt in ${round(idle).join(', ')} ms (median ${Math.round(median(idle))})`);
  console.log(`ctrl-c after 10 s of yes: prompt in ${round(prompt).join(', ')} ms (median ${Math.round(median(prompt))}, ${(median(prompt) / median(idle)).toFixed(1)}x the idle case)`);
  console.log(`  the prompt's frame arrived after ${flood.map((f) => f.arrivedMs === undefined ? '?' : Math.round(f.arrivedMs)).join(', ')} ms, behind ${flood.map((f) => f.bytesBefore === undefined ? '?' : Math.round(f.bytesBefore / 1024)).join(', ')} KiB of messages`);
  await context.close();
});

test('the wall with 24 tiles: main-thread busy time per second, all idle and with one flooding', async ({ browser }) => {
  test.setTimeout(180_000);
  const page = await (await domContext(browser)).newPage();
  await signIn(page);
  const made: string[] = [];
  for (let i = 0; i < 23; i++) made.push((await api(page, 'POST', '/sessions', { command: `echo tile-${i}; exec cat`, label: `tile ${i}` })).session_id);
  await page.goto(`/wall#token=${adminToken()}`);
  for (let i = 0; i < 23; i++) await expect(page.locator(`.tile[data-session="${made[i]}"] .tile-screen`)).toContainText(`tile-${i}`);
  const idleBusy = await busyPerSecond(page, 5000);
  const idleCall = median(await scriptCallsMs(page));

  const floodSid = (await api(page, 'POST', '/sessions', { command: 'yes flood-tile', label: 'flood' })).session_id;
  await expect(page.locator(`.tile[data-session="${floodSid}"] .tile-screen`)).toContainText('flood-tile');
  const tiles = await page.locator('.tile').count();
  const floodBusy = await busyPerSecond(page, 5000);
  const floodCall = median(await scriptCallsMs(page));
  console.log(`wall of ${tiles} tiles: main thread busy ${Math.round(idleBusy)} ms/s all idle, ${Math.round(floodBusy)} ms/s with one flooding (${(floodBusy / Math.max(idleBusy, 1)).toFixed(1)}x)`);
  console.log(`  a script call answered in ${idleCall} ms (median) all idle, ${floodCall} ms with one flooding`);
  await page.screenshot({ path: test.info().outputPath('wall-24.png') });
  await api(page, 'DELETE', `/sessions/${floodSid}`);
  for (const sid of made) await api(page, 'DELETE', `/sessions/${sid}`);
});

test('a seek in a recording of 1,000,000 frames: click to painted screen, middle beside start', async ({ browser }) => {
  const sid = process.env.PTYHOST_BENCH_RECORDING;
  test.skip(!sid, 'scripts/bench-ui.sh prepares the recording');
  const page = await (await domContext(browser)).newPage();
  await signIn(page);
  const session = await api(page, 'GET', `/sessions/${sid}`);
  const start = Date.parse(session.created_at);
  const frames = session.current_sequence as number;
  await page.goto(`/sessions/${sid}/play`);
  await expect(page.locator('.player .status')).toHaveText('ready');
  // Frame N is "line N", N ms after the start: a seek to a time shows that line last.
  // Set the timeline as a drag ends, and wait for the screen to show that line.
  const seek = (line: number) => page.evaluate(async ({ at, want }) => {
    const timeline = document.querySelector('input[name=timeline]') as HTMLInputElement;
    const rows = document.querySelector('.term-host .xterm-rows')!;
    const pressed = performance.now();
    timeline.value = String(at);
    timeline.dispatchEvent(new Event('change', { bubbles: true }));
    while (![...rows.children].some((d) => (d.textContent ?? '').replace(/\u00a0/g, ' ').trim() === want)) {
      await new Promise((r) => requestAnimationFrame(r));
    }
    return performance.now() - pressed;
  }, { at: start + line, want: `line ${line}` });
  const atStart: number[] = [];
  const inMiddle: number[] = [];
  for (let run = 0; run < 5; run++) {
    atStart.push(await seek(150 + run));
    inMiddle.push(await seek(frames / 2 + 50 + run));
  }
  console.log(`seek in ${frames} frames, click to painted screen: middle ${round(inMiddle).join(', ')} ms (median ${Math.round(median(inMiddle))}), start ${round(atStart).join(', ')} ms (median ${Math.round(median(atStart))}, ratio ${(median(inMiddle) / median(atStart)).toFixed(2)})`);
  await page.screenshot({ path: test.info().outputPath('player-1m.png') });
});
