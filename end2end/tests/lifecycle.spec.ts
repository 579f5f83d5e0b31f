import { test, expect } from '@playwright/test';
import { api, domContext, signIn, watchErrors } from '../helpers';

// The terminal page pauses and resumes a session, snapshots its workspace and links the
// snapshot; the snapshots page restores it into a new session; the player marks the pause,
// the resume and the snapshot on its timeline.
test('a session is paused, resumed and snapshotted from its page, and the snapshot restores', async ({ browser }) => {
  const page = await (await domContext(browser)).newPage();
  const errors = watchErrors(page);
  await signIn(page);
  const created = await api(page, 'POST', '/sessions', { label: 'lifecycle-ui' });
  const sid = created.session_id;
  expect(sid, JSON.stringify(created)).toBeTruthy();
  await page.goto(`/sessions/${sid}`);
  const panel = page.getByRole('region', { name: 'Lifecycle' });
  await panel.getByRole('button', { name: 'Pause' }).click();
  await expect(panel.getByRole('status')).toContainText('The session is paused.');
  expect((await api(page, 'GET', `/sessions/${sid}`)).state).toBe('paused');
  await panel.getByRole('button', { name: 'Resume' }).click();
  await expect(panel.getByRole('status')).toContainText('The session is running.');

  await panel.getByRole('button', { name: 'Snapshot' }).click();
  await expect(panel.getByRole('status')).toContainText('Snapshot taken');
  await panel.getByRole('link', { name: /^Snapshot / }).click();
  await expect(page).toHaveURL(/\/snapshots$/);
  const rows = page.locator('table.snapshots tbody tr');
  await expect(rows).toHaveCount(1);
  await rows.first().getByRole('button', { name: 'Restore' }).click();
  await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]+$/);
  expect(page.url()).not.toContain(sid);

  await page.goto(`/sessions/${sid}/play`);
  for (const event of ['pause', 'resume', 'snapshot']) {
    await expect(page.locator(`[data-event="${event}"]`).first()).toBeAttached();
  }
  expect(errors).toEqual([]);
});
