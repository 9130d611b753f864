// Screenshots of UI pages for a person to look at, with every console message printed:
//   node tests/ui/shoot.mjs BASE_URL OUTDIR PATH... [--user NAME]
// Each PATH is taken at 1280x800 and 390x844 (full page).
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const args = process.argv.slice(2);
const userIdx = args.indexOf('--user');
const user = userIdx >= 0 ? args.splice(userIdx, 2)[1] : null;
const [base, out, ...paths] = args;
fs.mkdirSync(out, { recursive: true });
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'cdigits-shoot-'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync'],
});
try {
  if (user) await ctx.request.post(base + '/login', { form: { username: user }, maxRedirects: 0 });
  const page = await ctx.newPage();
  let tag = '';
  page.on('console', (m) => console.log(`[${tag}] console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => console.log(`[${tag}] pageerror: ${e.message}`));
  for (const [w, h, t] of [[1280, 800, 'desktop'], [390, 844, 'phone']]) {
    tag = t;
    await page.setViewportSize({ width: w, height: h });
    for (const p of paths) {
      await page.goto(base + p, { waitUntil: 'load' });
      await page.waitForTimeout(1500);
      const name = (p.replace(/[^a-zA-Z0-9]+/g, '_').replace(/^_|_$/g, '') || 'home') + '-' + tag + '.png';
      await page.screenshot({ path: path.join(out, name), fullPage: true });
      console.log('saved', path.join(out, name));
      if (process.env.SLICES && tag === 'phone') {
        const height = await page.evaluate(() => document.documentElement.scrollHeight);
        for (let k = 0; k * h < height && k < Number(process.env.SLICES); k++) {
          const slice = name.replace('.png', `-${k}.png`);
          await page.screenshot({ path: path.join(out, slice), fullPage: true,
            clip: { x: 0, y: k * h, width: w, height: Math.min(h, height - k * h) } });
        }
      }
    }
  }
} finally {
  await ctx.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
