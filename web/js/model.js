/* A model's page: live charts of loss, accuracy (a segmentation's mean and per-class IoU,
 * a regression's mean absolute error), learning rate and throughput against epochs, the
 * hardware panel, snapshots, settings, status history with elapsed time and ETA, and
 * abort / resume / clone / delete / notes. The whole history comes from
 * /models/<id>/metrics/json; what follows arrives on the job's event stream, merged by
 * metric id so nothing is counted twice. */
'use strict';

(function () {
  const {el, $, clear, api} = CD;
  const P = CD.jobpage;
  const id = P.id;
  const enc = encodeURIComponent(id);
  const fileUrl = (name) => CD.url('files/' + enc + '/' + name);

  let job = null;
  const metrics = new Map();     /* id -> metric row */
  let charts = null;
  let progress = {pct: 0, epoch: null, done: null, total: null};
  let samples = [];              /* [time, fraction] while running, for the ETA */

  /* ---- metrics and charts ------------------------------------------------------------- */

  /* A detection model's validation metrics (DetectNet's mean_ap layer's names), as the
   * worker reports them: in percent. */
  const DET_METRICS = [['mAP', 'mAP (val)', 'purple'], ['precision', 'precision (val)', 'green'], ['recall', 'recall (val)', 'orange']];
  const DET_SCALE = 1;

  function series(phase, name, scale) {
    const out = [];
    for (const m of metrics.values()) {
      if (m.phase === phase && m.name === name && m.value !== null && !m.superseded) out.push([m.epoch, m.value * (scale || 1)]);
    }
    out.sort((a, b) => a[0] - b[0]);
    return out;
  }

  function has(phase, name) {
    for (const m of metrics.values()) if (m.phase === phase && m.name === name) return true;
    return false;
  }

  /* The per-class IoUs of a segmentation model's validation (iou_class_K), by K. */
  function iouClasses() {
    const ks = new Set();
    for (const m of metrics.values()) {
      const k = m.phase === 'val' && /^iou_class_(\d+)$/.exec(m.name);
      if (k) ks.add(Number(k[1]));
    }
    return Array.from(ks).sort((a, b) => a - b);
  }

  /* What the charts show depends on the metrics there are; they are made again when it changes. */
  function chartKinds() {
    return {top5: has('val', 'accuracy_top5'), test: has('test', 'loss') || has('test', 'accuracy'),
      miou: has('val', 'mean_iou'), mae: has('val', 'mae'), classes: iouClasses(), det: has('val', 'mAP')};
  }

  function className(k) {
    const names = datasetDetail && datasetDetail.labels;
    return names && names[k] ? names[k] : 'class ' + k;
  }

  function makeCharts() {
    const kinds = chartKinds();
    const lossSeries = [
      {label: 'loss (train)', color: 'blue', points: false},
      {label: 'loss (val)', color: 'orange', points: true},
      {label: 'accuracy (val)', color: 'green', right: true, points: true},
    ];
    if (kinds.top5) lossSeries.push({label: 'accuracy top-5 (val)', color: 'lime', right: true, dash: [6, 4], points: true});
    if (kinds.test) lossSeries.push({label: 'loss (test)', color: 'red', points: true}, {label: 'accuracy (test)', color: 'teal', right: true, points: true});
    if (kinds.miou) lossSeries.push({label: 'mean IoU (val)', color: 'purple', right: true, points: true});
    if (kinds.mae) lossSeries.push({label: 'mean absolute error (val)', color: 'gray', points: true});
    clear($('#chart-loss'));
    clear($('#chart-lr'));
    clear($('#chart-speed'));
    /* epochs run from 0 to the whole training, so the chart shows how far it has come */
    const xrange = (u, min, max) => [0, Math.max(max || 0, epochs() || 1)];
    const pctRange = (u, min, max) => [0, Math.max(1, max || 0)];
    charts = {
      kinds,
      loss: CD.chart($('#chart-loss'), {title: 'Loss and accuracy', x: 'Epoch', y: 'Loss', y2: 'Accuracy (%)', y2pct: true,
        log: $('#log-loss').checked,
        y2range: [0, 100], xrange, height: 280, series: lossSeries}),
      lr: CD.chart($('#chart-lr'), {title: 'Learning rate', x: 'Epoch', y: 'Learning rate', height: 180, xrange,
        series: [{label: 'learning rate', color: 'purple', points: false}]}),
      speed: CD.chart($('#chart-speed'), {title: 'Throughput', x: 'Epoch', y: 'Images / second', y2: 'Waiting for data (%)', y2pct: true,
        height: 200, xrange, y2range: pctRange, series: [{label: 'images/s (train)', color: 'teal', points: false}, {label: 'data wait (train)', color: 'red', right: true, points: false}]}),
    };
    /* a segmentation model's IoU of each class, under the loss chart */
    let box = $('#chart-iou');
    if (kinds.classes.length) {
      if (!box) {
        box = el('div', {id: 'chart-iou'});
        $('#chart-loss').after(box);
      }
      clear(box);
      const colors = Object.keys(CD.chart.colors);
      charts.iou = CD.chart(box, {title: 'IoU per class (val)', x: 'Epoch', y: 'IoU (%)', height: 220, xrange,
        series: kinds.classes.map((k, i) => ({label: className(k), color: colors[i % colors.length], points: true}))});
    } else if (box) {
      box.remove();
    }
    /* a detection model's validation: DetectNet's mAP, precision and recall */
    let det = $('#chart-det');
    if (kinds.det) {
      if (!det) {
        det = el('div', {id: 'chart-det'});
        ($('#chart-iou') || $('#chart-loss')).after(det);
      }
      clear(det);
      charts.det = CD.chart(det, {title: 'Detection (val)', x: 'Epoch', y: 'Percent', height: 220, xrange,
        series: DET_METRICS.map(([name, label, color]) => ({label, color, points: true}))});
    } else if (det) {
      det.remove();
    }
  }

  function chartData() {
    const k = charts.kinds;
    const loss = [series('train', 'loss'), series('val', 'loss'), series('val', 'accuracy', 100)];
    if (k.top5) loss.push(series('val', 'accuracy_top5', 100));
    if (k.test) loss.push(series('test', 'loss'), series('test', 'accuracy', 100));
    if (k.miou) loss.push(series('val', 'mean_iou', 100));
    if (k.mae) loss.push(series('val', 'mae'));
    const d = {
      loss,
      lr: [series('train', 'learning_rate')],
      speed: [series('train', 'images_per_sec'), series('train', 'data_wait', 100)],
    };
    if (charts.iou) d.iou = k.classes.map((c) => series('val', 'iou_class_' + c, 100));
    if (charts.det) d.det = DET_METRICS.map(([name]) => series('val', name, DET_SCALE));
    return d;
  }

  function updateCharts(now) {
    if (!charts || JSON.stringify(chartKinds()) !== JSON.stringify(charts.kinds)) makeCharts();
    const d = chartData();
    for (const k of Object.keys(d)) now ? charts[k].setNow(d[k]) : charts[k].set(d[k]);
    renderTiles();
  }

  /* One row per phase, name, iteration and attempt, whichever way it arrived. */
  function addMetric(m) {
    const key = m.phase + '|' + m.name + '|' + m.iteration + '|' + m.attempt + '|' + m.epoch;
    if (metrics.has(key)) return false;
    metrics.set(key, m);
    return true;
  }

  async function loadMetrics(replace) {
    /* cleared before the read, so metric events during it stay; put back if it fails */
    const before = replace ? new Map(metrics) : null;
    if (replace) metrics.clear();
    try {
      const d = await api('GET', '/models/' + enc + '/metrics/json');
      for (const m of d.metrics || []) addMetric(m);
      updateCharts();
    } catch (e) {
      for (const [k, v] of before || []) if (!metrics.has(k)) metrics.set(k, v);
      updateCharts();
      CD.toast('Cannot load the metrics: ' + e.message, 'error');
    }
  }

  /* ---- tiles, progress, ETA -------------------------------------------------------------- */

  function last(phase, name) {
    let best = null;
    for (const m of metrics.values()) {
      if (m.phase === phase && m.name === name && !m.superseded &&
        (!best || m.attempt > best.attempt || (m.attempt === best.attempt && m.iteration >= best.iteration))) best = m;
    }
    return best ? best.value : null;
  }

  function maxOf(phase, name) {
    let v = null;
    for (const m of metrics.values()) if (m.phase === phase && m.name === name && m.value !== null && (v === null || m.value > v)) v = m.value;
    return v;
  }

  function epochs() {
    return job && job.train ? job.train.epochs : null;
  }

  function eta() {
    if (!job || job.status !== 'Running' || samples.length < 2) return null;
    const [t0, p0] = samples[0], [t1, p1] = samples[samples.length - 1];
    if (p1 <= p0 || t1 <= t0) return null;
    return (1 - p1) / ((p1 - p0) / (t1 - t0)) - (Date.now() / 1000 - t1);
  }

  function tile(k, v, title) {
    return el('div', {class: 'tile', title: title || null}, el('div', {class: 'k', text: k}), el('div', {class: 'v', text: v}));
  }

  function renderTiles() {
    const box = $('#tiles');
    if (!box) return;
    clear(box);
    const ep = progress.epoch !== null ? progress.epoch : maxEpoch();
    const total = epochs();
    /* the worker counts epochs in images seen, so the last batch can pass the total */
    const shown = ep !== null && total ? Math.min(ep, total) : ep;
    box.append(tile('Epoch', (shown !== null ? CD.num(Math.round(shown * 100) / 100) : '–') + (total ? ' / ' + total : '')));
    box.append(tile('Train loss', CD.num(last('train', 'loss'))));
    box.append(tile('Val. loss', CD.num(last('val', 'loss'))));
    const acc = last('val', 'accuracy'), best = maxOf('val', 'accuracy');
    box.append(tile('Val. accuracy', acc === null ? '–' : (100 * acc).toFixed(2) + '%', best !== null ? 'best ' + (100 * best).toFixed(2) + '%' : null));
    if (has('test', 'accuracy')) box.append(tile('Test accuracy', (100 * last('test', 'accuracy')).toFixed(2) + '%'));
    if (has('val', 'mean_iou')) {
      const best = maxOf('val', 'mean_iou');
      box.append(tile('Val. mean IoU', (100 * last('val', 'mean_iou')).toFixed(2) + '%', best !== null ? 'best ' + (100 * best).toFixed(2) + '%' : null));
    }
    if (has('val', 'mae')) box.append(tile('Val. mean abs. error', CD.num(last('val', 'mae'), 4)));
    if (has('val', 'mAP')) {
      const best = maxOf('val', 'mAP');
      box.append(tile('Val. mAP', (DET_SCALE * last('val', 'mAP')).toFixed(2), best !== null ? 'best ' + (DET_SCALE * best).toFixed(2) : null));
    }
    box.append(tile('Images / s', CD.num(last('train', 'images_per_sec'), 3)));
    const wait = last('train', 'data_wait');
    box.append(tile('Waiting for data', wait === null ? '–' : (100 * wait).toFixed(1) + '%',
      'share of the step time spent waiting for the next batch'));
    const e = eta();
    box.append(tile(job && job.running ? 'ETA' : 'Elapsed', job && job.running ? (e === null ? '–' : CD.duration(e)) : CD.duration(job ? job.elapsed : null)));
  }

  function maxEpoch() {
    let e = null;
    for (const m of metrics.values()) if (!m.superseded && (e === null || m.epoch > e)) e = m.epoch;
    return e;
  }

  function setProgress(ev) {
    progress.pct = ev.percentage !== undefined ? ev.percentage : progress.pct;
    if (ev.epoch !== undefined) progress.epoch = ev.epoch;
    if (ev.done !== undefined) { progress.done = ev.done; progress.total = ev.total; }
    if (ev.progress !== undefined && job && job.status === 'Running') {
      samples.push([Date.now() / 1000, ev.progress]);
      const cut = Date.now() / 1000 - 90;
      while (samples.length > 2 && samples[0][0] < cut) samples.shift();
    }
    renderProgress();
  }

  function renderProgress() {
    const bar = $('#job-progress');
    CD.setProgress(bar, progress.pct);
    bar.classList.toggle('done', !!job && job.status === 'Done');
    CD.setText('#job-pct', Math.round(progress.pct || 0) + '%');
    const parts = [];
    if (job) parts.push(job.status);
    if (progress.done !== null && progress.total) parts.push('iteration ' + CD.count(progress.done) + ' of ' + CD.count(progress.total));
    const e = eta();
    if (job && job.status === 'Running' && e !== null) parts.push('about ' + CD.duration(e) + ' left');
    if (job && job.wait_reason && job.status === 'Waiting') parts.push(job.wait_reason);
    CD.setText('#progress-text', parts.join(' · '));
    renderTiles();
  }

  /* ---- what limits training (the worker's advice line) ----------------------------------- */

  const LIMITS = {data: 'data loading', batch: 'the batch size', precision: 'the arithmetic precision',
    compute: 'compute', cpu: 'the CPU'};

  function renderAdvice() {
    const box = $('#advice');
    const a = job && job.advice;
    box.hidden = !a || !a.message;
    if (box.hidden) return;
    const facts = [];
    if (typeof a.data_wait === 'number') facts.push('waiting for data ' + (100 * a.data_wait).toFixed(1) + '% of the time');
    if (typeof a.images_per_sec === 'number') facts.push(CD.num(a.images_per_sec, 3) + ' images/s');
    if (typeof a.epoch === 'number') facts.push('at epoch ' + CD.num(Math.round(a.epoch * 100) / 100));
    clear(box).append(el('strong', {text: 'Limited by ' + (LIMITS[a.limit] || a.limit || 'something') + ': '}), a.message,
      facts.length ? el('span', {class: 'muted', text: ' (' + facts.join(', ') + ')'}) : null);
  }

  /* ---- hardware ---------------------------------------------------------------------------- */

  const hwHistory = [];

  /* Without NVML no GPU figure can come: the panel says why, from /hardware/json. */
  function showNvml(hw) {
    const note = CD.nvmlNote(hw);
    CD.setText('#hw-nvml', note);
    $('#hw-nvml').hidden = !note;
  }

  function meter(label, pct, text, hot) {
    const bar = pct === null ? el('span') : CD.progressBar(pct);
    if (hot) bar.classList.add('hot');
    return el('div', {class: 'meter'}, el('span', {text: label}), bar, el('span', {class: 'val', text}));
  }

  function renderHw(ev) {
    const body = clear($('#hw-body'));
    const procs = ev.processes || [];
    const gpus = ev.gpus || [];
    CD.setText('#hw-time', 'updated ' + CD.date(Date.now() / 1000).slice(11));
    const dev = job && job.tasks && job.tasks[0] && job.tasks[0].device;
    if (dev) body.append(el('p', {class: 'small', text: 'Running on ' + (dev.backend === 'cuda' ? 'the GPU' : 'the CPU') + (dev.name ? ' (' + dev.name + ')' : '') + (dev.ranks > 1 ? ', ' + dev.ranks + ' ranks' : '')}));
    for (const p of procs) {
      const cpu = p.cpu_percent;
      body.append(meter('Worker CPU', Math.min(100, cpu || 0), cpu === null || cpu === undefined ? '–' : Math.round(cpu) + '%' + (cpu > 100 ? ' (' + (cpu / 100).toFixed(1) + ' cores)' : '')));
      body.append(meter('Worker memory', null, CD.bytes(p.rss_bytes)));
    }
    for (const g of gpus) {
      const util = g.utilization ? g.utilization.gpu : null;
      const mem = g.memory || {};
      const memPct = mem.total ? 100 * mem.used / mem.total : 0;
      body.append(el('div', {class: 'hw-gpu'}, el('h3', {text: 'GPU ' + g.index + ' · ' + g.name}),
        meter('Utilization', util || 0, util === null ? '–' : util + '%'),
        meter('Memory', memPct, CD.bytes(mem.used) + ' / ' + CD.bytes(mem.total)),
        meter('Temperature', Math.min(100, g.temperature || 0), g.temperature === null || g.temperature === undefined ? '–' : g.temperature + ' °C', g.temperature >= 85)));
    }
    if (!procs.length && !gpus.length) body.append(el('p', {class: 'muted small', text: 'No worker process is running for this job.'}));
    const t = Date.now() / 1000;
    hwHistory.push([t, procs.length ? procs[0].cpu_percent : null, gpus.length && gpus[0].utilization ? gpus[0].utilization.gpu : null]);
    while (hwHistory.length && hwHistory[0][0] < t - 120) hwHistory.shift();
    if (!hwChart) {
      hwChart = CD.chart($('#hw-chart'), {title: 'Last two minutes', x: 'Seconds ago', y: 'Busy (%)', height: 150, xrange: [-120, 0],
        series: [{label: 'worker CPU %', color: 'blue', points: false}, {label: 'GPU %', color: 'green', points: false}]});
    }
    hwChart.set([hwHistory.filter((h) => h[1] !== null).map((h) => [Math.round(h[0] - t), h[1]]),
      hwHistory.filter((h) => h[2] !== null).map((h) => [Math.round(h[0] - t), h[2]])]);
  }
  let hwChart = null;

  function hwIdle() {
    if (job && !job.running) {
      const body = clear($('#hw-body'));
      body.append(el('p', {class: 'muted small', text: 'The job is not running: figures appear every second while it runs.'}));
      CD.setText('#hw-time', '');
    }
  }

  /* ---- snapshots and settings ------------------------------------------------------------------ */

  let showAllSnapshots = false;

  function renderSnapshots() {
    const tbody = clear($('#snapshots tbody'));
    const snaps = (job.snapshot_files || []).slice().reverse();
    $('#snapshots-empty').hidden = snaps.length > 0;
    $('#snapshots').hidden = snaps.length === 0;
    const shown = showAllSnapshots ? snaps : snaps.slice(0, 5);
    for (const s of shown) {
      const epoch = Math.round(s.epoch * 1000) / 1000;
      const state = s.file.replace(/\.cdw$/, '.solverstate');
      tbody.append(el('tr', {title: 'saved ' + CD.date(s.time)},
        el('td', {class: 'num', text: CD.num(epoch)}),
        el('td', {class: 'num', text: CD.count(s.iteration)}),
        el('td', {class: 'small nowrap'},
          el('a', {href: fileUrl(s.file), download: '', text: 'weights', 'aria-label': 'weights of epoch ' + epoch}), ' · ',
          el('a', {href: fileUrl(state), download: '', text: 'state', 'aria-label': 'solver state of epoch ' + epoch}), ' · ',
          el('a', {href: CD.url('models/' + enc + '/download.tar.gz?iteration=' + s.iteration), download: '',
            text: 'archive', 'aria-label': 'the model at epoch ' + epoch + ' as a tar.gz archive'})),
        el('td', {class: 'small nowrap'},
          el('a', {href: CD.url('classify.html?job=' + enc + '&epoch=' + s.epoch), text: 'classify',
            'aria-label': 'classify images with the weights of epoch ' + epoch}), ' · ',
          el('a', {href: CD.url('model-new.html?previous=' + enc + '&epoch=' + s.epoch), text: 'new model',
            'aria-label': 'a new model from the weights of epoch ' + epoch}))));
    }
    const more = $('#snapshots-more');
    more.hidden = snaps.length <= 5;
    more.textContent = showAllSnapshots ? 'Show the last 5' : 'Show all ' + snaps.length;
  }

  const POLICY = {fixed: 'Fixed', step: 'Step Down', multistep: 'Step Down (arbitrary steps)', exp: 'Exponential Decay',
    inv: 'Inverse Decay', poly: 'Polynomial Decay', sigmoid: 'Sigmoid Decay'};

  function renderDetails(ds) {
    const kv = clear($('#details'));
    const t = job.train || {};
    const row = (k, v) => { if (v !== null && v !== undefined && v !== '') kv.append(el('dt', {text: k}), el('dd', {}, v)); };
    row('Dataset', job.dataset_id ? el('a', {href: CD.url('datasets/' + encodeURIComponent(job.dataset_id)), text: ds ? ds.name : job.dataset_id}) : '–');
    const n = job.network || {};
    row('Network', el('span', {}, n.method === 'standard' ? 'standard ' + n.standard_network
      : n.method === 'previous' ? el('span', {}, 'from ', el('a', {href: CD.url('models/' + encodeURIComponent(n.previous_job)), text: n.previous_job}), n.epoch ? ', epoch ' + n.epoch : '')
        : 'custom', ' · ', el('a', {href: fileUrl('network.prototxt'), text: 'network.prototxt'})));
    if (t.pretrained) row('Pretrained', el('span', {class: 'mono small', text: t.pretrained}));
    row('Epochs', String(t.epochs));
    row('Batch size', (t.batch_size === 'auto' ? 'auto (the largest that fits)' : t.batch_size ? String(t.batch_size) : 'network default') +
      (t.batch_accumulation > 1 ? ' × ' + t.batch_accumulation + ' accumulated' : ''));
    const b = job.batch;
    if (b && b.batch) row('Batch used', b.batch + ' × ' + (b.accumulation || 1) + ' = ' + (b.effective || b.batch) + (b.reason ? ' (' + b.reason + ')' : ''));
    row('Precision', t.precision || 'fp32');
    if (t.early_stopping_patience > 0) {
      row('Early stopping', 'after ' + t.early_stopping_patience + ' validation' + (t.early_stopping_patience > 1 ? 's' : '') +
        ' without a val loss lower by more than ' + CD.num(t.early_stopping_min_delta || 0));
    }
    row('Solver', t.solver_type);
    row('Base learning rate', CD.num(t.learning_rate));
    const p = t.lr_policy || {};
    const pp = {step: 'step ' + p.stepsize + '%, gamma ' + p.gamma, multistep: 'steps ' + p.steps + '%, gamma ' + p.gamma,
      exp: 'gamma ' + p.gamma, inv: 'gamma ' + p.gamma + ', power ' + p.power, poly: 'power ' + p.power,
      sigmoid: 'step ' + p.stepsize + '%, gamma ' + p.gamma}[p.policy];
    row('Policy', (POLICY[p.policy] || p.policy) + (pp ? ' (' + pp + ')' : ''));
    row('Momentum', t.momentum === null || t.momentum === undefined ? 'default' : CD.num(t.momentum));
    row('Weight decay', CD.num(t.weight_decay));
    if (t.solver_type === 'RMSPROP') row('RMS decay', CD.num(t.rms_decay));
    row('Intervals', 'validation every ' + t.validation_interval + ', snapshot every ' + t.snapshot_interval + ' epoch(s)');
    row('Mean', t.use_mean);
    const FLIP = {fliplr: 'horizontal flips', flipud: 'vertical flips', fliplrud: 'horizontal and vertical flips'};
    row('Crop, flips', (t.crop_size ? 'crop ' + t.crop_size : 'no crop') + ', ' +
      /* use_mirror absent: the network's transform_param { mirror } decides */
      [t.use_mirror === true ? 'mirror' : t.use_mirror === false ? 'no mirror' : "network's mirror setting",
        FLIP[t.flip] || ''].filter(Boolean).join(', ') +
      (t.shuffle === false ? ', stored order' : ', shuffled'));
    row('Random seed', t.random_seed === null || t.random_seed === undefined ? 'none' : String(t.random_seed));
    const r = job.resources || {};
    const sel = r.selected ? (r.selected.ids ? 'GPUs ' + r.selected.ids.join(', ') : r.selected.count + ' GPUs') : '';
    row('Hardware', r.kind === 'gpu' ? (r.ids ? 'GPU' + (r.ids.length > 1 ? 's ' : ' ') + r.ids.join(', ') : r.count + ' GPU' + (r.count > 1 ? 's' : '')) +
      (r.data_parallel === false ? ', data parallelism off' + (sel ? ' (' + sel + ' selected)' : '') : '') : 'CPU');
    row('Job folder', el('span', {class: 'mono small', text: job.directory}));
  }

  let datasetDetail = null;
  async function loadDataset() {
    if (!job || !job.dataset_id || datasetDetail) return;
    try {
      datasetDetail = await api('GET', '/datasets/' + encodeURIComponent(job.dataset_id) + '/json');
      renderDetails(datasetDetail);
      if (charts && charts.iou) { makeCharts(); updateCharts(true); } /* the classes' names */
    } catch (e) { /* the dataset may be gone; the id is shown */ }
  }

  /* The network as the engine builds it (POST /models/visualize-network/json with this
   * model as the previous network); read in the browser when the server cannot answer. */
  function visualize() {
    const d = $('#net-dialog');
    if (!d.open) d.showModal();
    CD.net.show(async () => {
      await loadDataset(); /* its image shape and classes size the network */
      const res = await fetch(fileUrl('network.prototxt'));
      if (!res.ok) throw new Error('cannot read network.prototxt (HTTP ' + res.status + ')');
      const crop = job.train && job.train.crop_size || 0;
      const body = {method: 'previous', previous_networks: job.id};
      if (datasetDetail) body.dataset = job.dataset_id;
      if (crop) body.crop_size = String(crop);
      if (job.train && Number.isInteger(job.train.batch_size)) body.batch_size = String(job.train.batch_size);
      return {text: await res.text(), body, crop, dataset: datasetDetail};
    });
  }

  /* ---- actions ---------------------------------------------------------------------------------- */

  async function resume() {
    try {
      const r = await api('POST', '/models/' + enc + '/resume', {});
      CD.toast(r.resumed_from_epoch ? 'Resuming from epoch ' + r.resumed_from_epoch : 'Restarting from the beginning');
      $('#resume').hidden = true;
    } catch (e) {
      CD.toast(CD.actionError(e), 'error');
    }
  }

  /* ---- render ------------------------------------------------------------------------------------ */

  function render(j) {
    const wasRunning = job && job.status === 'Running';
    job = j;
    P.setJob(j);
    if (j.status !== 'Running' || !wasRunning) samples = [];
    $('#resume').hidden = j.running || j.status === 'Done';
    if (progress.pct === 0 || !j.running) progress.pct = j.progress;
    renderProgress();
    renderSnapshots();
    renderDetails(datasetDetail);
    renderAdvice();
    hwIdle();
  }

  const reloadSoon = CD.debounce(() => P.reload().then((j) => j && render(j)).catch(() => {}), 200);

  P.init();
  CD.net.view($('#net-view'));
  $('#resume').addEventListener('click', resume);
  $('#log-loss').addEventListener('change', () => { makeCharts(); updateCharts(true); });
  $('#snapshots-more').addEventListener('click', () => { showAllSnapshots = !showAllSnapshots; renderSnapshots(); });
  $('#visualize').addEventListener('click', visualize);
  $('#net-stage').addEventListener('change', visualize);
  $('#net-close').addEventListener('click', () => $('#net-dialog').close());

  /* The first view is complete before the page's load event: job, metrics, charts. */
  const first = CD.getInitial('/models/' + enc + '/json');
  const firstMetrics = CD.getInitial('/models/' + enc + '/metrics/json');
  if (firstMetrics) for (const m of firstMetrics.metrics || []) addMetric(m);
  if (first) render(first);
  else P.reload().then((j) => { if (j) { render(j); updateCharts(); } }).catch(P.notFound);
  makeCharts();
  updateCharts(true);
  if (!firstMetrics) loadMetrics();
  P.loadLog();
  loadDataset();
  CD.hardware().then(showNvml).catch(() => {});
  setInterval(() => { if (job && job.status === 'Running') renderProgress(); }, 1000);

  CD.events('/jobs/' + enc + '/events', {
    job: (j) => { P.supersede(); render(j); loadDataset(); },
    open: () => { loadMetrics(); P.loadLog(); },
    status: (ev) => {
      if (job) {
        job.status = ev.status;
        job.status_css = ev.css;
        job.running = ev.running;
        job.wait_reason = ev.wait_reason || '';
        render(job);
      }
      reloadSoon();
    },
    progress: setProgress,
    metric: (m) => { if (addMetric(m)) updateCharts(); },
    snapshot: reloadSoon,
    device: reloadSoon,
    attribute: reloadSoon,
    resumed: () => { progress = {pct: progress.pct, epoch: null, done: null, total: null}; loadMetrics(true); reloadSoon(); },
    log: (ev) => P.logLine(ev),
    hw: renderHw,
    advice: (ev) => { if (job) { job.advice = ev; renderAdvice(); } },
    batch: (ev) => { if (job) { job.batch = ev; renderDetails(datasetDetail); } },
    job_removed: () => { CD.toast('This model was deleted'); setTimeout(() => { location.href = CD.url(''); }, 1500); },
  });
})();
