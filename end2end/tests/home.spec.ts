import { test, expect } from '@playwright/test';

test('the home page is server-rendered, hydrates from WASM and logs no errors', async ({ page }) => {
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  const wasm = page.waitForResponse((r) => r.url().endsWith('/pkg/ptyhost.wasm'));

  await page.goto('/');
  await expect(page.locator('h1')).toHaveText('ptyhost');
  expect((await wasm).status()).toBe(200);
  await expect(page.locator('a[href="/.well-known/agent-card.json"]')).toBeVisible();
  expect(problems).toEqual([]);
});

test('the agent card the page links to is the pure A2A 1.0 card', async ({ request }) => {
  const card = await (await request.get('/.well-known/agent-card.json')).json();
  expect(card.supportedInterfaces[0].protocolBinding).toBe('https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1');
});
