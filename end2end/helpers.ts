import { Browser, BrowserContext, Page, expect } from '@playwright/test';

// What the UI tests and the UI benchmarks share: signing in, reading the screen, typing,
// calling the API as the signed-in page.

export const firstStartLink = () => process.env.PTYHOST_FIRST_START_LINK!;
export const adminToken = () => firstStartLink().split('#token=')[1];

/** Signs the page in from the first-start link, as an operator does. */
export async function signIn(page: Page) {
  await page.goto(firstStartLink());
  await expect(page.locator('nav .who')).toContainText('pty:admin');
}

/** A browser context whose terminals use xterm.js's DOM renderer, so their text is readable. */
export async function domContext(browser: Browser, viewport = { width: 1280, height: 800 }): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport });
  await context.addInitScript(() => localStorage.setItem('ptyhost.renderer', 'dom'));
  return context;
}

/** Console and page errors of a page, to assert there are none. */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  return errors;
}

export const rows = (page: Page) => page.locator('.term-host .xterm-rows');

export async function screenLines(page: Page): Promise<string[]> {
  const text = (await rows(page).innerText()).replace(/\u00a0/g, ' ');
  return text.split('\n').map((l) => l.trimEnd()).filter((l) => l.length > 0);
}

export async function typeLine(page: Page, line: string) {
  await page.locator('.term-host').click();
  await page.keyboard.type(line);
  await page.keyboard.press('Enter');
}

export async function api(page: Page, method: string, path: string, body?: unknown): Promise<any> {
  return page.evaluate(async ({ method, path, body }) => {
    const r = await fetch(path, {
      method,
      headers: { 'Authorization': `Bearer ${sessionStorage.getItem('ptyhost.token')}`, 'A2A-Version': '1.0', 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return r.json();
  }, { method, path, body });
}

/** Sets the player's timeline to unix ms `at`, as a drag of the slider ends. */
export async function seekTo(page: Page, at: number) {
  await page.locator('input[name=timeline]').evaluate((el: HTMLInputElement, at) => {
    el.value = String(at);
    el.dispatchEvent(new Event('change', { bubbles: true }));
  }, at);
}

/** How long ten script calls took to answer (ms, a fifth of a second apart), sorted. */
export async function scriptCallsMs(page: Page): Promise<number[]> {
  const answers: number[] = [];
  for (let i = 0; i < 10; i++) {
    const t = Date.now();
    await page.evaluate(() => 1);
    answers.push(Date.now() - t);
    await page.waitForTimeout(200);
  }
  return answers.sort((a, b) => a - b);
}

/**
 * Makes every WebSocket of the context's pages note when each message arrived, how big it
 * was, and whether it brings the prompt back: output with the shell integration's
 * end-of-prompt mark (OSC 133;B), or a keyframe (a catch-up screen) that shows one. `ctrlCToPrompt` splits
 * its figure with it.
 */
export async function traceSockets(context: BrowserContext) {
  await context.addInitScript(() => {
    const trace: { at: number; bytes: number; prompt: boolean }[] = [];
    (window as any).__socketTrace = trace;
    const Native = window.WebSocket;
    (window as any).WebSocket = class extends Native {
      constructor(url: string | URL, protocols?: string | string[]) {
        super(url, protocols);
        this.addEventListener('message', (ev: MessageEvent) => {
          if (typeof ev.data !== 'string') return;
          const at = performance.now();
          const f = JSON.parse(ev.data);
          const kind = f.payload?.kind;
          const prompt = (kind === 'Keyframe' && /[#$] /.test(atob(f.payload.snapshot)))
            || (kind === 'Output' && atob(f.payload.data).includes('\u001b]133;B'));
          trace.push({ at, bytes: ev.data.length, prompt });
        });
      }
    };
  });
}

/**
 * Presses Ctrl-C and measures, in the page, how long until the terminal's last row is a
 * prompt again (checked every animation frame, when xterm.js paints; no test-runner
 * polling in the figure). With `traceSockets`, also when a message with the prompt arrived
 * and how many bytes came in between.
 */
export async function ctrlCToPrompt(page: Page): Promise<{ promptMs: number; arrivedMs?: number; bytesBefore?: number }> {
  await page.evaluate(() => {
    const w = window as any;
    const lastRow = () => {
      const rows = document.querySelector('.term-host .xterm-rows');
      const lines = rows ? [...rows.children].map((d) => (d.textContent ?? '').replace(/\u00a0/g, ' ').trimEnd()).filter((l) => l.length > 0) : [];
      return lines.at(-1) ?? '';
    };
    w.__ctrlC = new Promise((resolve) => {
      const pressedCtrlC = (e: KeyboardEvent) => {
        if (!(e.ctrlKey && e.key.toLowerCase() === 'c')) return;
        window.removeEventListener('keydown', pressedCtrlC, { capture: true });
        const pressed = performance.now();
        const traced = (w.__socketTrace ?? []).length;
        const check = () => {
          if (!/[#$]$/.test(lastRow())) return requestAnimationFrame(check);
          const after = (w.__socketTrace ?? []).slice(traced);
          const arrived = after.findIndex((m: any) => m.prompt);
          resolve({
            promptMs: performance.now() - pressed,
            arrivedMs: arrived < 0 ? undefined : after[arrived].at - pressed,
            bytesBefore: arrived < 0 ? undefined : after.slice(0, arrived).reduce((n: number, m: any) => n + m.bytes, 0),
          });
        };
        requestAnimationFrame(check);
      };
      window.addEventListener('keydown', pressedCtrlC, { capture: true });
    });
  });
  await page.keyboard.press('Control+C');
  return page.evaluate(() => (window as any).__ctrlC);
}
