import { test, expect, Browser, Page } from '@playwright/test';
import AxeBuilder from '@axe-core/playwright';
import { api, domContext, firstStartLink, rows } from '../helpers';

// Every page on a phone and a desktop, read by axe-core, driven by keyboard alone and in
// the light theme: the operator UI as someone other than its authors meets it.
test.describe.configure({ mode: 'serial' });

const PHONE = { width: 390, height: 844 };
const NARROW = { width: 360, height: 740 };
const DESKTOP = { width: 1280, height: 800 };

let admin: Page;
/** A 120×30 session that prints END at its last column, and a shell ptyhost started. */
let wide: string;
let shell: string;
let observerLink: string;

test.beforeAll(async ({ browser }) => {
  admin = await (await domContext(browser)).newPage();
  await admin.goto(firstStartLink());
  await expect(admin.getByRole('heading', { name: 'Sessions' })).toBeVisible();
  const printed = await api(admin, 'POST', '/sessions', {
    command: "printf '%117sEND' ''; sleep 3600", cols: 120, rows: 30, label: 'scr-wide-screen',
  });
  wide = printed.session_id;
  shell = (await api(admin, 'POST', '/sessions', { label: 'scr-plain-shell' })).session_id;
  observerLink = (await api(admin, 'POST', `/sessions/${wide}/share`, { ttl_secs: 3600 })).url;
  // A finished session, for the player.
  const done = await api(admin, 'POST', '/sessions', { command: 'echo played', label: 'scr-finished' });
  await expect.poll(async () => (await api(admin, 'GET', `/sessions/${done.session_id}`)).state).not.toBe('running');
});

/** Each page of the UI, as `who` opens it: its path and what shows it is ready. */
function pages(): { name: string; path: string; ready: (p: Page) => Promise<void> }[] {
  const terminal = async (p: Page) => { await expect(rows(p)).toContainText('END'); };
  return [
    { name: 'sessions', path: '/', ready: async (p) => { await expect(p.locator(`tr[data-session="${wide}"]`)).toBeVisible(); } },
    { name: 'terminal', path: `/sessions/${wide}`, ready: terminal },
    { name: 'player', path: `/sessions/${wide}/play`, ready: async (p) => { await expect(p.locator('input[name=timeline]')).toBeVisible(); } },
    { name: 'wall', path: '/wall', ready: async (p) => { await expect(p.locator(`.tile[data-session="${wide}"]`)).toBeVisible(); } },
    { name: 'snapshots', path: '/snapshots', ready: async (p) => { await expect(p.getByRole('heading', { name: 'Snapshots' })).toBeVisible(); } },
    { name: 'card', path: '/card', ready: async (p) => { await expect(p.locator('pre.card')).toContainText('pty-ws'); } },
  ];
}

/** A signed-in page of `size` (and colour scheme). */
async function signedIn(browser: Browser, size: { width: number; height: number }, colorScheme: 'light' | 'dark' = 'dark'): Promise<Page> {
  const context = await browser.newContext({ viewport: size, colorScheme });
  await context.addInitScript(() => localStorage.setItem('ptyhost.renderer', 'dom'));
  const page = await context.newPage();
  await page.goto(firstStartLink());
  await expect(page.locator('nav .who')).toContainText('pty:admin');
  return page;
}

/** Elements that stick out of the viewport on the right without a scrolling (or clipping) box around them. */
async function overflowing(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const clipped = (el: Element) => {
      for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
        if (getComputedStyle(a).overflowX !== 'visible') return true;
      }
      return false;
    };
    const out: string[] = [];
    for (const el of document.querySelectorAll('body *')) {
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.right > window.innerWidth + 0.5 && !clipped(el)) {
        out.push(`${el.tagName.toLowerCase()}.${el.className} right=${Math.round(r.right)}`);
      }
    }
    if (document.documentElement.scrollWidth > window.innerWidth) out.push(`the page scrolls to ${document.documentElement.scrollWidth}`);
    return out;
  });
}

