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
