/* Using a model (classify.html?job=<id>[&epoch=E]): one image with its predictions and,
 * on request, each layer's activations and weights; a list with its accuracy,
 * confusion matrix (a heat map) and per-image answers; the top images per class; and
 * the snapshot's download. Everything goes through the JSON API of docs/inference.md. */
'use strict';

(function () {
  const {el, svg, $, $$, clear, api} = CD;
  const id = CD.param('job') || CD.param('id') || '';
  const enc = encodeURIComponent(id);
  let labels = [];
  let task = 'classification'; /* the dataset's: a segmentation or regression model is asked by its outputs */

  function pct(v) { return (Math.round(v * 100) / 100).toFixed(2); }
  function epoch() { return $('#snapshot_epoch').value; }
  function imageUrl(path) { return CD.url('browse/file?path=' + encodeURIComponent(path)); }

  function fail(message) {
    const box = $('#page-error');
    box.textContent = message;
    box.hidden = false;
  }

  /* ---- the model and its snapshots ---------------------------------------------------- */

  function setDownloads() {
    const e = encodeURIComponent(epoch());
    for (const [idSel, ext] of [['#dl-tgz', 'tar.gz'], ['#dl-zip', 'zip'], ['#dl-tar', 'tar']])
      $(idSel).href = CD.url('models/' + enc + '/download.' + ext + '?epoch=' + e);
  }

  async function loadModel() {
    if (!id) {
      fail('No model given: open this page from a model\'s page (classify.html?job=<model id>).');
      return;
    }
    let job;
    try {
      job = await api('GET', '/models/' + enc + '/json');
    } catch (e) {
      fail(e.message);
      return;
    }
    document.title = job.name + ' · Use a model · cdigits';
    CD.setText('#model-name', job.name);
    $('#model-link').href = CD.url('models/' + enc);
    CD.setText('#model-meta', (job.dataset_id ? 'Trained on dataset ' + job.dataset_id : 'Pretrained model') + ' · ' + job.status);
    /* the task first: the snapshot list, which every form needs, is filled once it is known */
    task = 'classification';
    if (job.extension_id && job.dataset_id) {
      try {
        const ds = await api('GET', '/datasets/' + encodeURIComponent(job.dataset_id) + '/json');
        task = ds.task || task;
      } catch (e) { /* the dataset is gone: classification it is */ }
    }
    if (task !== 'classification') $('#show_visualizations').closest('label').hidden = true;
    const sel = clear($('#snapshot_epoch'));
    const snaps = (job.snapshot_files || []).slice().sort((a, b) => b.iteration - a.iteration);
    for (const s of snaps) {
      const e = Math.round(s.epoch * 1000) / 1000;
      sel.append(el('option', {value: String(s.epoch), text: e + ' (iteration ' + CD.count(s.iteration) + ')'}));
    }
    const want = CD.param('epoch');
    if (want) sel.value = want;
    if (!snaps.length) fail('This model has no snapshot yet; classify once its first epoch is done.');
    setDownloads();
  }

  /* ---- one image ------------------------------------------------------------------------- */

  function bars(target, predictions) {
    clear(target);
    for (const [label, p] of predictions) {
      const fill = el('span', {class: 'seg-train'});
      fill.style.width = Math.max(0, Math.min(100, p)) + '%';
      target.append(el('div', {class: 'bar-row'},
        el('span', {class: 'lbl', title: label, text: label}),
        el('span', {class: 'bar-track', role: 'img', 'aria-label': label + ' ' + pct(p) + ' percent'}, fill),
        el('span', {class: 'num', text: pct(p) + ' %'})));
    }
  }

  async function preview(file, path) {
    const canvas = $('#one-preview');
    const ctx = canvas.getContext('2d');
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    CD.setText('#one-caption', file ? file.name : path);
    try {
      let bitmap = null;
      if (file) bitmap = await CD.readPicture(file);
      else {
        const blob = await fetch(imageUrl(path), {credentials: 'same-origin'}).then((r) => (r.ok ? r.blob() : null));
        if (blob) bitmap = await CD.readPicture(blob);
      }
      if (!bitmap) return;
      const s = Math.min(canvas.width / bitmap.width, canvas.height / bitmap.height);
      const w = bitmap.width * s, h = bitmap.height * s;
      ctx.imageSmoothingEnabled = s < 1;
      ctx.drawImage(bitmap, (canvas.width - w) / 2, (canvas.height - h) / 2, w, h);
    } catch (e) { /* a preview is a nicety: the classification says what went wrong */ }
  }

  /* 20 bars of a histogram as a small SVG. */
  function histogram(h) {
    const counts = h[0] || [], max = Math.max(1, ...counts), W = 120, H = 28, bw = W / Math.max(1, counts.length);
    const rects = counts.map((c, i) => svg('rect', {x: i * bw, y: H - (c / max) * H, width: Math.max(1, bw - 1), height: (c / max) * H, fill: '#1d6fd1'}));
    return svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img',
      'aria-label': 'values from ' + CD.num(h[2] ? h[2][0] : 0) + ' to ' + CD.num(h[2] ? h[2][2] : 0)}, rects);
  }

  function visualizations(list) {
    const tbody = clear($('#vis-table tbody'));
    for (const v of list) {
      const img = el('img', {src: v.image, alt: v.vis_type + ' of ' + v.name, loading: 'lazy', class: 'mean-image'});
      img.style.width = 'auto';
      img.style.height = 'auto';
      img.style.maxWidth = '260px';
      img.style.maxHeight = '260px';
      const st = v.data_stats || {};
      tbody.append(el('tr', {},
        el('td', {class: 'mono', text: v.name}),
        el('td', {class: 'small', text: v.vis_type + ' ' + (st.shape ? st.shape.join('×') : '')}),
        el('td', {}, el('a', {href: v.image, target: '_blank', rel: 'noopener'}, img)),
        el('td', {class: 'num', text: CD.num(st.mean, 3)}),
        el('td', {class: 'num', text: CD.num(st.stddev, 3)}),
        el('td', {}, st.histogram ? histogram(st.histogram) : ''),
        el('td', {class: 'num', text: v.param_count !== undefined ? CD.count(v.param_count) : ''})));
    }
    $('#visualizations').hidden = list.length === 0;
  }

  /* ---- one image of a generic model: its outputs by name, a segmentation's mask -------- */

  function shapeOf(v) { const s = []; for (; Array.isArray(v); v = v[0]) s.push(v.length); return s; }
  function flat(v, out, max) {
    if (!Array.isArray(v)) out.push(v);
    else for (const e of v) { if (out.length > max) break; flat(e, out, max); }
    return out;
  }

  function outputsTable(outputs) {
    const tbody = clear($('#out-table tbody'));
    for (const [name, v] of Object.entries(outputs || {})) {
      const vals = flat(v, [], 24);
      const text = vals.slice(0, 24).map((x) => (x === null ? 'NaN' : CD.num(x, 4))).join(', ') + (vals.length > 24 ? ', …' : '');
      tbody.append(el('tr', {}, el('td', {class: 'mono', text: name}), el('td', {text: shapeOf(v).join('×')}),
        el('td', {class: 'mono small', text: text})));
    }
  }

  /* The page's Content-Security-Policy loads images from the server only (no data: or
   * blob: URL): the image and the mask (a PNG data URL) are drawn into canvases instead,
   * which take the places of the page's two <img>s. */
  function canvasOf(sel) {
    const node = $(sel);
    if (node.tagName === 'CANVAS') return node;
    const canvas = el('canvas', {id: node.id, role: 'img', 'aria-label': node.alt});
    node.replaceWith(canvas);
    return canvas;
  }

  function dataUrlBitmap(url) {
    const bytes = Uint8Array.from(atob(url.slice(url.indexOf(',') + 1)), (c) => c.charCodeAt(0));
    return createImageBitmap(new Blob([bytes], {type: 'image/png'}));
  }

  function draw(canvas, bitmap, w, h) {
    canvas.width = w;
    canvas.height = h;
    const ctx = canvas.getContext('2d');
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(bitmap, 0, 0, w, h);
  }

  async function showMask(r, file, path) {
    $('#seg-view').hidden = !r.mask;
    if (!r.mask) return;
    const stack = $('#seg-stack'), image = canvasOf('#seg-image'), mask = canvasOf('#seg-mask');
    Object.assign(stack.style, {position: 'relative', display: 'inline-block', maxWidth: '100%'});
    /* drawn up to 512 pixels wide, shown no wider than the page (a phone's) */
    Object.assign(image.style, {display: 'block', maxWidth: '100%', height: 'auto'});
    Object.assign(mask.style, {position: 'absolute', left: '0', top: '0', width: '100%', height: '100%', imageRendering: 'pixelated'});
    mask.style.opacity = $('#seg-opacity').value / 100;
    const tbody = clear($('#seg-legend tbody'));
    for (const c of r.class_counts || []) {
      const sw = el('span', {class: 'swatch', 'aria-hidden': 'true'});
      Object.assign(sw.style, {display: 'inline-block', width: '1.2em', height: '1.2em', background: c.color, border: '1px solid #888'});
      tbody.append(el('tr', {}, el('td', {}, sw, ' ' + c.color), el('td', {text: c.label}), el('td', {class: 'num', text: CD.count(c.pixels)})));
    }
    let picture = null;
    try {
      picture = file ? await CD.readPicture(file)
        : await fetch(imageUrl(path), {credentials: 'same-origin'}).then((res) => (res.ok ? res.blob() : null)).then((b) => b && CD.readPicture(b));
    } catch (e) { /* the mask is shown on its own */ }
    const bits = await dataUrlBitmap(r.mask);
    const src = picture || bits;
    /* whole pixels, at most 512 wide: a small image is shown large enough to see its classes */
    const k = Math.max(1, Math.floor(512 / Math.max(src.width, src.height)));
    const w = src.width >= 512 ? 512 : src.width * k, h = Math.round(w * src.height / src.width);
    if (picture) draw(image, picture, w, h);
    else Object.assign(image, {width: w, height: h});
    draw(mask, bits, w, h);
    stack.dataset.drawn = String(Number(stack.dataset.drawn || 0) + 1); /* how many masks it has shown */
  }

  /* The picture of a one-image request: the upload, or the file the path names. */
  async function requestPicture(file, path) {
    try {
      return file ? await CD.readPicture(file)
        : await fetch(imageUrl(path), {credentials: 'same-origin'}).then((res) => (res.ok ? res.blob() : null)).then((b) => b && CD.readPicture(b));
    } catch (e) {
      return null; /* the boxes are drawn on an empty canvas of the image's size */
    }
  }

  /* A detection model's boxes (in the image's pixels) drawn over the image in their
   * class's colour with label and confidence, as DIGITS's bounding-box view draws them;
   * the legend counts each class's boxes, the table lists them. The canvas says how many
   * boxes it drew and at what scale (data-boxes, data-scale) once it has drawn them. */
  async function showBoxes(r, file, path) {
    $('#det-view').hidden = !r.boxes;
    if (!r.boxes) return;
    const canvas = $('#det-canvas');
    const colors = new Map((r.box_counts || []).map((c) => [c.class, c.color]));
    const colorOf = (k) => colors.get(k) || '#ff0000';
    const legend = clear($('#det-legend tbody'));
    for (const c of r.box_counts || []) {
      const sw = el('span', {class: 'swatch', 'aria-hidden': 'true'});
      Object.assign(sw.style, {display: 'inline-block', width: '1.2em', height: '1.2em', background: c.color, border: '1px solid #888'});
      legend.append(el('tr', {'data-class': String(c.class)}, el('td', {}, sw, ' ' + c.color), el('td', {text: c.label}),
        el('td', {class: 'num', text: CD.count(c.boxes)})));
    }
    const rows = clear($('#det-table tbody'));
    for (const b of r.boxes)
      rows.append(el('tr', {}, el('td', {text: b.label}), ...[b.x1, b.y1, b.x2, b.y2].map((v) => el('td', {class: 'num', text: CD.num(v, 1)})),
        el('td', {class: 'num', text: CD.num(b.confidence, 3)})));
    CD.setText('#det-count', r.boxes.length === 1 ? '1 box' : r.boxes.length + ' boxes');
    const picture = await requestPicture(file, path);
    const size = (r.image_frame && r.image_frame.image) || [picture ? picture.width : 256, picture ? picture.height : 256];
    /* whole pixels, at most 512 wide: a small image is shown large enough to see its boxes */
    const scale = size[0] >= 512 ? 512 / size[0] : Math.max(1, Math.floor(512 / Math.max(size[0], size[1])));
    canvas.width = Math.round(size[0] * scale);
    canvas.height = Math.round(size[1] * scale);
    Object.assign(canvas.style, {display: 'block', maxWidth: '100%', height: 'auto'});
    const ctx = canvas.getContext('2d');
    ctx.imageSmoothingEnabled = false;
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    if (picture) ctx.drawImage(picture, 0, 0, canvas.width, canvas.height);
    ctx.lineWidth = 2;
    ctx.font = '12px sans-serif';
    for (const b of r.boxes) {
      const x = b.x1 * scale, y = b.y1 * scale, w = (b.x2 - b.x1) * scale, h = (b.y2 - b.y1) * scale;
      ctx.globalAlpha = 0.15;
      ctx.fillStyle = colorOf(b.class);
      ctx.fillRect(x, y, w, h);
      ctx.globalAlpha = 1;
      ctx.strokeStyle = colorOf(b.class);
      /* the outline inside the box, so that its pixels lie on the box's edge */
      ctx.strokeRect(x + 1, y + 1, Math.max(0, w - 2), Math.max(0, h - 2));
      const text = b.label + ' ' + CD.num(b.confidence, 2);
      const tw = ctx.measureText(text).width;
      const ty = y >= 16 ? y - 3 : y + h + 13;
      ctx.fillStyle = 'rgba(0, 0, 0, 0.6)';
      ctx.fillRect(x, ty - 12, tw + 4, 15);
      ctx.fillStyle = '#fff';
      ctx.fillText(text, x + 2, ty);
    }
    canvas.dataset.scale = String(scale);
    canvas.dataset.boxes = String(r.boxes.length);
    const stack = $('#det-stack');
    stack.dataset.drawn = String(Number(stack.dataset.drawn || 0) + 1); /* how many answers it has drawn */
  }

  async function inferOne(fd, file, path) {
    const t0 = performance.now();
    const r = await api('POST', '/models/images/generic/infer_one/json', fd);
    CD.setText('#one-state', 'Answered in ' + Math.round(performance.now() - t0) + ' ms by iteration ' + CD.count(r.snapshot_iteration) + '.');
    $('#one-result').hidden = true;
    $('#generic-result').hidden = false;
    outputsTable(r.outputs);
    await showMask(r, file, path);
    await showBoxes(r, file, path);
  }

  async function classifyOne(ev) {
    ev.preventDefault();
    const form = ev.target;
    CD.clearErrors(form);
    const fd = new FormData();
    const file = $('#image_file').files[0], path = $('#image_path').value.trim();
    fd.append('job_id', id);
    fd.append('snapshot_epoch', epoch());
    if (file) fd.append('image_file', file);
    else if (path) fd.append('image_path', path);
    if (task !== 'classification') {
      CD.setText('#one-state', 'Running…');
      try {
        await inferOne(fd, file, path);
      } catch (e) {
        CD.setText('#one-state', '');
        CD.showErrors(form, e);
      }
      return;
    }
    $('#generic-result').hidden = true;
    if ($('#show_visualizations').checked) fd.append('show_visualizations', '1');
    CD.setText('#one-state', 'Classifying…');
    const t0 = performance.now();
    try {
      const r = await api('POST', '/models/images/classification/classify_one/json', fd);
      CD.setText('#one-state', 'Answered in ' + Math.round(performance.now() - t0) + ' ms by iteration ' + CD.count(r.snapshot_iteration) + '.');
      bars($('#predictions'), r.predictions);
      $('#one-result').hidden = false;
      preview(file, path);
      visualizations(r.visualizations || []);
    } catch (e) {
      CD.setText('#one-state', '');
      CD.showErrors(form, e);
    }
  }

  /* ---- lists ------------------------------------------------------------------------------ */

  /* The fields of the two forms that take a list of images, into their .field-row: the list
   * to upload, the folder its relative paths start in, and the number the form asks for. */
  function renderListFields() {
    const forms = [
      ['#many-form', 'image_list', 'image_folder',
        CD.field('Number of images (optional)', el('input', {type: 'number', id: 'num_test_images', name: 'num_test_images', min: 1}))],
      ['#top-form', 'top_list', 'top_folder',
        CD.field('Images per class', el('input', {type: 'number', id: 'top_n', name: 'top_n', min: 1, max: 1000, value: '9'}))],
    ];
    for (const [form, list, folder, number] of forms) {
      $(form + ' .field-row').append(
        CD.field('Upload a list', el('input', {type: 'file', id: list, name: 'image_list', accept: 'text/plain'}),
          {help: ['One image per line: ', el('span', {class: 'mono', text: 'path [label]'}), ', the label a class number.']}),
        CD.field('Image folder (optional)', el('input', {type: 'text', id: folder, name: 'image_folder', placeholder: '/data/images'}),
          {help: 'Relative paths of the list start here.'}),
        number);
    }
  }

  function listBody(form, fileInput, text) {
    const fd = new FormData();
    fd.append('job_id', id);
    fd.append('snapshot_epoch', epoch());
    const file = fileInput.files[0];
    if (file) fd.append('image_list', file);
    else if (text && text.trim()) fd.append('image_list', text);
    for (const input of $$('input[type="text"], input[type="number"]', form))
      if (input.value.trim() && input.name !== 'image_list') fd.append(input.name, input.value.trim());
    return fd;
  }

  function tile(k, v) { return el('div', {class: 'tile'}, el('div', {class: 'k', text: k}), el('div', {class: 'v', text: v})); }

  /* The confusion matrix as a table whose cells are shaded by their share of the row. */
  function confusion(r) {
    const table = clear($('#confusion'));
    const names = r.labels || labels;
    table.append(el('thead', {}, el('tr', {}, el('th', {text: 'label \\ predicted'}),
      names.map((n) => el('th', {class: 'num', text: n})), el('th', {class: 'num', text: 'accuracy'}))));
    const tbody = el('tbody');
    r.confusion_matrix.forEach((row, i) => {
      const total = row.reduce((a, b) => a + b, 0);
      const cells = row.map((v, j) => {
        const share = total ? v / total : 0;
        const td = el('td', {class: 'num', text: String(v), title: names[i] + ' as ' + names[j] + ': ' + v});
        td.style.backgroundColor = 'rgba(29, 111, 209, ' + (0.08 + 0.85 * share).toFixed(3) + ')';
        if (share > 0.5) td.style.color = '#fff';
        if (i === j) td.style.fontWeight = '700';
        return td;
      });
      const acc = r.per_class_accuracy ? r.per_class_accuracy[i] : null;
      tbody.append(el('tr', {}, el('th', {text: names[i]}), cells, el('td', {class: 'num', text: acc === null ? '–' : pct(acc) + ' %'})));
    });
    table.append(tbody);
    $('#confusion-wrap').hidden = false;
  }

  let rows = [];
  let shown = 0;

  function moreRows() {
    const tbody = $('#many-table tbody');
    const next = rows.slice(shown, shown + 100);
    for (const [path, preds] of next) {
      const top = preds[0] || ['', 0];
      const thumb = shown < 60 ? el('img', {src: imageUrl(path), alt: '', loading: 'lazy', class: 'mean-image'}) : '';
      if (thumb) { thumb.style.width = '48px'; thumb.style.height = '48px'; }
      tbody.append(el('tr', {},
        el('td', {}, thumb),
        el('td', {class: 'mono small', text: path}),
        el('td', {text: top[0]}),
        el('td', {class: 'num', text: pct(top[1])}),
        el('td', {class: 'small muted', text: preds.slice(1).map((p) => p[0] + ' ' + pct(p[1])).join(', ')})));
      shown++;
    }
    const more = $('#many-more');
    more.hidden = shown >= rows.length;
    more.textContent = 'Show more (' + (rows.length - shown) + ' left)';
  }

  async function classifyMany(ev) {
    ev.preventDefault();
    const form = ev.target;
    CD.clearErrors(form);
    CD.setText('#many-state', 'Classifying…');
    const t0 = performance.now();
    try {
      const r = await api('POST', '/models/images/classification/classify_many/json',
        listBody(form, $('#image_list'), $('#image_list_text').value));
      CD.setText('#many-state', CD.count(r.classified) + ' images in ' + CD.duration((performance.now() - t0) / 1000) + '.');
      const tiles = clear($('#many-tiles'));
      tiles.append(tile('Images', CD.count(r.classified)));
      if (r.top1_accuracy !== undefined) {
        tiles.append(tile('Top-1 accuracy', pct(r.top1_accuracy) + ' %'), tile('Top-5 accuracy', pct(r.top5_accuracy) + ' %'),
          tile('With labels', CD.count(r.labelled)));
        confusion(r);
      } else {
        $('#confusion-wrap').hidden = true;
      }
      const skipped = Object.entries(r.skipped || {});
      if (skipped.length) tiles.append(tile('Skipped', CD.count(skipped.length)));
      rows = Object.entries(r.classifications || {});
      shown = 0;
      clear($('#many-table tbody'));
      moreRows();
      const ul = clear($('#skipped'));
      for (const [path, why] of skipped) ul.append(el('li', {}, el('span', {class: 'mono', text: path}), ': ', why));
      $('#skipped-wrap').hidden = skipped.length === 0;
      $('#many-result').hidden = false;
    } catch (e) {
      CD.setText('#many-state', '');
      CD.showErrors(form, e);
    }
  }

  async function topImages(ev) {
    ev.preventDefault();
    const form = ev.target;
    CD.clearErrors(form);
    CD.setText('#top-state', 'Looking…');
    try {
      const r = await api('POST', '/models/images/classification/top_n/json', listBody(form, $('#top_list'), ''));
      CD.setText('#top-state', CD.count(r.classified) + ' images looked at.');
      const out = clear($('#top-result'));
      for (const [label, images] of r.results) {
        out.append(el('h3', {class: 'sub', text: label}),
          images.length ? el('div', {class: 'gallery'}, images.map(([path, p]) => el('figure', {},
            el('img', {src: imageUrl(path), alt: label + ' ' + pct(p) + ' percent', loading: 'lazy', title: path}),
            el('figcaption', {text: pct(p) + ' %'})))) : el('p', {class: 'empty', text: 'No image.'}));
      }
    } catch (e) {
      CD.setText('#top-state', '');
      CD.showErrors(form, e);
    }
  }

  /* ---- start ------------------------------------------------------------------------------ */

  CD.initTopbar();
  CD.tabs(['one', 'many', 'top']);
  renderListFields();
  $('#snapshot_epoch').addEventListener('change', setDownloads);
  $('#one-form').addEventListener('submit', classifyOne);
  $('#many-form').addEventListener('submit', classifyMany);
  $('#top-form').addEventListener('submit', topImages);
  $('#many-more').addEventListener('click', moreRows);
  $('#seg-opacity').addEventListener('input', (ev) => { $('#seg-mask').style.opacity = ev.target.value / 100; });
  loadModel();
})();
