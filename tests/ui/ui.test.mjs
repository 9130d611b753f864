// Browser tests of the cdigits UI in Debian's Chromium through playwright-core, against a
// real server (tests/shell/ui_browser.sh starts it):
//
//   node tests/ui/ui.test.mjs --base URL --images DIR --shapes DIR --boxes DIR --out DIR [--chromium PATH]
//
// A person's path through the UI: log in, pick a folder of class folders with the folder
// picker (the resize preview then shows one of its images), make a dataset from it,
// explore its records a page at a time, make one from uploaded text lists, see the
// engine's graph of LeNet (and its message for a broken network), be refused a GPU the
// server has not got, set precision, early stopping and batch size auto (and be refused a
// bad patience; the mirror choice stays at the network's setting), make a LeNet model
// that does not mirror, watch its loss chart gain points while it trains, abort it,
// resume it, see it finish; see why the hardware panels have no GPU when NVML is not
// loaded; make a segmentation dataset with DIGITS's generic form, see its label images
// over its images, preview augmentations on it, train models/fcn_small.prototxt, see
// its IoU charts and one image's mask with the legend; make a detection dataset with
// DIGITS's object-detection form, train models/detectnet_small.prototxt and see its
// mAP, precision and recall charted, and see the boxes drawn over an image on the
// classify page (by a detector of known weights, whose box is known); then the home page's groups, the
// keyboard, the one top bar of every page, phone width, and the pages as a plain
// `chromium --dump-dom` sees them. Every page's console is watched: a JavaScript error
// anywhere fails the run. Screenshots of each page go to
// --out.
// Prints "ok"/"FAIL" per step and "ui_browser: N passed, N failed"; exits 1 on a failure.
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

function arg(name, def) {
  const i = process.argv.indexOf('--' + name);
  return i >= 0 ? process.argv[i + 1] : def;
}
const BASE = arg('base');
const IMAGES = arg('images');
const SHAPES = arg('shapes'); /* make_generic.py shapes: images/, labels/, classes.txt */
const FCN = path.join(path.dirname(new URL(import.meta.url).pathname), '..', '..', 'models', 'fcn_small.prototxt');
/* make_generic.py boxes: images/, labels/ (KITTI), classes.txt; and square.png, a white
 * square at 8..40 on a black 48x48 image, which the known detector finds */
const BOXES = arg('boxes');
const DETECTNET = path.join(path.dirname(new URL(import.meta.url).pathname), '..', '..', 'models', 'detectnet_small.prototxt');
const KNOWN = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'shell', 'detect_known.prototxt');
const OUT = arg('out', 'ui-screenshots');
const CHROMIUM = arg('chromium', process.env.CHROMIUM || '/usr/bin/chromium');
if (!BASE || !IMAGES) {
  console.error('usage: ui.test.mjs --base URL --images DIR --shapes DIR --boxes DIR --out DIR [--chromium PATH]');
  process.exit(2);
}
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync'];
const TRAIN_EPOCHS = Number(process.env.UI_TRAIN_EPOCHS || 40); /* long enough to abort it while it runs */

fs.mkdirSync(OUT, { recursive: true });
let passed = 0;
let failed = 0;
let skipped = 0;
let broken = false; /* a failed step that later ones need */
const consoleErrors = [];
let expected400 = 0;  /* form errors a step provokes on purpose: Chromium logs their 400s */

async function step(name, fn, { needed = true } = {}) {
  if (broken) {
    failed++;
    console.log(`FAIL ${name} (not run: an earlier step failed)`);
    return;
  }
  const t0 = Date.now();
  try {
    const r = await fn();
    if (typeof r === 'string' && r.startsWith('skip:')) {
      skipped++;
      console.log(`skip ${name}:${r.slice(5)}`);
      return;
    }
    passed++;
    console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } catch (e) {
    failed++;
    const where = (e.stack || '').split('\n').find((l) => l.includes('ui.test.mjs'));
    console.log(`FAIL ${name}: ${e.message.split('\n').slice(0, 6).join('\n     ')}` +
      (where ? `\n     at ${where.trim().replace(/^at\s+/, '')}` : ''));
    if (needed) broken = true;
    await shot('failure-' + name.replace(/[^a-z0-9]+/gi, '-').toLowerCase()).catch(() => {});
  }
}

function check(cond, what) {
  if (!cond) throw new Error(what);
}

/* Sets fields of the page's form, in order: a select to the option of that value, any
 * other field by typing the value. */
async function setFields(values) {
  for (const [sel, v] of Object.entries(values)) {
    if (await page.$eval(sel, (e) => e.tagName) === 'SELECT') await page.selectOption(sel, v);
    else await page.fill(sel, v);
  }
}
/* the dataset form's image options for LeNet: 28x28 grayscale */
const GRAY28 = { '#resize_channels': '1', '#resize_width': '28', '#resize_height': '28' };

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'cdigits-ui-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM,
  headless: true,
  args: ARGS,
  viewport: { width: 1280, height: 800 },
});
context.setDefaultTimeout(20000);
/* Pages are served with the Content-Security-Policy the server will send: an inline
 * script, style or handler would be refused, and the refusal is a console error. */
const CSP = "default-src 'self'";
await context.route('**/*', async (route) => {
  if (route.request().resourceType() !== 'document') return route.continue();
  const response = await route.fetch();
  await route.fulfill({ response, headers: { ...response.headers(), 'content-security-policy': CSP } });
});
const page = context.pages()[0] || await context.newPage();

function watch(p) {
  p.on('pageerror', (e) => consoleErrors.push(`${p.url()}: uncaught ${e.message}`));
  p.on('console', (m) => {
    if (m.type() !== 'error') return;
    const text = m.text();
    if (/status of 400/.test(text) && expected400 > 0) {
      expected400--;
      return;
    }
    consoleErrors.push(`${p.url()}: console.error ${text}`);
  });
}
watch(page);

async function shot(name) {
  await page.screenshot({ path: path.join(OUT, name + '.png'), fullPage: true });
}

async function statusIs(want, timeout) {
  await page.waitForFunction((w) => {
    const b = document.querySelector('#job-status .badge');
    return b && w.includes(b.textContent);
  }, want, { timeout, polling: 250 });
}

const state = {};

