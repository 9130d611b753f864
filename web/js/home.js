/* Home: running jobs with their progress, the models and datasets by group, bulk
 * delete, abort and group, live through the /events stream. */
'use strict';

(function () {
  const {el, $, $$, clear, api} = CD;

  let data = {running: [], datasets: [], models: []};
  let loadedAt = Date.now() / 1000;
  const selected = new Set();
  const collapsed = new Set();

  function allJobs() {
    return data.running.concat(data.datasets, data.models);
  }

  function datasetName(id) {
    const d = allJobs().find((j) => j.id === id);
    return d ? d.name : id;
  }

  function elapsedNow(job) {
    return (job.elapsed || 0) + Date.now() / 1000 - loadedAt;
  }

  function matches(job, q) {
    if (!q) return true;
    const hay = [job.name, job.group, job.username, job.status, job.id].join(' ').toLowerCase();
    return q.toLowerCase().split(/\s+/).every((w) => hay.includes(w));
  }

  function output(job, name) {
    const v = job[name + ' last'];
    return typeof v === 'number' ? v : null;
  }

  function selectBox(job) {
    return el('input', {type: 'checkbox', class: 'sel', 'aria-label': 'Select ' + job.name, checked: selected.has(job.id),
      dataset: {id: job.id}, on: {change: (ev) => {
        ev.target.checked ? selected.add(job.id) : selected.delete(job.id);
        ev.target.closest('tr').classList.toggle('selected', ev.target.checked);
        updateBulk();
      }}});
  }

  function nameCell(job) {
    return el('td', {class: 'name'}, el('a', {href: CD.jobUrl(job), text: job.name}));
  }

  function statusCell(job) {
    const td = el('td', {class: 'status-cell', dataset: {id: job.id}}, CD.badge(job.status, job.status_css));
    if (job.wait_reason) td.append(el('div', {class: 'small muted', text: job.wait_reason}));
    if (job.interrupted) td.append(el('div', {class: 'small muted', text: 'interrupted by a server stop'}));
    return td;
  }

  function ownerCell(job) {
    return el('td', {class: 'opt owner', text: job.username || '–'});
  }

  /* ---- running ----------------------------------------------------------------------- */

  function renderRunning() {
    const tbody = $('#running-table tbody');
    clear(tbody);
    for (const job of data.running) {
      const bar = CD.progressBar(job.progress);
      const abort = el('button', {type: 'button', class: 'small danger', text: 'Abort',
        'aria-label': 'Abort ' + job.name, on: {click: () => bulk('abort', [job.id])}});
      tbody.append(el('tr', {dataset: {id: job.id}},
        nameCell(job),
        el('td', {class: 'opt', text: job.type === 'model' ? 'Model' : 'Dataset'}),
        statusCell(job),
        el('td', {}, el('div', {class: 'progress-line'}, bar, el('span', {class: 'pct', text: (job.progress || 0) + '%'}))),
        el('td', {class: 'opt nowrap', text: CD.date(job.submitted)}),
        el('td', {class: 'num elapsed opt', dataset: {id: job.id}, text: CD.duration(elapsedNow(job))}),
        ownerCell(job),
        el('td', {}, abort)));
    }
    $('#running-table').hidden = data.running.length === 0;
    $('#running-empty').hidden = data.running.length !== 0;
    CD.setText('#running-count', data.running.length ? '(' + data.running.length + ')' : '');
  }

  /* ---- datasets and models, grouped --------------------------------------------------- */

  function groupsOf(jobs) {
    const groups = new Map();
    for (const j of jobs) {
      const g = j.group || '';
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(j);
    }
    /* ungrouped first, then groups by name */
    return Array.from(groups.entries()).sort((a, b) => (a[0] === '' ? -1 : b[0] === '' ? 1 : a[0].localeCompare(b[0])));
  }

  function renderTable(kind) {
    const q = $('#filter').value.trim();
    const jobs = data[kind].filter((j) => matches(j, q));
    const tbody = $('#' + kind + '-table tbody');
    const cols = kind === 'models' ? 9 : 6;
    clear(tbody);
    for (const [group, list] of groupsOf(jobs)) {
      const key = kind + ':' + group;
      if (group) {
        const open = !collapsed.has(key);
        const groupCheck = el('input', {type: 'checkbox', 'aria-label': 'Select every job of group ' + group,
          checked: list.every((j) => selected.has(j.id)),
          on: {change: (ev) => { for (const j of list) ev.target.checked ? selected.add(j.id) : selected.delete(j.id); render(); }}});
        tbody.append(el('tr', {class: 'group-row'},
          el('td', {class: 'check'}, groupCheck),
          el('td', {colspan: cols - 1},
            el('button', {type: 'button', class: 'link', 'aria-expanded': String(open),
              text: (open ? '▾ ' : '▸ ') + group + ' (' + list.length + ')',
              on: {click: () => { open ? collapsed.add(key) : collapsed.delete(key); render(); }}}))));
        if (!open) continue;
      }
      for (const job of list) {
        const row = el('tr', {dataset: {id: job.id}, class: selected.has(job.id) ? 'selected' : null},
          el('td', {class: 'check'}, selectBox(job)), nameCell(job));
        if (kind === 'models') {
          const acc = output(job, 'accuracy (val)');
          const ds = job.dataset_id;
          row.append(el('td', {class: 'opt'}, ds ? el('a', {href: CD.url('datasets/' + encodeURIComponent(ds)), text: datasetName(ds)}) : '–'),
            statusCell(job),
            el('td', {class: 'num opt', text: CD.num(output(job, 'loss (val)'))}),
            el('td', {class: 'num', text: acc === null ? '–' : (100 * acc).toFixed(2) + '%'}));
        } else {
          row.append(statusCell(job));
        }
        row.append(el('td', {class: 'opt nowrap', text: CD.date(job.submitted)}),
          el('td', {class: 'num opt', text: CD.duration(job.elapsed)}),
          ownerCell(job));
        tbody.append(row);
      }
    }
    $('#' + kind + '-table').hidden = data[kind].length === 0;
    $('#' + kind + '-empty').hidden = data[kind].length !== 0;
    CD.setText('#' + kind + '-count', '(' + data[kind].length + ')');
    const all = $('#all-' + kind);
    all.checked = jobs.length > 0 && jobs.every((j) => selected.has(j.id));
  }

  function updateBulk() {
    const known = new Set(allJobs().map((j) => j.id));
    for (const id of Array.from(selected)) if (!known.has(id)) selected.delete(id);
    const n = selected.size;
    CD.setText('#selected-count', n + ' selected');
    for (const b of ['#bulk-group', '#bulk-abort', '#bulk-delete']) $(b).disabled = n === 0;
    const running = allJobs().filter((j) => selected.has(j.id) && ['Running', 'Waiting', 'Initialized'].includes(j.status));
    $('#bulk-abort').disabled = running.length === 0;
  }

  function render() {
    renderRunning();
    renderTable('models');
    renderTable('datasets');
    updateBulk();
    const groups = new Set(allJobs().map((j) => j.group).filter(Boolean));
    const dl = clear($('#group-names'));
    for (const g of groups) dl.append(el('option', {value: g}));
  }

  function accept(d) {
    if (!d) return;
    data = {running: d.running || [], datasets: d.datasets || [], models: d.models || []};
    loadedAt = Date.now() / 1000;
    render();
  }

  /* A reply is the last word only if no newer reload was sent and no status event was
   * applied in place while it was on its way (then it is read again). */
  let reloads = 0;
  let edits = 0;
  async function reload() {
    const mine = ++reloads;
    const editsBefore = edits;
    try {
      const d = await api('GET', '/completed_jobs/json');
      if (mine !== reloads) return;
      accept(d);
      if (edits !== editsBefore) reloadSoon();
    } catch (e) {
      if (mine === reloads) CD.toast('Cannot load the job lists: ' + e.message, 'error');
    }
  }
  const reloadSoon = CD.debounce(reload, 250);

  /* ---- bulk actions ------------------------------------------------------------------------ */

  async function bulk(op, ids) {
    ids = ids || Array.from(selected);
    if (!ids.length) return;
    const names = ids.map((id) => (allJobs().find((j) => j.id === id) || {name: id}).name);
    const what = ids.length === 1 ? '"' + names[0] + '"' : ids.length + ' jobs';
    try {
      if (op === 'delete') {
        if (!await CD.confirmDialog('Delete ' + what + '?', 'Their folders, snapshots and metrics are removed. This cannot be undone.', 'Delete', true)) return;
        await api('DELETE', '/jobs', {job_ids: ids});
        for (const id of ids) selected.delete(id);
        CD.toast(ids.length === 1 ? 'Deleted ' + what : 'Deleted ' + what);
      } else if (op === 'abort') {
        if (!await CD.confirmDialog('Abort ' + what + '?', 'Training stops after a last snapshot; a model can be resumed later.', 'Abort', true)) return;
        await api('POST', '/abort_jobs', {job_ids: ids});
        CD.toast('Aborted ' + what);
      } else if (op === 'group') {
        const d = $('#group-dialog');
        const first = allJobs().find((j) => j.id === ids[0]);
        $('#group-name').value = first && first.group ? first.group : '';
        d.returnValue = '';
        d.showModal();
        $('#group-name').select();
        const ok = await new Promise((resolve) => d.addEventListener('close', () => resolve(d.returnValue === 'ok'), {once: true}));
        if (!ok) return;
        await api('POST', '/group', {job_ids: ids, group_name: $('#group-name').value.trim()});
        CD.toast('Grouped ' + what);
      }
    } catch (e) {
      CD.toast(CD.actionError(e), 'error');
    }
    reload();
  }

  /* ---- tabs ---------------------------------------------------------------------------------- */

  function initTabs() {
    const selectTab = CD.tabs(['models', 'datasets'], (name) => {
      if (location.hash !== '#' + name) history.replaceState(null, '', '#' + name);
    });
    const h = location.hash.replace('#', '');
    selectTab(h === 'datasets' || h === 'models' ? h : (data.models.length || !data.datasets.length ? 'models' : 'datasets'));
  }

  /* ---- live --------------------------------------------------------------------------------- */

  function findRunning(id) {
    return data.running.find((j) => j.id === id);
  }

  function onStatus(ev) {
    const job = allJobs().find((j) => j.id === ev.job_id);
    if (!job) { reloadSoon(); return; }
    edits++;
    const wasRunning = data.running.includes(job);
    job.status = ev.status;
    job.status_css = ev.css;
    job.wait_reason = ev.wait_reason || '';
    for (const cell of $$('.status-cell[data-id="' + CSS.escape(job.id) + '"]')) {
      clear(cell).append(CD.badge(job.status, job.status_css));
      if (job.wait_reason) cell.append(el('div', {class: 'small muted', text: job.wait_reason}));
    }
    if (wasRunning !== !!ev.running) reloadSoon();
  }

  function onProgress(ev) {
    const job = findRunning(ev.job_id);
    if (!job) return;
    job.progress = ev.percentage;
    const row = $('#running-table tr[data-id="' + CSS.escape(ev.job_id) + '"]');
    if (!row) return;
    CD.setProgress($('.progress', row), ev.percentage);
    CD.setText($('.pct', row), ev.percentage + '%');
  }

  function tick() {
    for (const cell of $$('#running-table td.elapsed')) {
      const job = findRunning(cell.dataset.id);
      if (job && job.status === 'Running') cell.textContent = CD.duration(elapsedNow(job));
    }
  }

  /* ---- start ---------------------------------------------------------------------------------- */

  CD.initTopbar({noGpus: true});
  $('#filter').addEventListener('input', () => { renderTable('models'); renderTable('datasets'); updateBulk(); });
  $('#bulk-delete').addEventListener('click', () => bulk('delete'));
  $('#bulk-abort').addEventListener('click', () => bulk('abort'));
  $('#bulk-group').addEventListener('click', () => bulk('group'));
  for (const kind of ['models', 'datasets']) {
    $('#all-' + kind).addEventListener('change', (ev) => {
      const q = $('#filter').value.trim();
      for (const j of data[kind].filter((x) => matches(x, q))) ev.target.checked ? selected.add(j.id) : selected.delete(j.id);
      render();
    });
  }

  const first = CD.getInitial('/completed_jobs/json');
  if (first) accept(first); else reload();
  initTabs();
  api('GET', '/hardware/json').then((hw) => {
    const g = hw.resources && hw.resources.gpus;
    if (g && !CD.state.gpus) CD.setGpus(g.total || 0, g.free || 0); /* the stream's count is newer */
  }).catch(() => {});
  setInterval(tick, 1000);

  CD.events('/events', {
    gpus: (ev) => CD.setGpus(ev.total || 0, ev.free || 0),
    status: onStatus,
    progress: onProgress,
    job_added: reloadSoon,
    job_removed: reloadSoon,
    attribute: reloadSoon,
    open: () => reloadSoon(),
  });
})();