/** The serious and critical violations axe-core finds on the page. */
async function axeViolations(page: Page): Promise<string[]> {
  const { violations } = await new AxeBuilder({ page }).analyze();
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).slice(0, 5).join(', ')}`);
}

test('an observer link on a 390x844 phone shows the screen at 11 px or more, pans to its last column and fits on request', async ({ browser }) => {
  const phone = await (await domContext(browser, PHONE)).newPage();
  await phone.goto(observerLink);
  await expect(rows(phone)).toContainText('END');
  await expect(phone.locator('.role')).toHaveText('observer');
  const host = phone.locator('.term-host');
  await expect(host).toHaveAttribute('data-zoom', 'actual');
  const fontPx = () => phone.evaluate(() => {
    const el = document.querySelector('.term-host .xterm') as HTMLElement;
    const measure = document.querySelector('.term-host .xterm-char-measure-element') as HTMLElement;
    return parseFloat(getComputedStyle(measure).fontSize) * el.getBoundingClientRect().width / el.offsetWidth;
  });
  expect(await fontPx()).toBeGreaterThanOrEqual(11);
  // Where END's line ends on screen (END fills its last columns), before and after panning.
  const endAt = () => phone.evaluate(() => {
    const row = [...document.querySelectorAll('.term-host .xterm-rows > div')].find((r) => r.textContent!.includes('END'))!;
    const range = document.createRange();
    range.selectNodeContents(row);
    return { right: range.getBoundingClientRect().right, width: window.innerWidth };
  });
  const before = await endAt();
  expect(before.right).toBeGreaterThan(before.width);
  await host.evaluate((el) => { el.scrollLeft = el.scrollWidth; });
  const after = await endAt();
  expect(after.right).toBeLessThanOrEqual(after.width);
  expect(after.right).toBeGreaterThan(after.width / 2);
  await phone.screenshot({ path: test.info().outputPath('observer-phone-panned.png') });

  // Fit to width: the observer's own choice, at any size; the PTY is never resized for it.
  const fit = phone.getByRole('button', { name: 'Fit to width' });
  await expect(fit).toHaveAttribute('aria-pressed', 'false');
  await fit.click();
  await expect(host).toHaveAttribute('data-zoom', 'fit');
  await expect(fit).toHaveAttribute('aria-pressed', 'true');
  expect(await fontPx()).toBeLessThan(11);
  await phone.screenshot({ path: test.info().outputPath('observer-phone-fit.png') });
  await fit.click();
  await expect(host).toHaveAttribute('data-zoom', 'actual');
  const session = await api(admin, 'GET', `/sessions/${wide}`);
  expect([session.cols, session.rows]).toEqual([120, 30]);
});

test('no page overflows a 360 px screen, and each is kept as a screenshot at phone and desktop widths', async ({ browser }) => {
  for (const size of [NARROW, DESKTOP]) {
    const page = await signedIn(browser, size);
    for (const { name, path, ready } of pages()) {
      await page.goto(path);
      await ready(page);
      if (size === NARROW) expect(await overflowing(page), name).toEqual([]);
      await page.screenshot({ path: test.info().outputPath(`${name}-${size.width}.png`), fullPage: true });
    }
  }
});

test('the sessions list says "login shell" for a shell ptyhost started, no page shows the data directory, and the list filters and sorts', async () => {
  const dataDir = (await api(admin, 'GET', `/sessions/${shell}`)).argv.find((a: string) => a.endsWith('shell-integration.bash'));
  await admin.goto('/');
  const row = admin.locator(`tr[data-session="${shell}"]`);
  await expect(row.locator('code').first()).toHaveText('login shell');
  await expect(admin.locator(`tr[data-session="${wide}"] td[data-column="sandbox"]`)).toContainText(/^(on|off)/);
  for (const { path, ready } of pages()) {
    await admin.goto(path);
    await ready(admin);
    // The UI's own text: a terminal's screen is the program's.
    const text = await admin.evaluate(() => {
      const copy = document.body.cloneNode(true) as HTMLElement;
      copy.querySelectorAll('.xterm').forEach((x) => x.remove());
      return copy.innerText;
    });
    if (dataDir) expect(text, path).not.toContain(dataDir.replace(/\/[^/]*$/, ''));
    expect(text, path).not.toContain('--rcfile');
  }

  await admin.goto('/');
  const filter = admin.getByRole('searchbox', { name: /Filter/ });
  await filter.fill('SCR-PLAIN');
  await expect(admin.locator('tbody tr')).toHaveCount(1);
  await expect(row).toBeVisible();
  await filter.fill(wide.slice(-6));
  await expect(admin.locator('tbody tr')).toHaveCount(1);
  await filter.fill('printf');
  await expect(admin.locator(`tbody tr[data-session="${wide}"]`)).toBeVisible();
  // Other tests' sessions share the server: sort this test's three.
  await filter.fill('scr-');
  await expect(admin.locator('tbody tr')).toHaveCount(3);
  const header = admin.locator('th', { has: admin.getByRole('button', { name: 'Session' }) });
  await admin.getByRole('button', { name: 'Session', exact: true }).click();
  await expect(header).toHaveAttribute('aria-sort', 'ascending');
  await expect(admin.locator('tbody tr td:first-child')).toHaveText(['scr-finished', 'scr-plain-shell', 'scr-wide-screen']);
  await admin.getByRole('button', { name: 'Session', exact: true }).click();
  await expect(header).toHaveAttribute('aria-sort', 'descending');
  await expect(admin.locator('tbody tr td:first-child')).toHaveText(['scr-wide-screen', 'scr-plain-shell', 'scr-finished']);
});

test('axe-core finds no serious or critical violation on any page, as controller and as observer, dark and light', async ({ browser }) => {
  for (const scheme of ['dark', 'light'] as const) {
    const page = await signedIn(browser, DESKTOP, scheme);
    for (const { name, path, ready } of pages()) {
      await page.goto(path);
      await ready(page);
      expect(await axeViolations(page), `${name} (${scheme})`).toEqual([]);
    }
    await page.goto(`/sessions/${shell}`);
    await page.getByRole('button', { name: 'Take control' }).click();
    await expect(page.locator('.role')).toHaveText('controller');
    expect(await axeViolations(page), `terminal as controller (${scheme})`).toEqual([]);
    await page.getByRole('button', { name: 'Release' }).click();
    await expect(page.locator('.role')).toHaveText('observer');
    const observer = await (await browser.newContext({ viewport: PHONE, colorScheme: scheme })).newPage();
    await observer.goto(observerLink);
    await expect(observer.locator('.role')).toHaveText('observer');
    expect(await axeViolations(observer), `observer link (${scheme})`).toEqual([]);
  }
});

test("the terminal has an accessible name and turns xterm.js's screen-reader mode on from the page", async () => {
  await admin.goto(`/sessions/${wide}`);
  const region = admin.getByRole('region', { name: 'Terminal' });
  await expect(region).toBeVisible();
  await expect(region.locator('.xterm-accessibility')).toHaveCount(0);
  await admin.getByRole('checkbox', { name: 'Screen reader mode' }).check();
  // xterm.js's own tree: the screen's lines as text a screen reader reads.
  await expect(region.locator('.xterm-accessibility-tree')).toContainText('END');
});

test('take control, type and release, by keyboard alone, with a visible focus ring', async ({ browser }) => {
  const page = await signedIn(browser, DESKTOP);
  await page.goto(`/sessions/${shell}`);
  await expect(rows(page)).toContainText(/[#$]/);
  const focused = () => page.evaluate(() => {
    const el = document.activeElement as HTMLElement;
    return { text: el.textContent?.trim() ?? '', outline: getComputedStyle(el).outlineStyle, tag: el.tagName };
  });
  /** Presses `key` until the focused element reads `text` (at most 40 times). */
  const tabTo = async (key: string, text: string) => {
    for (let i = 0; i < 40; i++) {
      await page.keyboard.press(key);
      const f = await focused();
      if (f.text === text) {
        expect(f.outline, `${text} shows where the focus is`).not.toBe('none');
        return;
      }
    }
    throw new Error(`${key} never reached ${text}`);
  };
  await tabTo('Tab', 'Take control');
  await page.keyboard.press('Enter');
  await expect(page.locator('.role')).toHaveText('controller');
  expect((await focused()).tag).toBe('TEXTAREA');
  await page.keyboard.type('echo typed-$((6*7))');
  await page.keyboard.press('Enter');
  await expect(rows(page)).toContainText('typed-42');
  await tabTo('Shift+Tab', 'Release');
  await page.keyboard.press('Enter');
  await expect(page.locator('.role')).toHaveText('observer');
  await page.screenshot({ path: test.info().outputPath('keyboard-released.png') });
});

test('the light theme follows prefers-color-scheme, the terminal included', async ({ browser }) => {
  const page = await signedIn(browser, DESKTOP, 'light');
  await page.goto(`/sessions/${wide}`);
  await expect(rows(page)).toContainText('END');
  const colours = await page.evaluate(() => ({
    page: getComputedStyle(document.body).backgroundColor || getComputedStyle(document.documentElement).backgroundColor,
    root: getComputedStyle(document.documentElement).backgroundColor,
    terminal: getComputedStyle(document.querySelector('.term-host .xterm-scrollable-element')!).backgroundColor,
    text: getComputedStyle(document.querySelector('.term-host .xterm-rows')!).color,
  }));
  expect(colours.root).toBe('rgb(245, 246, 248)');
  expect(colours.terminal).toBe('rgb(255, 255, 255)');
  expect(colours.text).toBe('rgb(56, 58, 66)');
  await page.screenshot({ path: test.info().outputPath('terminal-light.png') });
  await page.goto('/');
  await page.screenshot({ path: test.info().outputPath('sessions-light.png') });
});
