/* A dataset's page: counts per split, the class distribution, the mean image, the
 * creation log, and an explorer that pages through the records of a split (a generic
 * dataset's with their label records: label images beside or over the images, boxes
 * over them, targets under them). */
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

    const dims = job.image_dims || job.feature_dims || [];
    const kv = clear($('#summary'));
    const row = (k, v) => { if (v !== null && v !== undefined && v !== '') kv.append(el('dt', {text: k}), el('dd', {}, v)); };
    if (job.extension_id) row('Extension', job.extension_id + ' (' + job.task + ')');
    row('Image size', dims.length ? dims[1] + '×' + dims[0] + ' pixels' : null);
    row('Image type', dims.length ? (dims[2] === 1 ? 'Grayscale (1 channel)' : 'Color (3 channels)') : null);
    row('Resize transformation', {squash: 'Squash', crop: 'Crop', fill: 'Fill', half_crop: 'Half crop, half fill'}[job.resize_mode] || job.resize_mode);
    row('Encoding', {png: 'PNG (lossless)', jpg: 'JPEG (lossy)', none: 'None (raw pixels)'}[job.encoding] || job.encoding);
    if (sourceFields && job.task === 'detection') {
      const f = sourceFields;
      const size = (w, h) => (f[w] && f[h] ? f[w] + '×' + f[h] + ' pixels' : 'none');
      row('Training images', el('span', {class: 'mono', text: f.train_image_folder || '–'}));
      row('Training labels', el('span', {class: 'mono', text: f.train_label_folder || '–'}));
      if (f.val_image_folder) row('Validation images', el('span', {class: 'mono', text: f.val_image_folder}));
      if (f.val_label_folder) row('Validation labels', el('span', {class: 'mono', text: f.val_label_folder}));
      row('Padding', size('padding_image_width', 'padding_image_height'));
      row('Resize', size('resize_image_width', 'resize_image_height'));
      row('Classes from', f.custom_classes ? 'custom_classes: ' + f.custom_classes : "KITTI's default mapping");
    } else if (sourceFields && job.task === 'segmentation') {
      const f = sourceFields;
      row('Feature images', el('span', {class: 'mono', text: f.feature_folder || '–'}));
      row('Label images', el('span', {class: 'mono', text: f.label_folder || '–'}));
    } else if (sourceFields) {
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
    $('#new-model').href = CD.url('model-new.html?' + (job.extension_id ? 'generic=1&' : '') + 'dataset=' + encodeURIComponent(id));
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
    for (const t of job.create_db_tasks || []) {
      if (t.entry_count) files.append(' · ', el('a', {href: fileUrl(t.label_db_path), download: '', text: t.label_db_path}));
    }
    if (job.palette_file) files.append(' · ', el('a', {href: fileUrl(job.palette_file), text: job.palette_file}));
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

  /* ---- explorer: pages of a split from the server ----------------------------------------------
   * GET /datasets/ID/explore/json?split&label&page&size answers {total, items: [{index, label,
   * url}]}; each url is the record as an image (PNG, or JPEG for jpg datasets). Only the page
   * shown travels, so a split of any size can be explored. */

  const ex = {split: null, label: -1, page: 0, size: 48, seq: 0};

  /* Record INDEX of a generic dataset's split with its label record
   * (GET /datasets/ID/labels/SPLIT/INDEX): a segmentation label image (coloured by the
   * dataset's palette) as the view select says (image, label, side by side, overlay), or
   * the targets of a regression or pairs record in the caption. */
  function labelFigure(it, img, caption, dims) {
    const labelUrl = CD.url('datasets/' + encodeURIComponent(id) + '/labels/' + encodeURIComponent(ex.split) + '/' + it.index);
    if (job.task === 'detection') return boxesFigure(it, img, caption, dims);
    if (job.task !== 'segmentation') {
      api('GET', '/datasets/' + encodeURIComponent(id) + '/labels/' + encodeURIComponent(ex.split) + '/' + it.index).then((d) => {
        const v = d.values || [];
        const names = job.task === 'pairs' && job.labels ? v.map((x) => job.labels[Math.round(x)]) : null;
        caption.textContent = '#' + it.index + ' ' + (names && names.every(Boolean) ? names.join(' ') : v.map((x) => +x.toPrecision(4)).join(', '));
        caption.title = caption.textContent;
      }).catch(() => {});
      return el('figure', {}, img, caption);
    }
    const view = $('#ex-view').value;
    if (view === 'image') return el('figure', {}, img, caption);
    const label = el('img', {src: labelUrl, alt: 'label image of ' + ex.split + ' record ' + it.index, loading: 'lazy', decoding: 'async'});
    if (view === 'label') return el('figure', {}, label, caption);
    if (view === 'side') return el('figure', {class: 'with-label'}, el('div', {class: 'label-pair'}, img, label), caption);
    label.classList.add('label-over');
    label.style.opacity = String($('#ex-opacity').value / 100);
    return el('figure', {}, el('div', {class: 'label-overlay'}, img, label), caption);
  }

  /* A detection record's boxes over its image: its label record is 1 x B x 16 floats, a
   * row per box (x, y, w, h in the stored image's pixels, ..., class at 5; class -1: no
   * box), drawn in an SVG of the image's size laid over it as object-fit lays the image.
   * A class's colour is BOX_COLOURS[class - 1]; dontcare (0) is dashed. */
  const BOX_COLOURS = ['#ffd24d', '#4dd2ff', '#ff4dff', '#7dff4d', '#ff9d4d', '#4d7dff', '#ff4d4d', '#ffffff'];

  function boxesFigure(it, img, caption, dims) {
    const overlay = el('div', {class: 'label-overlay'}, img);
    const fig = el('figure', {class: 'det-record'}, overlay, caption);
    api('GET', '/datasets/' + encodeURIComponent(id) + '/labels/' + encodeURIComponent(ex.split) + '/' + it.index).then((d) => {
      const [, rows, width] = d.shape || [1, 0, 16];
      const v = d.values || [];
      const [h, w] = dims;
      const names = job.labels || [];
      const svg = el('svg', {class: 'boxes', viewBox: '0 0 ' + (w || 1) + ' ' + (h || 1), 'aria-hidden': 'true'});
      const counts = new Map();
      for (let k = 0; k < rows; k++) {
        const r = v.slice(k * width, (k + 1) * width);
        const cls = Math.round(r[5]);
        if (cls < 0) continue;
        const name = names[cls] !== undefined ? names[cls] : 'class ' + cls;
        counts.set(name, (counts.get(name) || 0) + 1);
        svg.append(el('rect', {svg: true, x: r[0], y: r[1], width: r[2], height: r[3],
          class: cls === 0 ? 'box dontcare' : 'box', stroke: cls === 0 ? '#d0d0d0' : BOX_COLOURS[(cls - 1) % BOX_COLOURS.length],
          'data-class': cls}));
      }
      overlay.append(svg);
      const text = [...counts].map(([n, c]) => c + ' ' + n).join(', ') || 'no boxes';
      caption.textContent = '#' + it.index + ' ' + text;
      caption.title = caption.textContent;
      fig.dataset.boxes = String(svg.childElementCount);
    }).catch((e) => { caption.textContent = '#' + it.index + ' (labels: ' + e.message + ')'; });
    return fig;
  }

  function showNote(text) {
    const n = $('#ex-note');
    n.hidden = !text;
    n.textContent = text || '';
  }

  async function showPage() {
    showNote('');
    ex.split = $('#ex-split').value;
    ex.label = parseInt($('#ex-class').value, 10);
    ex.size = parseInt($('#ex-size').value, 10);
    if (!ex.split) return;
    const seq = ++ex.seq; /* a newer request wins over a slower older one */
    let d;
    try {
      CD.setText('#ex-page', 'Reading the ' + ex.split + ' records…');
      $('#ex-pager').hidden = false;
      d = await api('GET', '/datasets/' + encodeURIComponent(id) + '/explore/json?split=' + encodeURIComponent(ex.split) +
        '&label=' + ex.label + '&page=' + ex.page + '&size=' + ex.size);
    } catch (e) {
      if (seq !== ex.seq) return;
      $('#ex-pager').hidden = true;
      clear($('#ex-gallery'));
      showNote(e.message);
      return;
    }
    if (seq !== ex.seq) return;
    const pages = Math.max(1, Math.ceil(d.total / ex.size));
    if (ex.page > pages - 1 && d.total > 0) {
      ex.page = pages - 1;
      showPage();
      return;
    }
    CD.setText('#ex-page', 'Page ' + (ex.page + 1) + ' of ' + pages + ' · ' + CD.count(d.total) + ' image' + (d.total === 1 ? '' : 's'));
    $('#ex-prev').disabled = ex.page === 0;
    $('#ex-next').disabled = ex.page >= pages - 1;
    const labels = job.labels || [];
    const [h, w] = d.image_dims || [0, 0];
    const gallery = clear($('#ex-gallery'));
    for (const it of d.items) {
      const name = labels[it.label] !== undefined ? labels[it.label] : String(it.label);
      const img = el('img', {src: it.url, alt: ex.split + ' image ' + it.index + ', class ' + name, loading: 'lazy',
        width: w || null, height: h || null, decoding: 'async'});
      img.addEventListener('error', () => img.replaceWith(el('span', {class: 'small muted', text: 'cannot load record ' + it.index})), {once: true});
      if (job.extension_id) {
        gallery.append(labelFigure(it, img, el('figcaption', {text: '#' + it.index}), [h, w]));
        continue;
      }
      gallery.append(el('figure', {}, img, el('figcaption', {title: name, text: '#' + it.index + ' ' + name})));
    }
    if (!d.items.length) showNote('No image of this class in the ' + ex.split + ' split.');
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
    /* a generic dataset's records are not of a class; a segmentation one's have label images */
    classSel.closest('.field').hidden = !!job.extension_id;
    $('#ex-view').closest('.field').hidden = job.task !== 'segmentation';
    $('#ex-opacity').closest('.field').hidden = job.task !== 'segmentation' || $('#ex-view').value !== 'overlay';
    $('#ex-gallery').classList.toggle('wide', job.task === 'segmentation' && $('#ex-view').value === 'side');
    const ready = job.status === 'Done' && splitSel.options.length > 0;
    $('#ex-show').disabled = !ready;
    if (!ready) showNote(job.running ? 'The images can be explored once the dataset is done.' : 'This dataset has no records to show.');
    else if ($('#ex-note').textContent.startsWith('The images can')) showNote('');
    /* the first page comes at once: only its records travel */
    if (ready && !ex.split) showPage();
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

  const reloadSoon = CD.debounce(() => P.reload().then((j) => j && render(j)).catch(() => {}), 200);

  P.init();
  $('#class-sort').addEventListener('change', renderClasses);
  $('#ex-show').addEventListener('click', () => { ex.page = 0; showPage(); });
  $('#ex-split').addEventListener('change', () => { ex.page = 0; if (ex.split) showPage(); });
  $('#ex-class').addEventListener('change', () => { ex.page = 0; if (ex.split) showPage(); });
  $('#ex-size').addEventListener('change', () => { ex.page = 0; if (ex.split) showPage(); });
  $('#ex-view').addEventListener('change', () => { renderExplorerControls(); if (ex.split) showPage(); });
  $('#ex-opacity').addEventListener('input', () => {
    for (const i of document.querySelectorAll('#ex-gallery img.label-over')) i.style.opacity = String($('#ex-opacity').value / 100);
  });
  $('#ex-prev').addEventListener('click', () => { ex.page = Math.max(0, ex.page - 1); showPage(); });
  $('#ex-next').addEventListener('click', () => { ex.page++; showPage(); });

  const first = CD.getInitial('/datasets/' + encodeURIComponent(id) + '/json');
  if (first) render(first);
  else P.reload().then((j) => j && render(j)).catch(P.notFound);
  api('GET', '/clone/' + encodeURIComponent(id) + '/json').then((c) => { sourceFields = c.fields || {}; if (job) renderSummary(); }).catch(() => {});
  P.loadLog();
  loadModels();

  CD.events('/jobs/' + encodeURIComponent(id) + '/events', {
    job: (j) => { P.supersede(); render(j); },
    open: () => P.loadLog(), /* the lines written before the stream opened */
    status: reloadSoon,
    dataset: reloadSoon,
    progress: (ev) => setProgress(ev.percentage, ev.stage),
    log: (ev) => P.logLine(ev),
    job_removed: () => { CD.toast('This dataset was deleted'); setTimeout(() => { location.href = CD.url(''); }, 1500); },
  });
})();
