/* New image classification model: dataset, solver options with a live preview of the
 * learning rate (POST /models/visualize-lr), standard / previous / custom networks with
 * Customize (GET /models/standard/NAME.prototxt) and Visualize (the engine's shapes from
 * POST /models/visualize-network/json; read in the browser when the server cannot
 * answer), precision, early stopping, batch size auto, GPUs and data parallelism (with
 * why the server sees no GPU, from /hardware/json's nvml), group and name. The server
 * checks every field against its one table of the form's fields; its errors show next
 * to the fields. Clone (?clone=ID) fills every field from another model; ?dataset=ID
 * picks a dataset; ?previous=ID&epoch=E a snapshot. DIGITS's data augmentations with a
 * preview of a few training images (POST /models/augment-preview/json). */
'use strict';

(function () {
  const {el, $, $$, clear, api} = CD;
  const form = $('#model-form');

  const STANDARD = [
    {name: 'lenet', title: 'LeNet', input: [1, 28, 28], crop: 0,
      desc: 'For 28×28 grayscale images (MNIST-like). Small and quick: trains in minutes on a CPU.'},
    {name: 'alexnet', title: 'AlexNet', input: [3, 256, 256], crop: 227,
      desc: 'For 256×256 color images, with random 227×227 crops and mirroring in training.'},
    {name: 'googlenet', title: 'GoogLeNet', input: [3, 256, 256], crop: 224,
      desc: 'For 256×256 color images, with random 224×224 crops and mirroring. Deeper and slower than AlexNet, more accurate.'},
  ];

  /* The learning rate policies as the form offers them: the title, how the rate goes, and
   * the fields of the parameters with DIGITS's defaults ([name, label, value, type]: a
   * number of at least 0 unless the type says otherwise). */
  const LR_POLICIES = [
    {name: 'fixed', title: 'Fixed', formula: 'rate = base, all along.', fields: []},
    {name: 'step', title: 'Step Down',
      formula: 'rate = base × gamma^floor(progress / step size): divided every step size % of the training.',
      fields: [['lr_step_size', 'Step size (% of training)', '33'], ['lr_step_gamma', 'Gamma', '0.1']]},
    {name: 'multistep', title: 'Step Down (arbitrary steps)',
      formula: 'rate = base × gamma^(steps passed): multiplied by gamma at each listed % of the training.',
      fields: [['lr_multistep_values', 'Step values (% of training)', '50,85', 'text'], ['lr_multistep_gamma', 'Gamma', '0.5']]},
    {name: 'exp', title: 'Exponential Decay', formula: 'rate = base × gamma^(progress in %).',
      fields: [['lr_exp_gamma', 'Gamma', '0.95']]},
    {name: 'inv', title: 'Inverse Decay', formula: 'rate = base × (1 + gamma × progress in %)^−power.',
      fields: [['lr_inv_gamma', 'Gamma', '0.1'], ['lr_inv_power', 'Power', '0.5']]},
    {name: 'poly', title: 'Polynomial Decay', formula: 'rate = base × (1 − progress)^power: reaches 0 at the end.',
      fields: [['lr_poly_power', 'Power', '3']]},
    {name: 'sigmoid', title: 'Sigmoid Decay', formula: 'rate = base / (1 + exp(gamma × (progress − step) in %)).',
      fields: [['lr_sigmoid_step', 'Step (% of training)', '50'], ['lr_sigmoid_gamma', 'Gamma', '0.1']]},
  ];
  const LR_DEFAULT = 'step';

  let jobs = {running: [], datasets: [], models: []};
  let dataset = null;               /* the selected dataset's detail */
  let hardware = null;
  const networkText = {};           /* standard name -> prototxt */
  const modelDetails = {};          /* previous model id -> detail */

  /* ---- datasets -------------------------------------------------------------------------- */

  /* Served from /models/images/generic/new (or ?generic=1, or cloning a generic model)
   * the form makes DIGITS's generic image models, on the generic datasets only. */
  let generic = /\/models\/images\/generic\//.test(location.pathname) || CD.param('generic') === '1';

  function setGeneric(on) {
    generic = on;
    const title = on ? 'New Image Model' : 'New Image Classification Model';
    $('h1').textContent = title;
    document.title = title + ' · cdigits';
  }

  function datasetsForPicker() {
    return jobs.datasets.concat(jobs.running.filter((j) => j.type === 'dataset'))
      .filter((d) => d.status !== 'Error' && d.status !== 'Aborted' && !d.extension_id === !generic)
      .sort((a, b) => (b.submitted || 0) - (a.submitted || 0));
  }

  function renderDatasetPicker(want) {
    const sel = clear($('#dataset'));
    const list = datasetsForPicker();
    for (const d of list) {
      sel.append(el('option', {value: d.id, text: d.name + (d.status !== 'Done' ? ' (' + d.status.toLowerCase() + ')' : '') +
        (d.group ? ' · ' + d.group : '') + ' · ' + CD.date(d.submitted).slice(0, 16)}));
    }
    if (!list.length) {
      sel.append(el('option', {value: '', disabled: true, text: 'No dataset yet: make one first'}));
    }
    const pick = want && list.some((d) => d.id === want) ? want : list.length ? list[0].id : '';
    sel.value = pick;
    if (pick) loadDataset(pick);
  }

  async function loadDataset(id) {
    const kv = clear($('#ds-summary'));
    try {
      dataset = await api('GET', '/datasets/' + encodeURIComponent(id) + '/json');
    } catch (e) {
      dataset = null;
      kv.append(el('dt', {text: 'Error'}), el('dd', {text: e.message}));
      return;
    }
    if ($('#dataset').value !== id) return;
    const dims = dataset.image_dims || dataset.feature_dims || [];
    const row = (k, v) => kv.append(el('dt', {text: k}), el('dd', {}, v));
    row('Images', dims.length ? dims[1] + '×' + dims[0] + ' ' + (dims[2] === 1 ? 'grayscale' : 'color') : '–');
    row('Classes', dataset.labels ? String(dataset.labels.length) : '–');
    const s = dataset.splits || {};
    row('Split', dataset.splits ? ['train', 'val', 'test'].filter((k) => s[k]).map((k) => CD.count(s[k]) + ' ' + k).join(', ') : dataset.status);
    row('Dataset', el('a', {href: CD.jobUrl(dataset), text: 'open ' + dataset.name}));
    renderStandard();
    updateLrChart();
  }

  function datasetInput() {
    const dims = dataset && (dataset.image_dims || dataset.feature_dims);
    return dims ? [dims[2], dims[0], dims[1]] : null;
  }

  /* ---- networks ---------------------------------------------------------------------------------- */

  const selectMethod = CD.tabs(['standard', 'previous', 'custom'], (m) => {
    $('#method').value = m;
    if (!$('#net-view').hidden) visualize();
  });

  function renderStandard() {
    const box = $('#standard-list');
    const checked = (form.querySelector('input[name="standard_networks"]:checked') || {}).value || 'lenet';
    clear(box);
    const input = datasetInput();
    for (const n of STANDARD) {
      const radio = el('input', {type: 'radio', name: 'standard_networks', value: n.name, id: 'net-' + n.name,
        checked: n.name === checked, 'aria-describedby': 'net-desc-' + n.name});
      const fits = !input || input.join('x') === n.input.join('x');
      const desc = el('span', {class: 'desc', id: 'net-desc-' + n.name},
        'Input ' + n.input.join('×') + (n.crop ? ', crop ' + n.crop : '') + '. ' + n.desc,
        fits ? null : el('strong', {text: ' This dataset is ' + input.join('×') + '.'}));
      const card = el('label', {class: 'radio-card' + (n.name === checked ? ' selected' : ''), for: 'net-' + n.name},
        radio, el('span', {class: 'title', text: n.title}),
        el('button', {type: 'button', class: 'small', text: 'Customize', 'aria-label': 'Customize ' + n.title,
          on: {click: (ev) => { ev.preventDefault(); customizeStandard(n.name); }}}),
        desc);
      box.append(card);
    }
    for (const r of $$('input[name="standard_networks"]', box)) {
      r.addEventListener('change', () => {
        for (const c of $$('.radio-card', box)) c.classList.toggle('selected', c.querySelector('input').checked);
        if (!$('#net-view').hidden) visualize();
      });
    }
  }

  async function standardText(name) {
    if (networkText[name]) return networkText[name];
    const res = await fetch(CD.url('models/standard/' + encodeURIComponent(name) + '.prototxt'), {credentials: 'same-origin'});
    if (!res.ok) throw new Error('the server has no ' + name + ' definition (HTTP ' + res.status + '); start it with --models DIR');
    networkText[name] = await res.text();
    return networkText[name];
  }

  async function customizeStandard(name) {
    try {
      setCustom(await standardText(name), 'standard network ' + name);
    } catch (e) {
      CD.toast(e.message, 'error');
    }
  }

  function setCustom(text, from) {
    $('#custom_network').value = text;
    selectMethod('custom');
    $('#custom_network').focus();
    CD.toast('The custom network starts from the ' + from);
  }

  function renderPrevious(want, wantEpoch) {
    const tbody = clear($('#previous-table tbody'));
    const models = jobs.models.concat(jobs.running.filter((j) => j.type === 'model'));
    $('#previous-empty').hidden = models.length > 0;
    $('#previous-table').hidden = models.length === 0;
    const names = new Map(jobs.datasets.concat(jobs.running).map((d) => [d.id, d.name]));
    for (const m of models) {
      const snap = el('select', {name: m.id + '-snapshot', class: 'small-select', 'aria-label': 'Weights of ' + m.name},
        el('option', {value: '', text: 'Random initialization'}));
      const radio = el('input', {type: 'radio', name: 'previous_networks', value: m.id, 'aria-label': 'Use the network of ' + m.name,
        checked: m.id === want, on: {change: () => loadSnapshots(m.id, snap)}});
      const customize = el('button', {type: 'button', class: 'small', text: 'Customize', 'aria-label': 'Customize the network of ' + m.name,
        on: {click: () => customizePrevious(m.id, snap)}});
      snap.addEventListener('focus', () => loadSnapshots(m.id, snap));
      tbody.append(el('tr', {},
        el('td', {class: 'check'}, radio),
        el('td', {class: 'name'}, el('a', {href: CD.jobUrl(m), text: m.name})),
        el('td', {class: 'opt', text: names.get(m.dataset_id) || m.dataset_id || '–'}),
        el('td', {}, CD.badge(m.status, m.status_css)),
        el('td', {}, snap),
        el('td', {}, customize)));
      if (m.id === want) loadSnapshots(m.id, snap, wantEpoch);
    }
  }

  async function modelDetail(id) {
    if (!modelDetails[id]) modelDetails[id] = await api('GET', '/models/' + encodeURIComponent(id) + '/json');
    return modelDetails[id];
  }

  /* Option values are the snapshots' exact epochs (the server also takes the rounded
   * values of "snapshots", 2.133 for 2.13333333, but the exact one never needs matching). */
  async function loadSnapshots(id, select, want) {
    if (select.dataset.loaded) return;
    select.dataset.loaded = '1';
    try {
      const m = await modelDetail(id);
      for (const s of m.snapshot_files || []) {
        select.append(el('option', {value: String(s.epoch), text: 'Epoch ' + CD.num(Math.round(s.epoch * 1000) / 1000) + ' (iteration ' + s.iteration + ')'}));
      }
      if (want !== undefined && want !== null && want !== '') {
        const w = Number(want);
        const hit = (m.snapshot_files || []).find((s) => Math.abs(s.epoch - w) < 5e-4);
        if (hit) select.value = String(hit.epoch);
      }
    } catch (e) { /* the select keeps random initialization */ }
  }

  async function customizePrevious(id, select) {
    try {
      const res = await fetch(CD.url('files/' + encodeURIComponent(id) + '/network.prototxt'));
      if (!res.ok) throw new Error('cannot read its network.prototxt (HTTP ' + res.status + ')');
      const text = await res.text();
      const m = await modelDetail(id);
      const epoch = select.value;
      const snap = epoch ? (m.snapshot_files || []).find((s) => String(s.epoch) === epoch) : null;
      $('#custom_network_snapshot').value = snap ? m.directory + '/' + snap.file : '';
      setCustom(text, 'network of ' + m.name + (snap ? ', with the weights of epoch ' + CD.num(Math.round(snap.epoch * 1000) / 1000) : ''));
    } catch (e) {
      CD.toast('Cannot customize: ' + e.message, 'error');
    }
  }

  /* The prototxt of the network chosen now, where it came from, and the form fields
   * that name it for the server. */
  async function currentNetwork() {
    const m = $('#method').value;
    if (m === 'standard') {
      const name = (form.querySelector('input[name="standard_networks"]:checked') || {}).value;
      if (!name) throw new Error('Choose a standard network first.');
      return {text: await standardText(name), label: name, fields: {method: m, standard_networks: name}};
    }
    if (m === 'previous') {
      const id = (form.querySelector('input[name="previous_networks"]:checked') || {}).value;
      if (!id) throw new Error('Choose a previous network first.');
      const res = await fetch(CD.url('files/' + encodeURIComponent(id) + '/network.prototxt'));
      if (!res.ok) throw new Error('cannot read the network of ' + id);
      return {text: await res.text(), label: 'network of ' + id, fields: {method: m, previous_networks: id}};
    }
    const text = $('#custom_network').value;
    if (!text.trim()) throw new Error('The custom network is empty: write one, or Customize a standard network.');
    return {text, label: 'custom network', fields: {method: 'custom', custom_network: text}};
  }

  function visualize() {
    $('#net-view').hidden = false;
    CD.net.show(async () => {
      const {text, fields} = await currentNetwork();
      const crop = parseInt($('#crop_size').value, 10) || 0;
      const batch = ($('#batch_size').value.split(',')[0] || '').trim();
      const body = Object.assign({}, fields);
      if (dataset) body.dataset = dataset.id;
      if (crop) body.crop_size = String(crop);
      if (/^\d+$/.test(batch)) body.batch_size = batch;
      return {text, body, crop, dataset};
    });
  }

  /* ---- learning rate ---------------------------------------------------------------------------- */

  let lrChart = null;
  let lrRequest = null;

  /* The policy and the fields of its parameters, into #lr-fields. */
  function renderLrPolicies() {
    const select = el('select', {id: 'lr_policy', name: 'lr_policy'});
    const row = $('#lr-fields');
    row.append(CD.field('Policy', select));
    for (const p of LR_POLICIES) {
      select.append(el('option', {value: p.name, text: p.title}));
      for (const [name, label, value, type] of p.fields) {
        const input = type === 'text' ? el('input', {type: 'text', id: name, name, value})
          : el('input', {type: 'number', id: name, name, value, min: 0, step: 'any'});
        row.append(CD.field(label, input, {class: 'lr-opt', dataset: {policy: p.name}}));
      }
    }
    select.value = LR_DEFAULT;
  }

  function lrFields() {
    const f = {lr_policy: $('#lr_policy').value, learning_rate: $('#learning_rate').value.trim()};
    for (const i of $$('.lr-opt:not([hidden]) input')) f[i.name] = i.value.trim();
    return f;
  }

  function syncPolicy() {
    const p = $('#lr_policy').value;
    for (const f of $$('.lr-opt')) f.hidden = f.dataset.policy !== p;
    CD.setText('#lr-formula', (LR_POLICIES.find((x) => x.name === p) || {}).formula || '');
    updateLrChart();
  }

  const updateLrChart = CD.debounce(async () => {
    const f = lrFields();
    const rates = f.learning_rate.split(',').map((x) => x.trim()).filter(Boolean);
    /* only well-formed values go to the server */
    if (!rates.length || rates.some((r) => !(Number(r) > 0))) return;
    if (Object.entries(f).some(([k, v]) => k !== 'lr_policy' && k !== 'learning_rate' && k !== 'lr_multistep_values' && !(v !== '' && Number(v) >= 0))) return;
    if (f.lr_multistep_values !== undefined && !/^\s*\d+(\.\d+)?(\s*,\s*\d+(\.\d+)?)*\s*$/.test(f.lr_multistep_values)) return;
    if (lrRequest) lrRequest.abort();
    lrRequest = new AbortController();
    try {
      const d = await api('POST', '/models/visualize-lr', f, {signal: lrRequest.signal});
      const cols = d.data.columns;
      const epochs = Number($('#train_epochs').value) || 100;
      if (!lrChart || lrChart.lists.length !== cols.length) {
        clear($('#lr-chart'));
        lrChart = CD.chart($('#lr-chart'), {title: 'Learning rate over training', x: 'Epoch', y: 'Learning rate', height: 200,
          series: cols.map((c, i) => ({label: 'lr ' + rates[i], color: ['purple', 'blue', 'orange', 'green', 'teal', 'red'][i % 6], points: false}))});
      }
      lrChart.set(cols.map((c) => c.slice(1).map((y, i) => [i * epochs / 100, y])));
    } catch (e) {
      if (e.name !== 'AbortError') CD.setText('#lr-formula', 'Cannot preview: ' + e.message);
    }
  }, 250);

  /* ---- GPUs -------------------------------------------------------------------------------------- */

  function renderGpus() {
    const g = hardware && hardware.resources && hardware.resources.gpus;
    const total = g ? g.total || 0 : 0;
    const nvml = CD.nvmlNote(hardware);
    $('#gpu-none').hidden = total > 0;
    $('#gpu-choice').hidden = total === 0;
    CD.setText('#gpu-nvml', nvml);
    $('#gpu-nvml').hidden = !nvml;
    CD.setText('#precision-help', 'Weights, gradients and solver state stay fp32 in every precision; only convolutions and matrix products change. ' +
      (total ? 'On the CPU all compute fp32.' : 'This server has no GPU: the model trains on the CPU, which computes fp32 whatever the choice.'));
    if (!total) return;
    $('#select_gpu_count').max = total;
    const list = clear($('#gpu-list'));
    const busy = new Set((g.busy || []).map((b) => (b && typeof b === 'object' ? b.index : b)));
    for (const gpu of hardware.gpus || []) {
      const id = 'gpu-' + gpu.index;
      list.append(el('label', {class: 'radio-card', for: id},
        el('input', {type: 'checkbox', name: 'select_gpus', value: gpu.index, id}),
        el('span', {class: 'title', text: '#' + gpu.index + ' ' + gpu.name}),
        el('span', {class: 'small muted', text: busy.has(gpu.index) ? 'busy' : 'free'}),
        el('span', {class: 'desc', text: CD.bytes(gpu.memory && gpu.memory.total) + ' memory' +
          (gpu.utilization && gpu.utilization.gpu !== null ? ', ' + gpu.utilization.gpu + '% busy now' : '')})));
    }
    if (!(hardware.gpus || []).length) {
      for (let i = 0; i < total; i++) {
        list.append(el('label', {class: 'radio-card', for: 'gpu-' + i},
          el('input', {type: 'checkbox', name: 'select_gpus', value: i, id: 'gpu-' + i}), el('span', {class: 'title', text: 'GPU #' + i})));
      }
    }
    for (const c of $$('input[name="select_gpus"]')) c.addEventListener('change', () => { $('#gpu-mode-list').checked = true; });
  }

  /* ---- data augmentations ------------------------------------------------------------------------ */

  const AUG_FIELDS = ['aug_quad_rot', 'aug_rot', 'aug_scale', 'aug_noise', 'aug_contrast', 'aug_whitening',
    'aug_hsv_use', 'aug_hsv_h', 'aug_hsv_s', 'aug_hsv_v'];
  let augSeed = 1;
  let augRequest = 0;

  function syncHsv() {
    for (const i of $$('#aug-hsv-fields input')) i.disabled = !$('#aug_hsv_use').checked;
  }

  /* A few training images of the chosen dataset before and after the form's
   * augmentations (POST /models/augment-preview/json, the worker's own code). */
  async function previewAugmentations(redraw) {
    const box = $('#aug-preview-images'), error = $('#aug-preview-error');
    error.textContent = '';
    if (!dataset) {
      error.textContent = 'Choose a dataset first: the preview shows its training images.';
      return;
    }
    if (redraw) augSeed += 1;
    const body = {dataset: dataset.id, random_seed: String(augSeed), count: '6'};
    for (const name of AUG_FIELDS) {
      const input = $('#' + name);
      if (input.type === 'checkbox') body[name] = input.checked ? 'true' : 'false';
      else if (input.value.trim() !== '') body[name] = input.value.trim();
    }
    const mine = ++augRequest;
    $('#aug-preview').disabled = true;
    try {
      const r = await api('POST', '/models/augment-preview/json', body);
      if (mine !== augRequest) return; /* a newer preview is on its way */
      clear(box);
      for (const img of r.images || []) {
        const name = img.label || (img.class !== undefined ? 'class ' + img.class : 'record ' + img.index);
        const [before, after] = await Promise.all([
          thumb(img.original, name + ' (record ' + img.index + ')'), thumb(img.augmented, name + ' augmented')]);
        if (mine !== augRequest) return;
        box.append(el('figure', {}, [before, ' ', after, el('figcaption', {text: name + ': ' + augSummary(img.params)})]));
      }
      $('#aug-redraw').hidden = false;
    } catch (e) {
      if (mine !== augRequest) return;
      const fields = e.fields || {};
      const msgs = Object.keys(fields).map((k) => [].concat(fields[k]).join(' '));
      error.textContent = msgs.length ? msgs.join(' ') : e.message;
    } finally {
      if (mine === augRequest) $('#aug-preview').disabled = false;
    }
  }

  /* A base64 PNG drawn into a canvas 96 pixels wide, nearest-neighbour (the page's
   * Content-Security-Policy loads images from the server only, so no data: URL). */
  async function thumb(b64, label) {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const bitmap = await createImageBitmap(new Blob([bytes], {type: 'image/png'}));
    const w = 96, h = Math.max(1, Math.round(96 * bitmap.height / bitmap.width));
    const canvas = el('canvas', {width: w, height: h, role: 'img', 'aria-label': label});
    const ctx = canvas.getContext('2d');
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(bitmap, 0, 0, w, h);
    return canvas;
  }

  function augSummary(p) {
    if (!p) return '';
    const parts = [];
    if (p.quarter_turns) parts.push(p.quarter_turns * 90 + '° turn');
    if (p.angle) parts.push(p.angle.toFixed(1) + '°');
    if (p.scale !== 1) parts.push('zoom ' + p.scale.toFixed(2));
    if (p.contrast !== 1) parts.push('contrast ' + p.contrast.toFixed(2));
    if (p.hue || p.saturation || p.value) parts.push('HSV ' + [p.hue, p.saturation, p.value].map((x) => x.toFixed(3)).join('/'));
    if (p.noise) parts.push('noise ' + p.noise.toFixed(1));
    if (p.whiten) parts.push('whitened');
    return parts.length ? parts.join(', ') : 'unchanged';
  }

  /* ---- submit -------------------------------------------------------------------------------------- */

  function collect() {
    const body = {};
    const method = $('#method').value;
    for (const input of $$('input, select, textarea', form)) {
      const name = input.name;
      if (!name || name === 'gpu_mode' || input.disabled) continue;
      if (input.closest('.lr-opt[hidden]') || input.closest('#rms-field[hidden]')) continue;
      const panel = input.closest('[role="tabpanel"]');
      if (panel && panel.id !== 'panel-' + method) continue;
      if (name === 'select_gpus' || name === 'select_gpu_count') continue;
      if (name.endsWith('-snapshot')) {
        const chosen = (form.querySelector('input[name="previous_networks"]:checked') || {}).value;
        if (name !== chosen + '-snapshot' || !input.value) continue;
      }
      if (input.type === 'radio') {
        if (input.checked) body[name] = input.value;
      } else if (input.type === 'checkbox') {
        body[name] = input.checked ? 'true' : 'false'; /* unticked says so: data_parallel defaults to true */
      } else if (input.value.trim() !== '') {
        body[name] = name === 'custom_network' ? input.value : input.value.trim();
      }
    }
    if ($('#batch_auto').checked) body.batch_size = 'auto';
    if (!$('#gpu-choice').hidden) {
      if ($('#gpu-mode-list').checked) {
        body.select_gpus = $$('input[name="select_gpus"]:checked').map((c) => Number(c.value));
      } else if ($('#select_gpu_count').value) {
        body.select_gpu_count = $('#select_gpu_count').value;
      }
    }
    return body;
  }

  function created(r) {
    const first = r.jobs ? r.jobs[0] : r;
    return {text: r.jobs ? 'Created ' + r.jobs.length + ' models' : 'Created ' + r.name,
      href: r.jobs && r.jobs.length > 1 ? CD.url('#models') : CD.url('models/' + encodeURIComponent(first.id))};
  }

  /* the tab of a network field in error opens; the GPU count's error shows at the GPU list */
  function showErrorFields(e) {
    const tabOf = {standard_networks: 'standard', previous_networks: 'previous', custom_network: 'custom', custom_network_snapshot: 'custom'};
    for (const k of Object.keys(e.fields)) if (tabOf[k]) selectMethod(tabOf[k]);
    if (e.fields.select_gpu_count || e.fields.select_gpu) {
      e.fields.select_gpus = [].concat(e.fields.select_gpus || [], e.fields.select_gpu || []);
      delete e.fields.select_gpu;
    }
  }

  /* ---- clone ----------------------------------------------------------------------------------------- */

  function syncBatchAuto() {
    const auto = $('#batch_auto').checked;
    $('#batch_size').disabled = auto;
    $('#batch_size').placeholder = auto ? 'auto' : '[network defaults]';
  }

  function selectPrecision(value) {
    const r = form.querySelector('input[name="precision"][value="' + CSS.escape(value) + '"]');
    if (r) r.checked = true;
    for (const c of $$('#precision-list .radio-card')) c.classList.toggle('selected', c.querySelector('input').checked);
  }

  /* use_mirror as the server reads it (api_models.c): DIGITS's checkbox values are on, the
   * usual no-words off, anything else (absent, "default") the network's own setting. */
  function mirrorChoice(v) {
    const s = String(v).trim().toLowerCase();
    if (['1', 'true', 'on', 'yes', 'y', 'mirror'].includes(s)) return 'true';
    if (['0', 'false', 'off', 'no', 'n', 'none'].includes(s)) return 'false';
    return '';
  }

  function fill(fields) {
    for (const [k, v] of Object.entries(fields)) {
      if (k === 'dataset' || k === 'method' || k === 'standard_networks' || k === 'previous_networks' || k === 'select_gpus') continue;
      const input = form.querySelector('[name="' + CSS.escape(k) + '"]');
      if (!input || input.type === 'radio') continue;
      if (input.type === 'checkbox') input.checked = ['true', '1', 'on', 'yes'].includes(String(v).toLowerCase());
      else if (k === 'use_mirror') input.value = mirrorChoice(v);
      else input.value = Array.isArray(v) ? v.join(',') : v;
    }
    if (fields.standard_networks) {
      const r = form.querySelector('input[name="standard_networks"][value="' + CSS.escape(fields.standard_networks) + '"]');
      if (r) { r.checked = true; r.dispatchEvent(new Event('change')); }
    }
    if (fields.select_gpus && !$('#gpu-choice').hidden) {
      $('#gpu-mode-list').checked = true;
      for (const g of [].concat(fields.select_gpus)) {
        const c = form.querySelector('input[name="select_gpus"][value="' + CSS.escape(String(g)) + '"]');
        if (c) c.checked = true;
      }
    }
    if (String(fields.batch_size || '').toLowerCase() === 'auto') {
      $('#batch_size').value = '';
      $('#batch_auto').checked = true;
    }
    syncBatchAuto();
    syncHsv();
    selectPrecision(fields.precision || 'fp32');
    if (fields.method) selectMethod(fields.method);
    syncPolicy();
    $('#rms-field').hidden = $('#solver_type').value !== 'RMSPROP';
  }

  /* ---- start ------------------------------------------------------------------------------------------- */

  async function start() {
    CD.initTopbar();
    setGeneric(generic);
    CD.jobform.init({form, kind: 'model', path: () => (generic ? '/models/images/generic/json' : '/models/images/classification/json'),
      collect, created, onErrors: showErrorFields});
    renderLrPolicies();
    CD.net.view($('#net-view'), el('button', {type: 'button', id: 'net-hide', text: 'Hide graph'}));
    $('#dataset').addEventListener('change', () => loadDataset($('#dataset').value));
    $('#lr_policy').addEventListener('change', syncPolicy);
    for (const i of $$('#learning_rate, #train_epochs, .lr-opt input')) i.addEventListener('input', updateLrChart);
    $('#solver_type').addEventListener('change', () => { $('#rms-field').hidden = $('#solver_type').value !== 'RMSPROP'; });
    $('#visualize').addEventListener('click', visualize);
    $('#net-stage').addEventListener('change', visualize);
    $('#net-hide').addEventListener('click', () => { $('#net-view').hidden = true; $('#visualize').focus(); });
    $('#select_gpu_count').addEventListener('input', () => { $('#gpu-mode-count').checked = true; });
    $('#batch_auto').addEventListener('change', syncBatchAuto);
    $('#aug_hsv_use').addEventListener('change', syncHsv);
    $('#aug-preview').addEventListener('click', () => previewAugmentations(false));
    $('#aug-redraw').addEventListener('click', () => previewAugmentations(true));
    syncHsv();
    for (const r of $$('input[name="precision"]')) r.addEventListener('change', () => selectPrecision(r.value));
    renderStandard();
    syncPolicy();

    const clone = CD.param('clone');
    const [lists, hw, cloned] = await Promise.all([
      api('GET', '/completed_jobs/json').catch(() => null),
      CD.hardware().catch(() => null),
      clone ? api('GET', '/clone/' + encodeURIComponent(clone) + '/json').catch((e) => { CD.toast('Cannot clone ' + clone + ': ' + e.message, 'error'); return null; }) : null,
    ]);
    if (lists) jobs = lists;
    hardware = hw;
    if (hw && hw.resources && hw.resources.gpus) CD.setGpus(hw.resources.gpus.total || 0, hw.resources.gpus.free || 0);
    renderGpus();
    CD.jobform.groups(jobs);

    if (cloned && /\/generic\//.test(cloned.url || '')) setGeneric(true);
    const fields = cloned ? cloned.fields || {} : {};
    const previous = fields.previous_networks || CD.param('previous');
    renderDatasetPicker(fields.dataset || CD.param('dataset'));
    renderPrevious(previous, fields.previous_networks ? fields[fields.previous_networks + '-snapshot'] : CD.param('epoch'));
    if (cloned) {
      fill(fields);
      CD.toast('Filled in from model ' + (fields.model_name || clone));
    } else if (previous) {
      selectMethod('previous');
    }
  }

  start();
})();
