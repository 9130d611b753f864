/* A dataset's page: counts per split, the class distribution, the mean image, the
 * creation log, and an explorer that pages through the records of a split. */
'use strict';

(function () {
  const {el, $, clear, api} = CD;
  const P = CD.jobpage;
  const id = P.id;
  const SPLITS = ['train', 'val', 'test'];
  const fileUrl = (name) => CD.url('files/' + encodeURIComponent(id) + '/' + name);

  let job = null;
  let sourceFields = null;

  /* ---- summary ------------------------------------------------------------------------ */

  function tile(k, v) {
    return el('div', {class: 'tile'}, el('div', {class: 'k', text: k}), el('div', {class: 'v', text: v}));
  }

  function renderSummary() {
    const splits = job.splits || {};
    const tiles = clear($('#split-tiles'));
    const planned = {};
    for (const t of job.CreateDbTasks || []) planned[t.name.replace(/^Create DB \((\w+)\)$/, '$1')] = t.entries;
    for (const s of SPLITS) {
      const n = splits[s] !== undefined ? splits[s] : planned[s];
      if (n !== undefined || s !== 'test') tiles.append(tile({train: 'Training images', val: 'Validation images', test: 'Test images'}[s], CD.count(n)));
    }
    tiles.append(tile('Classes', job.labels ? CD.count(job.labels.length) : '–'));
    if (job.skipped) tiles.append(tile('Files skipped', CD.count(job.skipped)));

    const dims = job.image_dims || [];
    const kv = clear($('#summary'));
    const row = (k, v) => { if (v !== null && v !== undefined && v !== '') kv.append(el('dt', {text: k}), el('dd', {}, v)); };
    row('Image size', dims.length ? dims[1] + '×' + dims[0] + ' pixels' : null);
    row('Image type', dims.length ? (dims[2] === 1 ? 'Grayscale (1 channel)' : 'Color (3 channels)') : null);
    row('Resize transformation', {squash: 'Squash', crop: 'Crop', fill: 'Fill', half_crop: 'Half crop, half fill'}[job.resize_mode] || job.resize_mode);
    row('Encoding', {png: 'PNG (lossless)', jpg: 'JPEG (lossy)', none: 'None (raw pixels)'}[job.encoding] || job.encoding);
    if (sourceFields) {
      const f = sourceFields;
      if (f.method === 'textfile') {
        row('Images', 'from text lists');
      } else {
        row('Training images', el('span', {class: 'mono', text: f.folder_train || '–'}));
        if (f.folder_val) row('Validation images', el('span', {class: 'mono', text: f.folder_val}));
        else row('% for validation', (f.folder_pct_val !== undefined ? f.folder_pct_val : 25) + '%');
        if (f.folder_test) row('Test images', el('span', {class: 'mono', text: f.folder_test}));
        else row('% for testing', (f.folder_pct_test !== undefined ? f.folder_pct_test : 0) + '%');
      }
    }
    row('Job folder', el('span', {class: 'mono small', text: job.directory}));
    $('#new-model').href = CD.url('model-new.html?dataset=' + encodeURIComponent(id));
    $('#new-model').hidden = job.status !== 'Done';
  }

  function renderMean() {
    const box = clear($('#mean-box'));
    const files = clear($('#files'));
    if (job.status !== 'Done' || !job.mean_file) {
      box.append(el('p', {class: 'muted', text: job.running ? 'The mean image appears when the dataset is complete.' : 'No mean image.'}));
      return;
    }
    box.append(el('img', {class: 'mean-image', src: fileUrl('mean.png'), alt: 'Mean of the training images', width: 160, height: 160}));
    files.append('Files: ', el('a', {href: fileUrl(job.labels_file || 'labels.txt'), text: 'labels.txt'}), ' · ',
      el('a', {href: fileUrl(job.mean_file), download: '', text: 'mean.bin'}));
    for (const s of SPLITS) {
      if ((job.splits || {})[s]) files.append(' · ', el('a', {href: fileUrl(s + '.db'), download: '', text: s + '.db'}));
    }
  }

  /* ---- class distribution ---------------------------------------------------------------- */

  function renderClasses() {
    const classes = (job.classes || []).map((c, i) => Object.assign({index: i}, c));
    const box = clear($('#class-bars'));
    const legend = clear($('#class-legend'));
    if (!classes.length) {
      box.append(el('p', {class: 'muted', text: job.running ? 'The classes appear when the folders are read.' : 'No class.'}));
      return;
    }
    const used = SPLITS.filter((s) => classes.some((c) => c[s] > 0));
    for (const s of used) legend.append(el('span', {}, el('i', {class: 'seg-' + s}), {train: 'train', val: 'validation', test: 'test'}[s]));
    const total = (c) => used.reduce((a, s) => a + (c[s] || 0), 0);
    const max = Math.max(1, ...classes.map(total));
    if ($('#class-sort').value === 'count') classes.sort((a, b) => total(b) - total(a));
    for (const c of classes) {
      const track = el('div', {class: 'bar-track', role: 'img',
        'aria-label': c.label + ': ' + used.map((s) => (c[s] || 0) + ' ' + s).join(', ')});
      for (const s of used) {
        const seg = el('span', {class: 'seg-' + s, title: (c[s] || 0) + ' ' + s});
        seg.style.width = (100 * (c[s] || 0) / max) + '%';
        track.append(seg);
      }
      box.append(el('div', {class: 'bar-row'},
        el('span', {class: 'lbl', title: c.label, text: c.index + ' ' + c.label}), track,
        el('span', {class: 'num small', text: used.map((s) => c[s] || 0).join(' / ')})));
    }
  }

  /* ---- explorer: the .db of a split, read in the browser ------------------------------------
   * docs/formats.md: a 128-byte header, the records (raw planar CHW, or PNG/JPEG files with
   * an index table of u64 offset and size), int32 labels. The file comes whole through
   * /files/, so only splits up to MAX_DB bytes are shown. */

  const MAX_DB = 96 * 1024 * 1024;
  const dbs = {};
  const ex = {split: null, label: -1, page: 0, size: 48, list: []};

  async function readDb(split) {
    if (dbs[split]) return dbs[split];
    const res = await fetch(fileUrl(split + '.db'), {credentials: 'same-origin'});
    if (!res.ok) throw new Error('cannot read ' + split + '.db (HTTP ' + res.status + ')');
    const size = Number(res.headers.get('Content-Length') || 0);
    if (size > MAX_DB) {
      res.body.cancel();
      throw new Error(split + '.db is ' + CD.bytes(size) + ', more than this page reads (' + CD.bytes(MAX_DB) + ').');
    }
    const buf = await res.arrayBuffer();
    const v = new DataView(buf);
    const magic = String.fromCharCode(v.getUint8(0), v.getUint8(1), v.getUint8(2), v.getUint8(3));
    if (magic !== 'CDDB') throw new Error(split + '.db is not a cdigits .db file');
    const u64 = (o) => Number(v.getBigUint64(o, true));
    const db = {
      buf, v,
      channels: v.getUint32(12, true), height: v.getUint32(16, true), width: v.getUint32(20, true),
      encoding: v.getUint32(24, true), count: u64(32), dataOffset: u64(40),
      indexOffset: u64(56), labelsOffset: u64(64),
    };
    db.labels = new Int32Array(buf.slice(db.labelsOffset, db.labelsOffset + 4 * db.count));
    dbs[split] = db;
    return db;
  }

  async function drawRecord(db, i, canvas) {
    canvas.width = db.width;
    canvas.height = db.height;
    const g = canvas.getContext('2d');
    if (db.encoding === 0) {
      const n = db.width * db.height, c = db.channels;
      const px = new Uint8Array(db.buf, db.dataOffset + i * n * c, n * c);
      const img = g.createImageData(db.width, db.height);
      for (let p = 0; p < n; p++) {
        img.data[4 * p] = px[p];
        img.data[4 * p + 1] = c === 3 ? px[n + p] : px[p];
        img.data[4 * p + 2] = c === 3 ? px[2 * n + p] : px[p];
        img.data[4 * p + 3] = 255;
      }
      g.putImageData(img, 0, 0);
      return;
    }
    const off = Number(db.v.getBigUint64(db.indexOffset + 16 * i, true));
    const len = Number(db.v.getBigUint64(db.indexOffset + 16 * i + 8, true));
    const blob = new Blob([new Uint8Array(db.buf, off, len)], {type: db.encoding === 1 ? 'image/png' : 'image/jpeg'});
    const bmp = await createImageBitmap(blob);
    g.drawImage(bmp, 0, 0);
    bmp.close();
  }

  function showNote(text) {
    const n = $('#ex-note');
    n.hidden = !text;
    n.textContent = text || '';
  }

  async function showPage() {
    const gallery = clear($('#ex-gallery'));
    showNote('');
    ex.split = $('#ex-split').value;
    ex.label = parseInt($('#ex-class').value, 10);
    ex.size = parseInt($('#ex-size').value, 10);
    if (!ex.split) return;
    let db;
    try {
      CD.setText('#ex-page', 'Reading ' + ex.split + '.db…');
      $('#ex-pager').hidden = false;
      db = await readDb(ex.split);
    } catch (e) {
      $('#ex-pager').hidden = true;
      showNote(e.message);
      return;
    }
    ex.list = [];
    for (let i = 0; i < db.count; i++) if (ex.label < 0 || db.labels[i] === ex.label) ex.list.push(i);
    const pages = Math.max(1, Math.ceil(ex.list.length / ex.size));
    ex.page = Math.min(ex.page, pages - 1);
    CD.setText('#ex-page', 'Page ' + (ex.page + 1) + ' of ' + pages + ' · ' + CD.count(ex.list.length) + ' image' + (ex.list.length === 1 ? '' : 's'));
    $('#ex-prev').disabled = ex.page === 0;
    $('#ex-next').disabled = ex.page >= pages - 1;
    const labels = job.labels || [];
    const slice = ex.list.slice(ex.page * ex.size, (ex.page + 1) * ex.size);
    for (const i of slice) {
      const name = labels[db.labels[i]] !== undefined ? labels[db.labels[i]] : String(db.labels[i]);
      const canvas = el('canvas', {role: 'img', 'aria-label': ex.split + ' image ' + i + ', class ' + name});
      gallery.append(el('figure', {}, canvas, el('figcaption', {title: name, text: '#' + i + ' ' + name})));
      drawRecord(db, i, canvas).catch((e) => { canvas.replaceWith(el('span', {class: 'small muted', text: 'cannot decode: ' + e.message})); });
    }
    if (!slice.length) showNote('No image of this class in the ' + ex.split + ' split.');
  }

  function renderExplorerControls() {
    const splitSel = $('#ex-split');
    const keep = splitSel.value;
    clear(splitSel);
    for (const s of SPLITS) {
      const n = (job.splits || {})[s];
      if (n) splitSel.append(el('option', {value: s, text: {train: 'Training', val: 'Validation', test: 'Test'}[s] + ' (' + CD.count(n) + ')'}));
    }
    if (keep) splitSel.value = keep;
    const classSel = $('#ex-class');
    const keepC = classSel.value;
    clear(classSel).append(el('option', {value: -1, text: 'All classes'}));
    (job.labels || []).forEach((l, i) => classSel.append(el('option', {value: i, text: i + ' ' + l})));
    classSel.value = keepC || '-1';
    const ready = job.status === 'Done' && splitSel.options.length > 0;
    $('#ex-show').disabled = !ready;
    if (!ready) showNote(job.running ? 'The images can be explored once the dataset is done.' : 'This dataset has no records to show.');
    else if ($('#ex-note').textContent.startsWith('The images can')) showNote('');
    /* a small split is shown at once; a big one waits for the button (it is read whole) */
    const n = (job.splits || {})[splitSel.value] || 0, dims = job.image_dims || [0, 0, 0];
    if (ready && !ex.split && n * dims[0] * dims[1] * dims[2] <= 8 * 1024 * 1024) showPage();
  }

  /* ---- models of this dataset -------------------------------------------------------------- */

  async function loadModels() {
    try {
      const d = await api('GET', '/completed_jobs/json');
      const models = [].concat(d.running, d.models).filter((m) => m.dataset_id === id);
      const ul = clear($('#models-list'));
      if (!models.length) ul.append(el('li', {class: 'muted', text: 'None yet.'}));
      for (const m of models) ul.append(el('li', {}, el('a', {href: CD.jobUrl(m), text: m.name}), ' ', CD.badge(m.status, m.status_css)));
    } catch (e) { /* the list is a convenience */ }
  }

  /* ---- live ----------------------------------------------------------------------------------- */

  function render(j) {
    job = j;
    P.setJob(j);
    renderSummary();
    renderMean();
    renderClasses();
    renderExplorerControls();
    const card = $('#progress-card');
    card.hidden = !j.running;
    if (j.running) setProgress(j.progress, j.tasks && j.tasks[0] ? j.tasks[0].stage : null);
  }

  function setProgress(pct, stage) {
    CD.setProgress($('#job-progress'), pct);
    CD.setText('#job-pct', Math.round(pct || 0) + '%');
    CD.setText('#progress-text', stage === 'parse' ? 'Reading the folders…' : stage === 'create' ? 'Writing the records…' : '');
  }

  const reloadSoon = CD.debounce(() => P.reload().then(render).catch(() => {}), 200);

  P.init();
  $('#class-sort').addEventListener('change', renderClasses);
  $('#ex-show').addEventListener('click', () => { ex.page = 0; showPage(); });
  $('#ex-split').addEventListener('change', () => { ex.page = 0; if (ex.split) showPage(); });
  $('#ex-class').addEventListener('change', () => { ex.page = 0; if (ex.split) showPage(); });
  $('#ex-size').addEventListener('change', () => { ex.page = 0; if (ex.split) showPage(); });
  $('#ex-prev').addEventListener('click', () => { ex.page = Math.max(0, ex.page - 1); showPage(); });
  $('#ex-next').addEventListener('click', () => { ex.page++; showPage(); });

  const first = CD.getInitial('/datasets/' + encodeURIComponent(id) + '/json');
  if (first) render(first);
  else P.reload().then(render).catch(P.notFound);
  api('GET', '/clone/' + encodeURIComponent(id) + '/json').then((c) => { sourceFields = c.fields || {}; if (job) renderSummary(); }).catch(() => {});
  P.loadLog();
  loadModels();

  CD.events('/jobs/' + encodeURIComponent(id) + '/events', {
    job: (j) => render(j),
    status: reloadSoon,
    dataset: reloadSoon,
    progress: (ev) => setProgress(ev.percentage, ev.stage),
    log: (ev) => P.logLine(ev),
    job_removed: () => { CD.toast('This dataset was deleted'); setTimeout(() => { location.href = CD.url(''); }, 1500); },
  });
})();
