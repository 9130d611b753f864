/* New image classification dataset: DIGITS's form (folder or text lists), a preview of
 * the four resize modes drawn on canvases with the worker's arithmetic
 * (docs/formats.md, "Resizing") on a sample picture, an image of the user's, or the
 * first image of a training folder chosen with Browse (GET /browse/file), and errors
 * next to their fields. */
'use strict';

(function () {
  const {el, $, $$, api} = CD;
  const form = $('#dataset-form');

  /* ---- method tabs and dependent fields ------------------------------------------------ */

  const selectMethod = CD.tabs(['folder', 'textfile'], (m) => { $('#method').value = m; });

  function checkField(id, text) {
    return el('div', {class: 'field'}, el('label', {class: 'check-line'},
      el('input', {type: 'checkbox', id, name: id, value: 'true'}), ' ' + text));
  }

  /* The validation and test images of the folder method: a percentage of the training
   * images, or a folder of their own (folder_SPLIT) when its checkbox (has_SPLIT_folder)
   * says so. Each checkbox and folder is written where <div data-separate="SPLIT"> stands. */
  const SEPARATE = {val: ['validation', 'Validation images', '% for validation'], test: ['test', 'Test images', '% for testing']};

  function renderSeparateFolders() {
    for (const slot of $$('[data-separate]', form)) {
      const split = slot.dataset.separate, [set, label, pct] = SEPARATE[split], folder = 'folder_' + split;
      slot.replaceWith(checkField('has_' + split + '_folder', 'Separate ' + set + ' images folder'),
        CD.field(label, el('input', {type: 'text', class: 'folder', id: folder, name: folder, placeholder: '/path/to/class/folders'}),
          {hidden: true, help: 'Class folders named like the training ones; ' + pct + ' is then ignored.'}));
    }
  }

  /* The lists of the text-file method, each a file to upload (textfile_LIST) or a path on
   * the server (textfile_local_LIST), as "Use files on the server" says; an optional list
   * comes after the checkbox that asks for it. Each is written where <div data-list="LIST">
   * stands. */
  const LISTS = {
    train_images: {label: 'Training images list', path: '/path/to/train.txt',
      help: 'The format of the file should be: <path> <label> on each line, the label a line number (from 0) of the labels file.'},
    val_images: {label: 'Validation images list', path: '/path/to/val.txt', use: ['textfile_use_val', 'Validation set'], only: 'val-only'},
    test_images: {label: 'Test images list', path: '/path/to/test.txt', use: ['textfile_use_test', 'Test set'], only: 'test-only'},
    labels_file: {label: 'Labels file', path: '/path/to/labels.txt', help: 'One class name per line; line n (from 0) names label n.'},
  };

  function renderLists() {
    for (const slot of $$('[data-list]', form)) {
      const key = slot.dataset.list, l = LISTS[key];
      const upload = 'textfile_' + key, local = 'textfile_local_' + key, only = l.only ? ' ' + l.only : '';
      slot.replaceWith(...[
        l.use && checkField(...l.use),
        CD.field(l.label, el('input', {type: 'file', id: upload, name: upload, accept: '.txt,text/plain'}),
          {class: 'upload-only' + only, help: l.help}),
        CD.field(l.label, el('input', {type: 'text', id: local, name: local, placeholder: l.path, spellcheck: 'false'}),
          {class: 'local-only' + only, hidden: true}),
      ].filter(Boolean));
    }
  }

  function syncDependents() {
    for (const split of Object.keys(SEPARATE)) $('#folder_' + split).closest('.field').hidden = !$('#has_' + split + '_folder').checked;
    const local = $('#textfile_use_local_files').checked;
    const useVal = $('#textfile_use_val').checked, useTest = $('#textfile_use_test').checked;
    for (const f of $$('#panel-textfile .upload-only, #panel-textfile .local-only')) {
      const isLocal = f.classList.contains('local-only');
      let show = isLocal === local;
      if (f.classList.contains('val-only')) show = show && useVal;
      if (f.classList.contains('test-only')) show = show && useTest;
      f.hidden = !show;
    }
  }

  /* ---- resize preview -------------------------------------------------------------------- */

  const MODES = CD.imageFields.MODES;
  let example = null; /* a canvas or ImageBitmap */
  let exampleKind = 'sample'; /* 'sample', 'server' (an image of the chosen folder) or 'own' */

  function samplePicture() {
    const c = document.createElement('canvas');
    c.width = 300;
    c.height = 180;
    const g = c.getContext('2d');
    const sky = g.createLinearGradient(0, 0, 0, 120);
    sky.addColorStop(0, '#5aa6f0');
    sky.addColorStop(1, '#d8ecff');
    g.fillStyle = sky;
    g.fillRect(0, 0, 300, 180);
    g.fillStyle = '#5c9e34';
    g.fillRect(0, 120, 300, 60);
    g.fillStyle = '#ffd23f';
    g.beginPath();
    g.arc(62, 52, 30, 0, 2 * Math.PI);
    g.fill();
    g.fillStyle = '#c0392b';
    g.fillRect(170, 80, 80, 60);
    g.fillStyle = '#6d3b1f';
    g.beginPath();
    g.moveTo(160, 82);
    g.lineTo(210, 40);
    g.lineTo(260, 82);
    g.closePath();
    g.fill();
    g.fillStyle = '#fff6d5';
    g.fillRect(196, 100, 20, 40);
    g.strokeStyle = '#1d232b';
    g.lineWidth = 4;
    g.strokeRect(2, 2, 296, 176);
    return c;
  }

  function roundHalfAway(x) { return Math.sign(x) * Math.round(Math.abs(x)); }
  function odd(a) { return Math.abs(a) % 2 === 1; }

  /* The scaled size and offset of a sw x sh source in a W x H target (docs/formats.md). */
  function placement(mode, sw, sh, W, H) {
    const wr = sw / W, hr = sh / H;
    if ((sw === W && sh === H) || wr === hr || mode === 'squash') return {rw: W, rh: H, ox: 0, oy: 0};
    let rw, rh, ox = 0, oy = 0;
    const wider = wr > hr;
    if (mode === 'crop') {
      if (wider) { rh = H; rw = roundHalfAway(sw / hr); ox = -roundHalfAway((rw - W) / 2); }
      else { rw = W; rh = roundHalfAway(sh / wr); oy = -roundHalfAway((rh - H) / 2); }
    } else if (mode === 'fill') {
      if (wider) { rw = W; rh = roundHalfAway(sh / wr); if (odd(H - rh)) rh += 1; oy = (H - rh) / 2; }
      else { rh = H; rw = roundHalfAway(sw / hr); if (odd(W - rw)) rw += 1; ox = (W - rw) / 2; }
    } else {
      const r = (wr + hr) / 2;
      rw = roundHalfAway(sw / r);
      rh = roundHalfAway(sh / r);
      if (wider) { if (odd(H - rh)) rh += 1; ox = -roundHalfAway((rw - W) / 2); oy = (H - rh) / 2; }
      else { if (odd(W - rw)) rw += 1; oy = -roundHalfAway((rh - H) / 2); ox = (W - rw) / 2; }
    }
    return {rw: Math.max(1, rw), rh: Math.max(1, rh), ox, oy};
  }

  function drawPreview(canvas, mode, W, H, gray) {
    const src = example;
    const sw = src.width, sh = src.height;
    /* draw at most 192 pixels on a side; the placement is computed at the real size */
    const k = Math.min(1, 192 / Math.max(W, H));
    const cw = Math.max(1, Math.round(W * k)), ch = Math.max(1, Math.round(H * k));
    canvas.width = cw;
    canvas.height = ch;
    canvas.style.aspectRatio = W + ' / ' + H;
    const g = canvas.getContext('2d');
    const noise = g.createImageData(cw, ch);
    for (let i = 0; i < noise.data.length; i += 4) {
      noise.data[i] = Math.random() * 256;
      noise.data[i + 1] = Math.random() * 256;
      noise.data[i + 2] = Math.random() * 256;
      noise.data[i + 3] = 255;
    }
    g.putImageData(noise, 0, 0);
    const p = placement(mode, sw, sh, W, H);
    g.imageSmoothingEnabled = true;
    g.imageSmoothingQuality = 'high';
    g.drawImage(src, p.ox * k, p.oy * k, p.rw * k, p.rh * k);
    if (gray) {
      const img = g.getImageData(0, 0, cw, ch);
      const d = img.data;
      for (let i = 0; i < d.length; i += 4) {
        const y = Math.floor((299 * d[i] + 587 * d[i + 1] + 114 * d[i + 2] + 500) / 1000);
        d[i] = d[i + 1] = d[i + 2] = y;
      }
      g.putImageData(img, 0, 0);
    }
  }

  function renderPreviews() {
    const W = parseInt($('#resize_width').value, 10), H = parseInt($('#resize_height').value, 10);
    const box = $('#previews');
    if (!(W > 0 && H > 0 && W <= 4096 && H <= 4096) || !example) return;
    const gray = $('#resize_channels').value === '1';
    const mode = $('#resize_mode').value;
    if (!box.children.length) {
      for (const [m, label] of MODES) {
        const c = el('canvas', {role: 'img', 'aria-label': label + ' preview'});
        box.append(el('figure', {dataset: {mode: m}}, c, el('figcaption', {text: label})));
        c.addEventListener('click', () => { $('#resize_mode').value = m; renderPreviews(); });
      }
    }
    for (const fig of box.children) {
      const m = fig.dataset.mode;
      fig.classList.toggle('selected', m === mode);
      drawPreview(fig.querySelector('canvas'), m, W, H, gray);
      fig.querySelector('figcaption').textContent = MODES.find((x) => x[0] === m)[1] + ' ' + W + '×' + H;
    }
  }

  async function useOwnImage(file) {
    try {
      example = await CD.readPicture(file);
      exampleKind = 'own';
      $('#example-reset').hidden = false;
      CD.setText('#preview-help', 'Your image (' + example.width + '×' + example.height + '), resized in each mode. It stays in your browser.');
    } catch (e) {
      CD.toast('That file is not an image the browser can read: ' + e.message, 'error');
    }
    renderPreviews();
  }

  /* The first image of a folder chosen with Browse (or of its first class folder), unless
   * the user picked an image of their own. */
  async function previewFromFolder(listing) {
    if (exampleKind === 'own' || !listing) return;
    try {
      let sample = listing.sample;
      if (!sample && listing.dirs && listing.dirs.length) {
        const sub = await api('GET', '/browse/json?path=' + encodeURIComponent(listing.dirs[0].path));
        sample = sub.sample;
      }
      if (!sample) return;
      const res = await fetch(CD.url('browse/file?path=' + encodeURIComponent(sample)), {credentials: 'same-origin'});
      if (!res.ok) return;
      const bmp = await CD.readPicture(await res.blob());
      if (exampleKind === 'own') {
        bmp.close();
        return;
      }
      example = bmp;
      exampleKind = 'server';
      $('#example-reset').hidden = false;
      const short = sample.split('/').slice(-2).join('/');
      CD.setText('#preview-help', 'An image of the training folder (' + short + ', ' + bmp.width + '×' + bmp.height +
        '), resized in each mode.');
      renderPreviews();
    } catch (e) { /* the picture shown stays */ }
  }

  /* ---- submit ------------------------------------------------------------------------------- */

  function collect() {
    const method = $('#method').value;
    const uploads = method === 'textfile' && !$('#textfile_use_local_files').checked;
    const body = uploads ? new FormData() : {};
    const put = (k, v) => {
      if (body instanceof FormData) body.append(k, v);
      else body[k] = v;
    };
    for (const input of $$('input, select, textarea', form)) {
      if (!input.name || input.disabled) continue;
      const inOther = input.closest('[role="tabpanel"]');
      if (inOther && inOther.hidden) continue;
      if (input.closest('.field[hidden]')) continue;
      if (input.type === 'checkbox') {
        if (input.checked) put(input.name, 'true');
      } else if (input.type === 'file') {
        if (input.files && input.files[0]) put(input.name, input.files[0]);
      } else if (input.value.trim() !== '') {
        put(input.name, input.value.trim());
      }
    }
    return body;
  }

  /* a field in error on the other method's tab: that tab opens */
  function showErrorTab(e) {
    const first = Object.keys(e.fields).find((n) => form.querySelector('[name="' + CSS.escape(n) + '"]'));
    const panel = first && form.querySelector('[name="' + CSS.escape(first) + '"]').closest('[role="tabpanel"]');
    if (panel && panel.hidden) selectMethod(panel.id.replace('panel-', ''));
  }

  /* ---- clone: the fields another dataset was made with --------------------------------------- */

  async function fillFromClone(id) {
    try {
      const c = await api('GET', '/clone/' + encodeURIComponent(id) + '/json');
      const f = c.fields || {};
      if (f.method) selectMethod(f.method);
      for (const [k, v] of Object.entries(f)) {
        const input = form.querySelector('[name="' + CSS.escape(k) + '"]');
        if (!input || input.type === 'file' || input.type === 'hidden') continue;
        if (input.type === 'checkbox') input.checked = ['true', '1', 'on', 'yes'].includes(String(v).toLowerCase());
        else input.value = Array.isArray(v) ? v.join(',') : v;
      }
      syncDependents();
      renderPreviews();
      CD.toast('Filled in from dataset ' + (f.dataset_name || id));
    } catch (e) {
      CD.toast('Cannot clone ' + id + ': ' + e.message, 'error');
    }
  }

  /* ---- start ------------------------------------------------------------------------------------- */

  CD.initTopbar();
  CD.imageFields.render(form);
  renderSeparateFolders();
  renderLists();
  CD.jobform.init({form, kind: 'dataset', path: '/datasets/images/classification/json', collect, onErrors: showErrorTab,
    created: (job) => ({text: 'Created ' + job.name, href: CD.url('datasets/' + encodeURIComponent(job.id))})});
  CD.browse.init({onChoose: (input, listing) => {
    if (input.id === 'folder_train' || input.id === 'textfile_train_folder') previewFromFolder(listing);
  }});
  for (const id of ['has_val_folder', 'has_test_folder', 'textfile_use_local_files', 'textfile_use_val', 'textfile_use_test']) {
    $('#' + id).addEventListener('change', syncDependents);
  }
  for (const id of ['resize_width', 'resize_height', 'resize_mode', 'resize_channels']) {
    $('#' + id).addEventListener('input', renderPreviews);
    $('#' + id).addEventListener('change', renderPreviews);
  }
  $('#example-file').addEventListener('change', (ev) => { if (ev.target.files[0]) useOwnImage(ev.target.files[0]); });
  $('#example-reset').addEventListener('click', () => {
    example = samplePicture();
    exampleKind = 'sample';
    $('#example-file').value = '';
    $('#example-reset').hidden = true;
    CD.setText('#preview-help', 'A wide sample picture, resized to the size above in each mode.');
    renderPreviews();
  });
  api('GET', '/completed_jobs/json').then(CD.jobform.groups).catch(() => {});

  example = samplePicture();
  selectMethod('folder');
  syncDependents();
  renderPreviews();
  const clone = CD.param('clone');
  if (clone) fillFromClone(clone);
})();
