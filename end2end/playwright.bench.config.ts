import { defineConfig } from '@playwright/test';
import base from './playwright.config';

// The UI benchmarks (scripts/bench-ui.sh): the same server and browser as the tests.
export default defineConfig({ ...base, testDir: './bench', testMatch: '*.bench.ts', outputDir: './test-results/bench' });
