import { test, expect } from '@playwright/test';
import { api, domContext, signIn, watchErrors } from '../helpers';

// A dev server inside a sandboxed session shows up on its terminal page as a link; the link
// opens the preview in a new tab, on an origin of its own, whose page trades the link's
// token for the preview's cookie, so the token never reaches a URL the server sees, and
// the preview's scripts cannot read the UI's storage.
test('a port a session listens on is a link on its terminal page that opens its preview', async ({ browser }) => {
  const page = await (await domContext(browser)).newPage();
  const errors = watchErrors(page);
  await signIn(page);
  const created = await api(page, 'POST', '/sessions', {
    command: 'echo preview-works > hello.txt && python3 -m http.server 8000 --bind 127.0.0.1',
  });
  expect(created.session_id, JSON.stringify(created)).toBeTruthy();
  await page.goto(`/sessions/${created.session_id}`);
  const link = page.getByRole('link', { name: 'Open port 8000' });
  await expect(link).toBeVisible({ timeout: 20_000 });

  const [preview] = await Promise.all([page.context().waitForEvent('page'), link.click()]);
  await expect(preview.locator('body')).toContainText('hello.txt');
  expect(preview.url()).not.toContain('token');
  expect(new URL(preview.url()).hostname).toBe(`8000-${created.session_id}.localhost`);
  expect(await page.evaluate(() => Object.keys(sessionStorage).length)).toBeGreaterThan(0);
  expect(await preview.evaluate(() => Object.keys(sessionStorage).length)).toBe(0);
  await preview.goto(preview.url() + 'hello.txt');
  await expect(preview.locator('body')).toContainText('preview-works');
  expect(errors).toEqual([]);
});

// The sessions list and the wall say what listens in each session; the list's port is a
// link to the same preview.
test('a listening port shows in the sessions list as a link to its preview and on its wall tile', async ({ browser }) => {
  const page = await (await domContext(browser)).newPage();
  const errors = watchErrors(page);
  await signIn(page);
  const quiet = await api(page, 'POST', '/sessions', { command: 'sleep 3600', label: 'ports-none' });
  const served = await api(page, 'POST', '/sessions', {
    command: 'echo listed > hello.txt && python3 -m http.server 8001 --bind 127.0.0.1',
    label: 'ports-listed',
  });
  await page.goto('/');
  const cell = (sid: string) => page.locator(`tr[data-session="${sid}"] td[data-column="ports"]`);
  await expect(cell(quiet.session_id)).toHaveText('none');
  const link = cell(served.session_id).getByRole('link', { name: 'Open port 8001' });
  await expect(link).toBeVisible({ timeout: 20_000 });
  const [preview] = await Promise.all([page.context().waitForEvent('page'), link.click()]);
  await expect(preview.locator('body')).toContainText('hello.txt');
  expect(preview.url()).not.toContain('token');

  await page.goto('/wall');
  await expect(page.locator(`.tile[data-session="${served.session_id}"] .ports`)).toHaveText('ports 8001');
  await expect(page.locator(`.tile[data-session="${quiet.session_id}"] .ports`)).toHaveText('ports none');
  for (const s of [quiet, served]) await api(page, 'DELETE', `/sessions/${s.session_id}`);
  expect(errors).toEqual([]);
  // The wall watches every running session, later specs' too: it must not stay open.
  await page.context().close();
});
