import { defineConfig } from '@playwright/test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// The server under test: the built binary on its own port with a throwaway data dir.
const port = Number(process.env.PTYHOST_E2E_PORT ?? 3300);
const bin = process.env.PTYHOST_BIN ?? '../target/debug/ptyhost';
const dataDir = mkdtempSync(join(tmpdir(), 'ptyhost-e2e-'));
const adminToken = 'e2e-admin-token';

export default defineConfig({
  testDir: './tests',
  timeout: 30_000,
  retries: 0,
  reporter: [['list']],
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    launchOptions: {
      executablePath: '/usr/bin/chromium',
      args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ],
    },
  },
  webServer: {
    command: `${bin} serve --listen 127.0.0.1:${port} --data-dir ${dataDir} --bootstrap-token ${adminToken}`,
    cwd: '..',
    url: `http://127.0.0.1:${port}/readyz`,
    reuseExistingServer: false,
    timeout: 30_000,
  },
});