try {
  await step('home page renders', async () => {
    await page.goto(BASE + '/', { waitUntil: 'load' });
    check(await page.textContent('h1') === 'Home', 'the home page has no "Home" heading');
    await page.waitForFunction(() => /GPU/.test(document.querySelector('#gpu-pill').textContent));
    check(await page.isVisible('#running-empty'), 'an empty server should say that no job is running');
    await shot('home-empty');
  });

  await step('login: a bad username is refused next to the field, a good one logs in', async () => {
    await page.goto(BASE + '/login.html?next=/', { waitUntil: 'load' });
    await page.fill('#username', 'Not Valid');
    expected400++;
    await page.click('#login-form button[type=submit]');
    await page.waitForFunction(() => document.querySelector('.field-error[data-for="username"]').textContent.length > 0);
    check(await page.getAttribute('#username', 'aria-invalid') === 'true', 'the username field is not marked invalid');
    await shot('login-error');
    await page.fill('#username', 'uitester');
    await Promise.all([page.waitForURL(BASE + '/'), page.click('#login-form button[type=submit]')]);
    await page.waitForFunction(() => /uitester/.test(document.querySelector('#user-box').textContent));
  });

  await step('new dataset: API errors appear next to their fields', async () => {
    await page.goto(BASE + '/dataset-new.html', { waitUntil: 'load' });
    await page.waitForSelector('#previews canvas');
    await page.fill('#folder_train', '/no/such/folder');
    expected400++;
    await page.click('#create');
    await page.waitForFunction(() => document.querySelector('.field-error[data-for="dataset_name"]')?.textContent &&
      document.querySelector('.field-error[data-for="folder_train"]')?.textContent);
    const msg = await page.textContent('.field-error[data-for="folder_train"]');
    check(/folder/i.test(msg), `the folder error says "${msg}"`);
    check(await page.evaluate(() => document.activeElement && document.activeElement.getAttribute('aria-invalid') === 'true'),
      'the first field in error does not have the focus');
    await shot('dataset-new-errors');
  });

  await step('new dataset: Browse picks a folder inside the data roots and previews one of its images', async () => {
    const real = fs.realpathSync(IMAGES);
    await page.fill('#folder_train', '');
    await page.click('button.browse[data-target="folder_train"]');
    await page.waitForSelector('#browse-dialog[open]');
    await page.waitForFunction(() => document.querySelector('#browse-path').textContent === 'Data roots');
    check(await page.isDisabled('#browse-choose'), 'the roots themselves can be chosen');
    await page.click(`#browse-list button:text("${real}")`);
    await page.waitForFunction((r) => document.querySelector('#browse-path').textContent === r, real);
    const info = await page.textContent('#browse-info');
    check(/0 images directly in this folder, 3 folders/.test(info), `the folder reads "${info}"`);
    const names = await page.$$eval('#browse-list button', (bs) => bs.map((b) => b.textContent));
    check(names.length === 4 && /Data roots/.test(names[0]), `the list reads ${JSON.stringify(names)}`);
    await shot('dataset-new-browse');
    await page.click('#browse-choose');
    check(await page.inputValue('#folder_train') === real, 'Choose did not fill the training folder');
    await page.waitForFunction(() => /image of the training folder/.test(document.querySelector('#preview-help').textContent));
    const help = await page.textContent('#preview-help');
    check(/\(\w+\/\w+\.png, 28×28\)/.test(help), `the preview says "${help}"`);
    check(!(await page.isHidden('#example-reset')), 'the sample picture cannot be brought back');
    /* a binary PGM of the user's (browsers do not read netpbm): previewed all the same */
    const pgm = Buffer.concat([Buffer.from('P5\n# a test\n6 4\n65535\n'), Buffer.alloc(6 * 4 * 2, 0x80)]);
    await page.setInputFiles('#example-file', { name: 'own.pgm', mimeType: 'image/x-portable-graymap', buffer: pgm });
    await page.waitForFunction(() => /Your image \(6×4\)/.test(document.querySelector('#preview-help').textContent));
    await page.click('#example-reset');
  });

  await step('new dataset from a folder: created, done, classes, mean image, explorer, log', async () => {
    /* the explorer reads pages from the server: no .db file comes to the browser */
    const dbFetches = [];
    const onRequest = (req) => { if (/\.db(\?|$)/.test(req.url())) dbFetches.push(req.url()); };
    page.on('request', onRequest);
    await setFields({ ...GRAY28, '#resize_mode': 'crop', '#folder_train': IMAGES, '#dataset_name': 'ui-shapes', '#group_name': 'ui-tests' });
    await shot('dataset-new');
    await Promise.all([page.waitForURL(/\/datasets\/[^/]+$/), page.click('#create')]);
    state.datasetUrl = page.url();
    state.datasetId = decodeURIComponent(state.datasetUrl.split('/').pop());
    await statusIs(['Done'], 90000);
    await page.waitForFunction(() => document.querySelectorAll('#class-bars .bar-row').length === 3);
    await page.waitForFunction(() => {
      const img = document.querySelector('#mean-box img');
      return img && img.complete && img.naturalWidth === 28;
    });
    await page.waitForFunction(() => {
      const imgs = Array.from(document.querySelectorAll('#ex-gallery img'));
      return imgs.length === 48 && imgs.every((i) => i.complete && i.naturalWidth === 28 && i.naturalHeight === 28);
    });
    check(/Page 1 of 2 · 90 images/.test(await page.textContent('#ex-page')), 'the explorer does not read "Page 1 of 2 · 90 images"');
    await page.selectOption('#ex-class', '1');
    await page.waitForFunction(() => /Page 1 of 1 · 30 images/.test(document.querySelector('#ex-page').textContent) &&
      document.querySelectorAll('#ex-gallery figure').length === 30 &&
      Array.from(document.querySelectorAll('#ex-gallery figcaption')).every((f) => f.textContent.includes(
        document.querySelector('#ex-class').selectedOptions[0].textContent.replace(/^\d+ /, ''))));
    await page.selectOption('#ex-split', 'val');
    await page.waitForFunction(() => /· 10 images/.test(document.querySelector('#ex-page').textContent) &&
      Array.from(document.querySelectorAll('#ex-gallery img')).every((i) => i.complete && i.naturalWidth === 28));
    await page.selectOption('#ex-split', 'train');
    await page.selectOption('#ex-class', '-1');
    await page.click('#ex-next');
    await page.waitForFunction(() => /Page 2 of 2/.test(document.querySelector('#ex-page').textContent) &&
      document.querySelectorAll('#ex-gallery figure').length === 42);
    page.off('request', onRequest);
    check(dbFetches.length === 0, 'the explorer fetched ' + dbFetches.join(', '));
    await page.waitForFunction(() => document.querySelector('#log').textContent.includes('train.db'));
    const tiles = await page.textContent('#split-tiles');
    check(/Training images\s*90/.test(tiles) && /Validation images\s*30/.test(tiles), `the split counts read "${tiles}"`);
    await shot('dataset');
  });

  await step('job page: log lines written before its live stream opened still show', async () => {
    /* the page's first read of the log answers before the worker wrote anything (here: an
     * empty log, forced); the lines written until the stream opened must still come */
    let held = 0;
    const empty = async (route) => {
      held++;
      await route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ id: state.datasetId, log: [] }) });
    };
    await page.route('**/log/json*', empty, { times: 1 });
    await page.goto(state.datasetUrl, { waitUntil: 'load' });
    await page.waitForFunction(() => document.querySelector('#log').textContent.includes('train.db'));
    check(held === 1, `the first log read was not the one answered empty (${held})`);
    const lines = await page.$$eval('#log span[data-id]', (ss) => ss.map((x) => Number(x.dataset.id)));
    check(lines.length > 0 && lines.every((v, i) => i === 0 || v > lines[i - 1]), `the log lines are not in stored order: ${lines}`);
  });

  await step('new dataset from uploaded text lists', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cdigits-lists-'));
    try {
      const classes = fs.readdirSync(IMAGES).filter((c) => !c.startsWith('.')).sort();
      const list = (from, to) => classes.flatMap((c, k) => fs.readdirSync(path.join(IMAGES, c)).sort().slice(from, to).map((f) => `${c}/${f} ${k}`));
      fs.writeFileSync(path.join(dir, 'train.txt'), list(0, 12).join('\n') + '\n');
      fs.writeFileSync(path.join(dir, 'val.txt'), list(12, 15).join('\n') + '\n');
      fs.writeFileSync(path.join(dir, 'labels.txt'), classes.join('\n') + '\n');
      await page.goto(BASE + '/dataset-new.html', { waitUntil: 'load' });
      await page.click('#tab-textfile');
      await setFields(GRAY28);
      /* each list is a file to upload or, with "Use files on the server", a path there; the
       * test list shows once it is asked for */
      const shown = () => page.$$eval('#panel-textfile input', (is) => is.filter((i) => i.offsetParent).map((i) => i.name).join(' '));
      let fields = await shown();
      check(fields === 'textfile_use_local_files textfile_train_images textfile_train_folder textfile_use_val textfile_use_test ' +
        'textfile_labels_file', `the text-file tab shows ${fields}`);
      await page.check('#textfile_use_local_files');
      await page.check('#textfile_use_test');
      fields = await shown();
      check(fields === 'textfile_use_local_files textfile_local_train_images textfile_train_folder textfile_use_val textfile_use_test ' +
        'textfile_local_test_images textfile_local_labels_file', `with files on the server and a test list the text-file tab shows ${fields}`);
      await page.uncheck('#textfile_use_test');
      await page.uncheck('#textfile_use_local_files');
      await page.setInputFiles('#textfile_train_images', path.join(dir, 'train.txt'));
      await page.setInputFiles('#textfile_labels_file', path.join(dir, 'labels.txt'));
      await page.check('#textfile_use_val');
      await page.setInputFiles('#textfile_val_images', path.join(dir, 'val.txt'));
      await page.fill('#textfile_train_folder', IMAGES);
      await page.fill('#dataset_name', 'ui-lists');
      expected400++;
      await page.click('#create');
      await page.waitForFunction(() => /\/datasets\/[^/]+$/.test(location.pathname) || document.querySelector('.form-error')?.textContent);
      if (!/\/datasets\//.test(page.url())) throw new Error('the form answered "' + await page.textContent('.form-error') + '"');
      expected400--;
      await statusIs(['Done'], 90000);
      const tiles = await page.textContent('#split-tiles');
      check(/Training images\s*36/.test(tiles) && /Validation images\s*9/.test(tiles), `the split counts read "${tiles}"`);
      await page.waitForFunction(() => Array.from(document.querySelectorAll('#ex-gallery img')).length === 36);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, { needed: false });

  await step('new model: learning rate preview, network graph, Customize', async () => {
    await page.goto(BASE + '/model-new.html?dataset=' + encodeURIComponent(state.datasetId), { waitUntil: 'load' });
    await page.waitForFunction(() => Number(document.querySelector('#lr-chart .chart')?.dataset.points) > 50);
    await page.waitForFunction((id) => document.querySelector('#dataset').value === id && document.querySelector('#ds-summary').textContent.includes('28×28'), state.datasetId);
    await page.check('#net-lenet');
    const answer = page.waitForResponse((r) => r.url().endsWith('/models/visualize-network/json'));
    await page.click('#visualize');
    check((await answer).status() === 200, 'visualize-network did not answer 200');
    await page.waitForSelector('#net-graph svg .node');
    check(await page.getAttribute('#net-summary', 'data-source') === 'engine', 'the graph is not the engine\'s');
    const nodes = await page.locator('#net-graph svg .node').count();
    check(nodes >= 7, `the LeNet graph has ${nodes} nodes`);
    const summary = await page.textContent('#net-summary');
    /* LeNet with 3 classes: 520 + 25,050 + 400,500 + 1,503 */
    check(summary.includes('427,573 parameters'), `the graph summary reads "${summary}"`);
    check(!(await page.textContent('#net-errors')), 'the graph reports errors');
    await shot('model-new-graph');
    await page.click('#net-lenet + .title + button');
    await page.waitForFunction(() => document.querySelector('#custom_network').value.includes('LeNet'));
    check(await page.getAttribute('#tab-custom', 'aria-selected') === 'true', 'Customize does not open the custom network');
    /* a mistake in the network: the engine's message, with its line and column */
    const good = await page.inputValue('#custom_network');
    await page.fill('#custom_network', good.replace('kernel_size: 5', 'kernel_sise: 5'));
    await page.click('#visualize');
    await page.waitForFunction(() => /custom_network:\d+:\d+: unknown field "kernel_sise"/.test(document.querySelector('#net-errors').textContent));
    check(await page.locator('#net-graph svg').count() === 0, 'a network the engine refuses still has a graph');
    await shot('model-new-graph-error');
    await page.fill('#custom_network', good);
    await page.click('#tab-standard');
  });

  await step('new model: GPUs to choose from, data parallelism, and the server\'s answer next to them', async () => {
    /* the page is shown a GPU this server has not got (the one after its last), and the
     * server refuses it, saying how many it has */
    const real = await (await context.request.get(BASE + '/hardware/json')).json();
    const has = real.resources.gpus.total;
    await page.route('**/hardware/json', (route) => route.fulfill({ json: {
      gpus: [{ index: has, name: 'Test GPU', memory: { used: 2 ** 30, total: 16 * 2 ** 30 }, utilization: { gpu: 3, memory: 1 }, temperature: 41 }],
      nvml: { loaded: true, reason: '' }, workers: [], resources: { gpus: { total: 1, free: 1, busy: [] } } } }));
    await page.reload({ waitUntil: 'load' });
    await page.waitForSelector(`#gpu-${has}`, { state: 'visible' });
    check(/GPUs available 1\/1/.test(await page.textContent('#gpu-pill')), 'the top bar does not say "GPUs available 1/1"');
    check(await page.isHidden('#gpu-nvml'), 'the form says NVML is not loaded when it is');
    await page.check(`#gpu-${has}`);
    await page.fill('#model_name', 'ui-gpu');
    check(await page.isChecked('#data_parallel'), 'data parallelism is not ticked by default');
    await page.uncheck('#data_parallel');
    expected400++;
    const [sent] = await Promise.all([
      page.waitForRequest((r) => r.method() === 'POST' && /\/models\/images\/classification\/json$/.test(r.url())),
      page.click('#create')]);
    const posted = sent.postDataJSON();
    check(posted.data_parallel === 'false' && JSON.stringify(posted.select_gpus) === `[${has}]`,
      'the form posts ' + JSON.stringify(posted) + `, not data_parallel=false with GPU ${has}`);
    await page.waitForFunction((want) => document.querySelector('.field-error[data-for="select_gpus"]').textContent.includes(want),
      `GPU ${has} does not exist here: this server has ${has} GPU`);
    await shot('model-new-gpus');
    await page.unroute('**/hardware/json');
    await page.reload({ waitUntil: 'load' });
    await page.waitForFunction(() => Number(document.querySelector('#lr-chart .chart')?.dataset.points) > 50);
  });

  await step('new model: precision, early stopping and batch size auto reach the job; a bad patience is refused', async () => {
    await setFields({ '#model_name': 'ui-options', '#train_epochs': '1', '#early_stopping_patience': '-1' });
    expected400++;
    await page.click('#create');
    await page.waitForFunction(() => document.querySelector('.field-error[data-for="early_stopping_patience"]')?.textContent);
    const msg = await page.textContent('.field-error[data-for="early_stopping_patience"]');
    check(/^Early stopping patience must be between 0 and \d+; got -1$/.test(msg), `the patience error reads "${msg}"`);
    check(await page.getAttribute('#early_stopping_patience', 'aria-invalid') === 'true', 'the patience field is not marked invalid');
    await shot('model-new-options-error');
    await page.fill('#early_stopping_patience', '3');
    await page.fill('#early_stopping_min_delta', '0.01');
    await page.check('#precision-bf16');
    check(await page.getAttribute('label[for="precision-bf16"]', 'class') === 'radio-card selected', 'the bf16 card is not shown selected');
    await page.check('#batch_auto');
    check(await page.isDisabled('#batch_size'), 'the batch size stays editable with auto');
    check(await page.inputValue('#use_mirror') === '' &&
      (await page.$$eval('#use_mirror option', (os) => os.map((o) => o.value + ':' + o.textContent))).join('|') ===
        ":Network's setting|true:Mirror|false:Don't mirror",
      'the mirror choice does not start at the network\'s setting with Mirror and Don\'t mirror');
    await shot('model-new-options');
    await Promise.all([page.waitForURL(/\/models\/[^/]+$/), page.click('#create')]);
    const id = decodeURIComponent(page.url().split('/').pop());
    try {
      const job = await (await context.request.get(BASE + '/models/' + encodeURIComponent(id) + '/json')).json();
      const t = job.train || {};
      check(t.precision === 'bf16' && t.early_stopping_patience === 3 && t.early_stopping_min_delta === 0.01 && t.batch_size === 'auto' &&
        !('use_mirror' in t),
        'the job trains with ' + JSON.stringify({ precision: t.precision, patience: t.early_stopping_patience,
          min_delta: t.early_stopping_min_delta, batch_size: t.batch_size, use_mirror: t.use_mirror }));
      await page.waitForFunction(() => /Precision\s*bf16/.test(document.querySelector('#details').textContent) &&
        /Early stopping\s*after 3 validations/.test(document.querySelector('#details').textContent) &&
        /Batch size\s*auto/.test(document.querySelector('#details').textContent) &&
        /network's mirror setting/.test(document.querySelector('#details').textContent));
      await shot('model-options');
    } finally {
      /* the CPU slot is the next model's; its page is left first, so that nothing reads the job once it is gone */
      await page.goto(BASE + '/model-new.html?dataset=' + encodeURIComponent(state.datasetId), { waitUntil: 'load' });
      const gone = await context.request.delete(BASE + '/models/' + encodeURIComponent(id));
      check(gone.ok(), `cannot delete ${id}: ${await gone.text()}`);
    }
    await page.waitForFunction(() => Number(document.querySelector('#lr-chart .chart')?.dataset.points) > 50);
  });

  await step('new model: LeNet created', async () => {
    await setFields({ '#train_epochs': String(TRAIN_EPOCHS), '#batch_size': '16', '#model_name': 'ui-lenet', '#group_name': 'ui-tests',
      '#use_mirror': 'false' });
    await shot('model-new');
    await Promise.all([page.waitForURL(/\/models\/[^/]+$/), page.click('#create')]);
    state.modelUrl = page.url();
    state.modelId = decodeURIComponent(state.modelUrl.split('/').pop());
    const job = await (await context.request.get(BASE + '/models/' + encodeURIComponent(state.modelId) + '/json')).json();
    check((job.train || {}).use_mirror === false, 'Don\'t mirror does not write use_mirror false: ' + JSON.stringify((job.train || {}).use_mirror));
  });

  await step('model page: the loss chart gains points while it trains, hardware updates', async () => {
    await statusIs(['Running'], 60000);
    await page.waitForFunction(() => Number(document.querySelector('#chart-loss .chart').dataset.points) >= 2, null, { timeout: 60000 });
    const n1 = Number(await page.getAttribute('#chart-loss .chart', 'data-points'));
    await page.waitForFunction((n) => Number(document.querySelector('#chart-loss .chart').dataset.points) > n, n1, { timeout: 60000 });
    await page.waitForFunction(() => /Worker CPU/.test(document.querySelector('#hw-body').textContent), null, { timeout: 15000 });
    await page.waitForFunction(() => Number(document.querySelector('#chart-lr .chart').dataset.points) > 0);
    await page.waitForFunction(() => /ETA/.test(document.querySelector('#tiles').textContent));
    await shot('model-training');
  });

  await step('model page: abort stops it', async () => {
    await page.click('#abort');
    await page.click('dialog[open] button[value=ok]');
    await statusIs(['Aborted'], 60000);
    await page.waitForSelector('#resume', { state: 'visible' });
    state.pointsAtAbort = Number(await page.getAttribute('#chart-loss .chart', 'data-points'));
    await shot('model-aborted');
  });

  await step('model page: resume continues and it finishes', async () => {
    await page.click('#resume');
    await statusIs(['Running', 'Waiting', 'Done'], 30000);
    await statusIs(['Done'], 180000);
    await page.waitForFunction((n) => Number(document.querySelector('#chart-loss .chart').dataset.points) > n, state.pointsAtAbort, { timeout: 20000 });
    await page.waitForFunction(() => document.querySelectorAll('#snapshots tbody tr').length > 0);
    await page.waitForFunction(() => /%/.test(document.querySelector('#tiles').textContent));
    await page.waitForFunction(() => /Aborted[\s\S]*Running[\s\S]*Done/.test(document.querySelector('#history').textContent));
    await shot('model-done');
  });

  await step('model page opened later shows the whole history', async () => {
    await page.goto(state.modelUrl, { waitUntil: 'load' });
    const points = Number(await page.getAttribute('#chart-loss .chart', 'data-points'));
    check(points > state.pointsAtAbort, `a fresh page shows ${points} points (at abort: ${state.pointsAtAbort})`);
    await page.click('#visualize');
    await page.waitForSelector('#net-dialog[open] svg .node');
    check(await page.getAttribute('#net-summary', 'data-source') === 'engine', 'the model page\'s graph is not the engine\'s');
    check((await page.textContent('#net-summary')).includes('427,573 parameters'), 'the model page\'s graph does not count 427,573 parameters');
    await page.click('#net-close');
    await page.fill('#job_notes', 'trained by the browser test');
    await page.click('#notes-form button[type=submit]');
    await page.waitForFunction(() => document.querySelector('#notes-state').textContent === 'Saved');
  });

  await step('model page: the hardware panel shows each GPU of the job', async () => {
    /* no GPU here: the job's stream is replaced by one hardware sample from a GPU machine */
    const hw = { processes: [{ job_id: state.modelId, pid: 4242, cpu_percent: 97.5, rss_bytes: 3 * 2 ** 30, gpus: [0] }],
      gpus: [{ index: 0, name: 'Test GPU', memory: { used: 6 * 2 ** 30, total: 16 * 2 ** 30 }, utilization: { gpu: 93, memory: 40 }, temperature: 71 }] };
    await page.route('**/jobs/*/events', (route) => route.fulfill({ status: 200, contentType: 'text/event-stream',
      body: 'retry: 60000\nevent: hw\ndata: ' + JSON.stringify(hw) + '\n\n' }));
    await page.goto(state.modelUrl, { waitUntil: 'load' });
    await page.waitForFunction(() => /GPU 0 · Test GPU/.test(document.querySelector('#hw-body').textContent));
    const text = await page.textContent('#hw-body');
    check(/93%/.test(text) && /6\.00 GiB \/ 16\.0 GiB/.test(text) && /71 °C/.test(text) && /98%/.test(text),
      `the hardware panel reads "${text}"`);
    await shot('model-hardware-gpu');
    await page.unroute('**/jobs/*/events');
    await page.goto(state.modelUrl, { waitUntil: 'load' });
  }, { needed: false });

  await step('hardware: /hardware/json says whether NVML is loaded, and the hardware panels say why not', async () => {
    const hw = await (await context.request.get(BASE + '/hardware/json')).json();
    const n = hw.nvml;
    check(n && typeof n.loaded === 'boolean' && typeof n.reason === 'string' && Array.isArray(hw.gpus),
      `/hardware/json has ${JSON.stringify({ nvml: n, gpus: hw.gpus })}`);
    check(n.loaded ? n.reason === '' : n.reason.length > 0 && hw.gpus.length === 0,
      `NVML ${n.loaded ? 'is loaded with a reason' : 'is not loaded without a reason'}: "${n.reason}"`);
    /* the panel reads this server's answer; the top bar is filled from the same one first */
    await page.goto(state.modelUrl, { waitUntil: 'load' });
    await page.waitForFunction(() => /GPU/.test(document.querySelector('#gpu-pill').textContent));
    if (n.loaded) check(await page.isHidden('#hw-nvml'), 'the panel says NVML is not loaded when it is');
    else check((await page.textContent('#hw-nvml')).includes(n.reason), 'the panel does not show this server\'s reason');
    /* a machine whose NVML fails: both hardware panels name the failed call */
    const reason = 'nvmlInit_v2 failed: Driver/library version mismatch (NVML error 18): no GPU monitoring';
    await page.route('**/hardware/json', (route) => route.fulfill({ json: { ...hw, gpus: [], nvml: { loaded: false, reason } } }));
    await page.goto(state.modelUrl, { waitUntil: 'load' });
    await page.waitForFunction((r) => !document.querySelector('#hw-nvml').hidden &&
      document.querySelector('#hw-nvml').textContent.includes(r), reason);
    check(/NVML is not loaded/.test(await page.textContent('#hw-nvml')), 'the panel does not say NVML is not loaded');
    await shot('model-hardware-nvml');
    await page.goto(BASE + '/model-new.html', { waitUntil: 'load' });
    await page.waitForFunction((r) => !document.querySelector('#gpu-nvml').hidden &&
      document.querySelector('#gpu-nvml').textContent.includes(r), reason);
    await shot('model-new-nvml');
    await page.unroute('**/hardware/json');
    await page.goto(state.modelUrl, { waitUntil: 'load' });
  }, { needed: false });

  await step('clone fills the new model form with the model\'s fields', async () => {
    await Promise.all([page.waitForURL(/model-new\.html\?clone=/), page.click('#clone')]);
    await page.waitForFunction(() => document.querySelector('#model_name').value === 'ui-lenet' &&
      document.querySelector('#train_epochs').value !== '30' && document.querySelector('#batch_size').value === '16');
    check(await page.isChecked('#net-lenet'), 'the clone did not pick LeNet');
    check(await page.inputValue('#dataset') === state.datasetId, 'the clone did not pick the dataset');
    check(await page.inputValue('#use_mirror') === 'false', 'the clone did not keep Don\'t mirror');
  }, { needed: false });

  await step('a new model from a snapshot of the previous one', async () => {
    await page.goto(state.modelUrl, { waitUntil: 'load' });
    await Promise.all([page.waitForURL(/model-new\.html\?previous=/), page.click('#snapshots tbody tr:last-child a:text("new model")')]);
    /* the page opens the tab once it has read the jobs */
    await page.waitForFunction(() => document.querySelector('#tab-previous').getAttribute('aria-selected') === 'true')
      .catch(() => { throw new Error('the Previous networks tab is not open'); });
    await page.waitForFunction((id) => {
      const sel = document.querySelector(`select[name="${id}-snapshot"]`);
      return sel && sel.value !== '' && document.querySelector(`input[name="previous_networks"][value="${id}"]`).checked;
    }, state.modelId);
    await setFields({ '#train_epochs': '1', '#batch_size': '16', '#model_name': 'ui-finetune' });
    await Promise.all([page.waitForURL(/\/models\/[^/]+$/), page.click('#create')]);
    await statusIs(['Done'], 120000);
    check(/from/.test(await page.textContent('#details')), 'the settings do not say where the network came from');
    check(/Pretrained/.test(await page.textContent('#details')), 'the settings do not name the pretrained weights');
  }, { needed: false });

  /* ---- a segmentation dataset and model: DIGITS's generic forms, the label explorer, the
   * augmentation preview, the IoU charts and the mask of one image ------------------------- */

  await step('generic dataset form: image-segmentation fields, rules between them, created, done', async () => {
    check(SHAPES, 'no --shapes folder (tests/shell/make_generic.py shapes) was given');
    await page.goto(BASE + '/datasets/generic/new/image-segmentation', { waitUntil: 'load' });
    check(await page.textContent('h1') === 'New Segmentation Dataset', `the heading reads "${await page.textContent('h1')}"`);
    check(await page.getAttribute('#ext-nav a[data-ext="image-segmentation"]', 'aria-current') === 'page',
      'the extension links do not mark image-segmentation as the current one');
    /* the validation folders are asked for once "Separate validation images" is ticked */
    check(await page.isHidden('#validation_feature_folder') && await page.isHidden('#validation_label_folder'),
      'the validation folders show before "Separate validation images" is ticked');
    await page.check('#has_val_folder');
    check(await page.isVisible('#validation_feature_folder') && await page.isVisible('#validation_label_folder'),
      '"Separate validation images" does not show its folders');
    await page.uncheck('#has_val_folder');
    check(await page.isHidden('#validation_feature_folder'), 'the validation folders stay after "Separate validation images" is unticked');
    await setFields({ '#feature_folder': path.join(SHAPES, 'images'), '#label_folder': path.join(SHAPES, 'labels'),
      '#folder_pct_val': '25', '#channel_conversion': 'RGB', '#class_labels_file': path.join(SHAPES, 'classes.txt'),
      '#dataset_name': 'ui-seg', '#group_name': 'ui-generic' });
    await shot('dataset-generic-new');
    await Promise.all([page.waitForURL(/\/datasets\/[^/]+$/), page.click('#create')]);
    state.segDatasetUrl = page.url();
    state.segDatasetId = decodeURIComponent(state.segDatasetUrl.split('/').pop());
    await statusIs(['Done'], 90000);
  }, { needed: false });

  await step('segmentation dataset page: the explorer lays the label images over the images', async () => {
    check(state.segDatasetId, 'no segmentation dataset (an earlier step failed)');
    await page.goto(state.segDatasetUrl, { waitUntil: 'load' });
    await statusIs(['Done'], 10000);
    check(await page.isHidden('#ex-class'), 'a segmentation dataset\'s explorer offers classes to filter by');
    await page.waitForFunction(() => /Page 1 of 1 · 36 images/.test(document.querySelector('#ex-page').textContent));
    await page.selectOption('#ex-view', 'overlay');
    check(await page.isVisible('#ex-opacity'), 'the label opacity is not offered in overlay mode');
    await page.waitForFunction(() => {
      const boxes = Array.from(document.querySelectorAll('#ex-gallery .label-overlay'));
      return boxes.length === 36 && boxes.every((b) => {
        const [img, label] = b.querySelectorAll('img');
        return img && label && label.classList.contains('label-over') && img.complete && label.complete &&
          img.naturalWidth === 32 && label.naturalWidth === 32 && label.naturalHeight === 32;
      });
    });
    await page.fill('#ex-opacity', '80');
    await page.waitForFunction(() => Array.from(document.querySelectorAll('#ex-gallery img.label-over')).every((i) => i.style.opacity === '0.8'));
    await page.selectOption('#ex-split', 'val');
    await page.waitForFunction(() => /· 12 images/.test(document.querySelector('#ex-page').textContent) &&
      document.querySelectorAll('#ex-gallery .label-overlay img.label-over').length === 12 &&
      Array.from(document.querySelectorAll('#ex-gallery img')).every((i) => i.complete && i.naturalWidth === 32));
    await page.selectOption('#ex-split', 'train');
    await page.waitForFunction(() => document.querySelectorAll('#ex-gallery .label-overlay').length === 36 &&
      Array.from(document.querySelectorAll('#ex-gallery img')).every((i) => i.complete && i.naturalWidth === 32));
    await shot('dataset-segmentation-overlay');
  }, { needed: false });

  await step('new generic model: the augmentations are previewed on the dataset\'s images, the FCN is created', async () => {
    check(state.segDatasetId, 'no segmentation dataset (an earlier step failed)');
    await page.goto(BASE + '/models/images/generic/new?dataset=' + encodeURIComponent(state.segDatasetId), { waitUntil: 'load' });
    check(await page.textContent('h1') === 'New Image Model', `the generic model form is headed "${await page.textContent('h1')}"`);
    await page.waitForFunction((id) => document.querySelector('#dataset').value === id &&
      document.querySelector('#ds-summary').textContent.includes('32×32'), state.segDatasetId);
    await setFields({ '#aug_rot': '30', '#aug_quad_rot': 'rot180', '#aug_contrast': '0.5' });
    const answer = page.waitForResponse((r) => r.url().endsWith('/models/augment-preview/json'));
    await page.click('#aug-preview');
    check((await answer).status() === 200, 'augment-preview did not answer 200');
    await page.waitForFunction(() => {
      const figs = Array.from(document.querySelectorAll('#aug-preview-images figure'));
      return figs.length === 6 && figs.every((f) => f.querySelectorAll('canvas').length === 2 && /°/.test(f.textContent));
    });
    /* the augmented picture differs from the original: drawn, and turned */
    const differs = await page.$$eval('#aug-preview-images figure', (figs) => figs.filter((f) => {
      const [a, b] = Array.from(f.querySelectorAll('canvas')).map((c) => c.getContext('2d').getImageData(0, 0, c.width, c.height).data);
      return a.length === b.length && a.some((v, i) => v !== b[i]);
    }).length);
    check(differs === 6, `${differs} of the 6 previews differ from their original`);
    check(await page.isVisible('#aug-redraw'), 'no "Draw again" after a preview');
    await page.locator('#aug-title').scrollIntoViewIfNeeded();
    await shot('model-new-augmentations');
    /* trained without them, with flips only: its mask should be good after a few epochs */
    await setFields({ '#aug_rot': '0', '#aug_quad_rot': 'none', '#aug_contrast': '0', '#aug_flip': 'fliplr' });
    await page.click('#tab-custom');
    await page.fill('#custom_network', fs.readFileSync(FCN, 'utf8'));
    await setFields({ '#train_epochs': '12', '#val_interval': '4', '#snapshot_interval': '12', '#random_seed': '1',
      '#lr_policy': 'fixed', '#learning_rate': '0.01', '#model_name': 'ui-fcn', '#group_name': 'ui-generic' });
    await Promise.all([page.waitForURL(/\/models\/[^/]+$/), page.click('#create')]);
    state.segModelUrl = page.url();
    state.segModelId = decodeURIComponent(state.segModelUrl.split('/').pop());
    const job = await (await context.request.get(BASE + '/models/' + encodeURIComponent(state.segModelId) + '/json')).json();
    const t = job.train || {};
    check(t.flip === 'fliplr' && !t.rotation && t.epochs === 12, 'the model trains with ' + JSON.stringify({ flip: t.flip, rotation: t.rotation, epochs: t.epochs }));
  }, { needed: false });

  await step('segmentation model page: charts of the loss, pixel accuracy, mean IoU and each class\'s IoU', async () => {
    check(state.segModelId, 'no segmentation model (an earlier step failed)');
    await statusIs(['Done'], 180000);
    /* a fresh page: the whole history, and the classes' names from the dataset */
    await page.goto(state.segModelUrl, { waitUntil: 'load' });
    await page.waitForFunction(() => {
      const legend = document.querySelector('#chart-loss .u-legend');
      return legend && /mean IoU \(val\)/.test(legend.textContent) && /accuracy \(val\)/.test(legend.textContent) &&
        Number(document.querySelector('#chart-loss .chart').dataset.points) > 6;
    });
    await page.waitForFunction(() => {
      const c = document.querySelector('#chart-iou .chart');
      const legend = document.querySelector('#chart-iou .u-legend');
      return c && Number(c.dataset.points) === 9 && ['background', 'rectangle', 'disc'].every((n) => legend.textContent.includes(n));
    });
    const tiles = await page.textContent('#tiles');
    check(/Val\. mean IoU\s*\d+\.\d\d%/.test(tiles), `the tiles read "${tiles}"`);
    check(/horizontal flips/.test(await page.textContent('#details')), 'the settings do not name the flips');
    await shot('model-segmentation');
  }, { needed: false });

  await step('classify page of the segmentation model: the mask over the image, the legend, the outputs', async () => {
    check(state.segModelId, 'no segmentation model (an earlier step failed)');
    await page.goto(BASE + '/classify.html?job=' + encodeURIComponent(state.segModelId), { waitUntil: 'load' });
    await page.waitForFunction(() => document.querySelectorAll('#snapshot_epoch option').length === 1);
    check(await page.isHidden('#show_visualizations'), 'a segmentation model offers the classifier\'s visualizations');
    await page.fill('#image_path', path.join(SHAPES, 'images', '000.png'));
    await page.click('#one-form button[type=submit]');
    await page.waitForSelector('#seg-stack[data-drawn="1"]');
    check(await page.isVisible('#seg-view'), 'the mask view is hidden');
    const legend = await page.$$eval('#seg-legend tbody tr', (rows) => rows.map((r) => Array.from(r.cells).map((c) => c.textContent.trim())));
    check(JSON.stringify(legend.map((r) => r[1])) === '["background","rectangle","disc"]', 'the legend lists ' + JSON.stringify(legend));
    const pixels = legend.reduce((a, r) => a + Number(r[2].replace(/\D/g, '')), 0);
    check(pixels === 32 * 32, `the legend counts ${pixels} pixels of a 32x32 image`);
    check(legend.every((r) => /^#[0-9a-f]{6}$/.test(r[0])), 'the legend\'s colours are ' + legend.map((r) => r[0]));
    const drawn = await page.evaluate(() => {
      const seen = (c) => c.getContext('2d').getImageData(0, 0, c.width, c.height).data.some((v, i) => i % 4 === 3 && v > 0);
      const image = document.querySelector('#seg-image'), mask = document.querySelector('#seg-mask');
      const a = image.getBoundingClientRect(), b = mask.getBoundingClientRect();
      return { image: image.tagName === 'CANVAS' && seen(image), mask: mask.tagName === 'CANVAS' && seen(mask),
        over: Math.abs(a.left - b.left) < 1 && Math.abs(a.top - b.top) < 1 && Math.abs(a.width - b.width) < 1 && a.width >= 256,
        opacity: mask.style.opacity };
    });
    check(drawn.image && drawn.mask && drawn.over && drawn.opacity === '0.5', 'the image and its mask are not drawn one over the other: ' + JSON.stringify(drawn));
    check(await page.locator('#out-table tbody tr').count() >= 1, 'the outputs table is empty');
    await page.fill('#seg-opacity', '70');
    check(await page.evaluate(() => document.querySelector('#seg-mask').style.opacity) === '0.7', 'the opacity slider does not reach the mask');
    await shot('classify-segmentation');
    /* at phone width the image and its mask shrink together to the screen */
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      const fit = await page.evaluate(() => {
        const a = document.querySelector('#seg-image').getBoundingClientRect(), b = document.querySelector('#seg-mask').getBoundingClientRect();
        return { wide: document.documentElement.scrollWidth, image: a.width, same: Math.abs(a.width - b.width) < 1 && Math.abs(a.height - b.height) < 1 };
      });
      check(fit.wide <= 392 && fit.image < 390 && fit.same, 'at 390 pixels the mask view is ' + JSON.stringify(fit));
      await shot('classify-segmentation-phone');
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  }, { needed: false });

  /* ---- a detection dataset and models: DIGITS's object-detection form, DetectNet's
   * mAP, precision and recall charts, the boxes drawn over an image ---------------------- */

  await step('detection dataset form: image-object-detection fields, created, done', async () => {
    check(BOXES, 'no --boxes folder (tests/shell/make_generic.py boxes) was given');
    await page.goto(BASE + '/datasets/generic/new/image-object-detection', { waitUntil: 'load' });
    check(await page.textContent('h1') === 'New Object Detection Dataset', `the heading reads "${await page.textContent('h1')}"`);
    for (const id of ['#val_image_folder', '#val_label_folder'])
      if (await page.isHidden(id)) await page.check('#has_val_folder');
    await setFields({ '#train_image_folder': path.join(BOXES, 'images'), '#train_label_folder': path.join(BOXES, 'labels'),
      '#val_image_folder': path.join(BOXES, 'images'), '#val_label_folder': path.join(BOXES, 'labels'),
      '#padding_image_width': '64', '#padding_image_height': '64', '#resize_image_width': '128', '#resize_image_height': '128',
      '#val_min_box_size': '0', '#custom_classes': 'dontcare,rectangle,disc', '#dataset_name': 'ui-boxes', '#group_name': 'ui-detection' });
    await shot('dataset-detection-new');
    await Promise.all([page.waitForURL(/\/datasets\/[^/]+$/), page.click('#create')]);
    state.detDatasetUrl = page.url();
    state.detDatasetId = decodeURIComponent(state.detDatasetUrl.split('/').pop());
    await statusIs(['Done'], 90000);
    await shot('dataset-detection');
  }, { needed: false });

  await step('detection model: DetectNet (small) trains; its page charts val mAP, precision and recall', async () => {
    check(state.detDatasetId, 'no detection dataset (an earlier step failed)');
    await page.goto(BASE + '/models/images/generic/new?dataset=' + encodeURIComponent(state.detDatasetId), { waitUntil: 'load' });
    await page.waitForFunction((id) => document.querySelector('#dataset').value === id, state.detDatasetId);
    await page.click('#tab-custom');
    await page.fill('#custom_network', fs.readFileSync(DETECTNET, 'utf8'));
    await setFields({ '#train_epochs': '2', '#val_interval': '1', '#snapshot_interval': '2', '#random_seed': '1',
      '#use_mean': 'none', '#model_name': 'ui-detectnet', '#group_name': 'ui-detection' });
    await Promise.all([page.waitForURL(/\/models\/[^/]+$/), page.click('#create')]);
    state.detModelUrl = page.url();
    state.detModelId = decodeURIComponent(state.detModelUrl.split('/').pop());
    await statusIs(['Done'], 300000);
    await page.goto(state.detModelUrl, { waitUntil: 'load' });
    await page.waitForFunction(() => {
      const c = document.querySelector('#chart-det .chart'), legend = document.querySelector('#chart-det .u-legend');
      return c && legend && Number(c.dataset.points) === 6 &&
        ['mAP (val)', 'precision (val)', 'recall (val)'].every((n) => legend.textContent.includes(n));
    }).catch(() => { throw new Error('the detection chart does not show 2 validations of mAP, precision and recall'); });
    const metrics = await (await context.request.get(BASE + '/models/' + encodeURIComponent(state.detModelId) + '/metrics/json')).json();
    const last = (name) => metrics.metrics.filter((m) => m.phase === 'val' && m.name === name).pop();
    const tiles = await page.textContent('#tiles');
    check(new RegExp('Val\\. mAP\\s*' + last('mAP').value.toFixed(2).replace('.', '\\.')).test(tiles), `the tiles read "${tiles}"`);
    await page.locator('#chart-det').scrollIntoViewIfNeeded();
    await shot('model-detection');
  }, { needed: false });

  await step('classify page of a detection model: the boxes drawn over the image, the legend, the table', async () => {
    check(state.detDatasetId, 'no detection dataset (an earlier step failed)');
    /* a detector of known weights (tests/shell/detect_known.prototxt): its one box over the
     * white square of square.png is 9..41 of its 48 pixels */
    const made = await context.request.post(BASE + '/models/images/generic/json', { multipart: {
      method: 'custom', custom_network: fs.readFileSync(KNOWN, 'utf8'), train_epochs: '1', batch_size: '4', use_mean: 'none',
      lr_policy: 'fixed', random_seed: '1', model_name: 'ui-known-detector', group_name: 'ui-detection', dataset: state.detDatasetId } });
    check(made.status() === 200, `the known detector was not created: ${made.status()} ${await made.text()}`);
    const knownId = (await made.json()).id;
    await page.goto(BASE + '/models/' + encodeURIComponent(knownId), { waitUntil: 'load' });
    await statusIs(['Done'], 120000);
    await page.goto(BASE + '/classify.html?job=' + encodeURIComponent(knownId), { waitUntil: 'load' });
    await page.waitForFunction(() => document.querySelectorAll('#snapshot_epoch option').length === 1);
    await page.fill('#image_path', path.join(BOXES, 'square.png'));
    const answer = page.waitForResponse((r) => r.url().endsWith('/models/images/generic/infer_one/json'));
    await page.click('#one-form button[type=submit]');
    const r = await (await answer).json();
    await page.waitForSelector('#det-stack[data-drawn="1"]');
    check(r.boxes.length === 1 && r.boxes[0].label === 'rectangle', 'the known detector answers ' + JSON.stringify(r.boxes));
    const b = r.boxes[0];
    check(Math.abs(b.x1 - 9) < 1.5 && Math.abs(b.y1 - 9) < 1.5 && Math.abs(b.x2 - 41) < 1.5 && Math.abs(b.y2 - 41) < 1.5,
      'the box is not over the square: ' + JSON.stringify(b));
    const drawn = await page.evaluate((box) => {
      const c = document.querySelector('#det-canvas');
      const k = Number(c.dataset.scale), ctx = c.getContext('2d');
      const at = (x, y) => Array.from(ctx.getImageData(Math.round(x), Math.round(y), 1, 1).data);
      const my = (box.y1 + box.y2) / 2 * k, mx = (box.x1 + box.x2) / 2 * k;
      return { tag: c.tagName, boxes: c.dataset.boxes, scale: k, width: c.width,
        edges: [at(box.x1 * k + 1, my), at(box.x2 * k - 2, my), at(mx, box.y1 * k + 1), at(mx, box.y2 * k - 2)],
        inside: at(mx, my), outside: at(box.x1 * k / 2, my) };
    }, b);
    const red = (p) => p[0] > 200 && p[1] < 60 && p[2] < 60;
    check(drawn.tag === 'CANVAS' && drawn.boxes === '1' && drawn.scale === 10 && drawn.width === 480,
      'the canvas is ' + JSON.stringify({ tag: drawn.tag, boxes: drawn.boxes, scale: drawn.scale, width: drawn.width }));
    check(drawn.edges.every(red), 'the box\'s four edges are not drawn in class 1\'s red: ' + JSON.stringify(drawn.edges));
    check(drawn.inside[0] > 200 && drawn.inside[1] > 150 && drawn.inside[1] < 250, 'the square inside the box is ' + drawn.inside);
    check(drawn.outside.slice(0, 3).every((v) => v < 30), 'the black outside the box is ' + drawn.outside);
    const legend = await page.$$eval('#det-legend tbody tr', (rows) => rows.map((row) => Array.from(row.cells).map((c) => c.textContent.trim())));
    check(JSON.stringify(legend) === JSON.stringify([['#ff0000', 'rectangle', '1'], ['#00ffff', 'disc', '0']]), 'the legend reads ' + JSON.stringify(legend));
    check(await page.locator('#det-table tbody tr').count() === 1, 'the box table does not list the one box');
    check(/1 box/.test(await page.textContent('#det-count')), 'the count reads ' + await page.textContent('#det-count'));
    await page.locator('#det-view').scrollIntoViewIfNeeded();
    await shot('classify-detection');
    /* the trained DetectNet: what it draws is what it answers */
    if (state.detModelId) {
      await page.goto(BASE + '/classify.html?job=' + encodeURIComponent(state.detModelId), { waitUntil: 'load' });
      await page.waitForFunction(() => document.querySelectorAll('#snapshot_epoch option').length >= 1);
      await page.fill('#image_path', path.join(BOXES, 'images', '000.png'));
      const again = page.waitForResponse((res) => res.url().endsWith('/models/images/generic/infer_one/json'));
      await page.click('#one-form button[type=submit]');
      const d = await (await again).json();
      await page.waitForSelector('#det-stack[data-drawn="1"]');
      const n = await page.$eval('#det-canvas', (c) => c.dataset.boxes);
      check(n === String(d.boxes.length) && await page.locator('#det-table tbody tr').count() === d.boxes.length,
        `the page drew ${n} boxes of the ${d.boxes.length} the DetectNet answered`);
      await shot('classify-detectnet');
    }
  }, { needed: false });

  await step('home: jobs by group with owner and coloured status; bulk group', async () => {
    await page.goto(BASE + '/', { waitUntil: 'load' });
    const models = await page.textContent('#models-table');
    check(models.includes('ui-lenet') && models.includes('uitester') && models.includes('ui-tests'), 'the models table lacks the model, its owner or its group');
    check(await page.locator('#models-table .badge.st-success').count() >= 1, 'the Done model has no green badge');
    await page.click('#tab-datasets');
    check((await page.textContent('#datasets-table')).includes('ui-shapes'), 'the datasets table lacks the dataset');
    await page.click('#tab-models');
    await page.check(`#models-table input.sel[data-id="${state.modelId}"]`);
    await page.click('#bulk-group');
    await page.fill('#group-name', 'ui-regrouped');
    await page.click('#group-dialog button[value=ok]');
    await page.waitForFunction(() => /ui-regrouped/.test(document.querySelector('#models-table').textContent));
    await shot('home');
  }, { needed: false });

  await step('keyboard: the skip link and tabs work without a mouse', async () => {
    await page.goto(BASE + '/', { waitUntil: 'load' });
    await page.keyboard.press('Tab');
    check(await page.evaluate(() => document.activeElement.classList.contains('skip-link')), 'the first Tab does not reach the skip link');
    await page.focus('#tab-models');
    await page.keyboard.press('ArrowRight');
    check(await page.getAttribute('#tab-datasets', 'aria-selected') === 'true', 'ArrowRight does not move to the Datasets tab');
    /* ArrowLeft from the first tab goes round to the last, and picks its method */
    await page.goto(BASE + '/model-new.html', { waitUntil: 'load' });
    await page.focus('#tab-standard');
    await page.keyboard.press('ArrowLeft');
    check(await page.getAttribute('#tab-custom', 'aria-selected') === 'true' && await page.isVisible('#custom_network') &&
      await page.inputValue('#method') === 'custom' && await page.evaluate(() => document.activeElement.id) === 'tab-custom',
      'ArrowLeft from Standard networks does not open Custom network');
  }, { needed: false });

  await step('every page has the one top bar: skip link first, brand, main links, GPUs and user', async () => {
    const pages = [['home', '/'], ['', '/login.html'], ['dataset-new', '/dataset-new.html'], ['model-new', '/model-new.html'],
      ['', state.datasetUrl], ['', state.modelUrl], ['', '/classify.html?job=' + encodeURIComponent(state.modelId)]];
    for (const [current, u] of pages) {
      await page.goto(u.startsWith('http') ? u : BASE + u, { waitUntil: 'load' });
      const bar = await page.evaluate(() => ({
        first: document.body.firstElementChild.outerHTML,
        headers: document.querySelectorAll('header.topbar').length,
        brand: document.querySelector('header.topbar .brand')?.href,
        links: [...document.querySelectorAll('header.topbar nav.topnav[aria-label="Main"] a')].map((a) =>
          [a.href, a.textContent, a.getAttribute('aria-current')]),
        pill: document.querySelectorAll('#gpu-pill[aria-live="polite"]').length,
        icons: [...document.querySelectorAll('link[rel="icon"]')].map((l) => l.href),
        user: document.querySelectorAll('#user-box').length,
      }));
      const root = new URL('./', BASE + '/').href;
      const want = [[root, 'Home', current === 'home' ? 'page' : null],
        [root + 'dataset-new.html', 'New dataset', current === 'dataset-new' ? 'page' : null],
        [root + 'model-new.html', 'New model', current === 'model-new' ? 'page' : null]];
      check(bar.first === '<a class="skip-link" href="#main">Skip to content</a>', `${u}: the page does not start with the skip link: ${bar.first}`);
      check(bar.headers === 1 && bar.brand === root && bar.pill === 1 && bar.user === 1,
        `${u}: the top bar is not the one of every page: ${JSON.stringify(bar)}`);
      check(JSON.stringify(bar.links) === JSON.stringify(want), `${u}: the main links are ${JSON.stringify(bar.links)}`);
      check(JSON.stringify(bar.icons) === JSON.stringify([root + 'favicon.svg']), `${u}: the page's icons are ${JSON.stringify(bar.icons)}`);
    }
  }, { needed: false });

  await step('phone width: no page is wider than the screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    const generic = [['dataset-generic-new', '/datasets/generic/new/image-segmentation'], ['dataset-segmentation', state.segDatasetUrl],
      ['model-segmentation', state.segModelUrl]].filter(([, url]) => url);
    for (const [name, url] of [['home', '/'], ['dataset-new', '/dataset-new.html'], ['model-new', '/model-new.html'],
      ['dataset', state.datasetUrl], ['model', state.modelUrl], ...generic]) {
      await page.goto(url.startsWith('http') ? url : BASE + url, { waitUntil: 'load' });
      await page.waitForTimeout(300);
      const w = await page.evaluate(() => document.documentElement.scrollWidth);
      await shot(name + '-phone');
      check(w <= 392, `${name} is ${w} pixels wide at 390`);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  }, { needed: false });

  await step('plain chromium --dump-dom shows the job names and a chart', async () => {
    const dump = async (url) => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cdigits-dump-'));
      try {
        return await new Promise((resolve, reject) => {
          const p = spawn(CHROMIUM, ['--headless', ...ARGS, `--user-data-dir=${dir}`, '--dump-dom', url],
            { stdio: ['ignore', 'pipe', 'ignore'] });
          let out = '';
          const timer = setTimeout(() => { p.kill('SIGKILL'); reject(new Error('chromium --dump-dom ' + url + ' hung')); }, 60000);
          p.stdout.on('data', (d) => { out += d; });
          p.on('close', () => { clearTimeout(timer); resolve(out); });
        });
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    };
    const home = await dump(BASE + '/');
    check(home.includes('ui-lenet') && home.includes('ui-shapes'), 'the home page DOM lacks the job names');
    const model = await dump(state.modelUrl);
    check(model.includes('ui-lenet'), 'the model page DOM lacks the model name');
    const m = /id="chart-loss"[\s\S]*?data-points="(\d+)"/.exec(model);
    check(m && Number(m[1]) > 0 && model.includes('class="uplot'), 'the model page DOM has no loss chart with points');
  }, { needed: false });

  await step('home: bulk delete removes the selected job', async () => {
    const made = await context.request.post(BASE + '/datasets/images/classification/json', { data: {
      dataset_name: 'ui-delete-me', folder_train: IMAGES, resize_channels: '1', resize_width: '28', resize_height: '28' } });
    check(made.ok(), 'cannot make a dataset to delete: ' + await made.text());
    await page.goto(BASE + '/#datasets', { waitUntil: 'load' });
    const row = page.locator('#datasets-table tr, #running-table tr', { hasText: 'ui-delete-me' });
    await page.waitForFunction(() => /ui-delete-me/.test(document.querySelector('#datasets-table').textContent), null, { timeout: 60000 });
    await page.locator('#datasets-table tr', { hasText: 'ui-delete-me' }).locator('input.sel').check();
    await page.click('#bulk-delete');
    await page.click('dialog[open] button[value=ok]');
    await page.waitForFunction(() => !/ui-delete-me/.test(document.querySelector('#datasets-table').textContent));
    check((await page.textContent('#datasets-table')).includes('ui-shapes'), 'bulk delete removed more than the selected job');
    check(await row.count() === 0, 'the deleted dataset is still listed');
  }, { needed: false });
} finally {
  await context.close().catch(() => {});
  fs.rmSync(profile, { recursive: true, force: true });
}

if (consoleErrors.length) {
  failed++;
  console.log('FAIL no JavaScript error in any page\'s console:\n     ' + consoleErrors.slice(0, 20).join('\n     '));
} else {
  passed++;
  console.log('ok   no JavaScript error in any page\'s console');
}
console.log(`screenshots: ${OUT}`);
console.log(`ui_browser: ${passed} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ''));
process.exit(failed ? 1 : 0);
