/* What the dataset and model pages share: the job's id from the URL, its head (name,
 * status, owner, times), abort, delete, notes, the status history and the log. The head
 * is written into <div class="page-head" id="job-head">, around the page's own actions
 * there; the cards of the log, the history and the notes into the page's empty sections
 * #log-card, #history-card and #notes-card. */
'use strict';

(function () {
  const {el, $, clear, api} = CD;

  /* /datasets/<id> or /models/<id> (after any URL prefix) */
  const parts = location.pathname.split('/').filter(Boolean);
  const id = decodeURIComponent(parts[parts.length - 1] || '');
  const kind = parts[parts.length - 2] === 'models' ? 'model' : 'dataset';
  const state = {job: null, loadedAt: 0};

  function elapsed() {
    const j = state.job;
    if (!j) return 0;
    return j.running && j.status === 'Running' ? j.elapsed + Date.now() / 1000 - state.loadedAt : j.elapsed;
  }

  function renderHead(job) {
    document.title = job.name + ' · ' + (kind === 'model' ? 'Model' : 'Dataset') + ' · cdigits';
    CD.setText('#job-name', job.name);
    clear($('#job-status')).append(CD.badge(job.status, job.status_css));
    const meta = clear($('#job-meta'));
    CD.append(meta, [el('span', {text: job.job_type || (kind === 'model' ? 'Image Classification Model' : 'Image Classification Dataset')}),
      el('span', {text: 'owner ' + (job.username || 'nobody')}),
      job.group ? el('span', {text: 'group ' + job.group}) : null,
      el('span', {text: 'submitted ' + CD.date(job.submitted)}),
      el('span', {id: 'elapsed', text: 'elapsed ' + CD.duration(elapsed())}),
      el('span', {class: 'mono', text: job.id})]);
    const err = $('#job-error');
    err.hidden = !job.error;
    err.textContent = job.error ? 'Error: ' + job.error : '';
    $('#abort').hidden = !job.running;
    $('#clone').href = CD.url((kind === 'model' ? 'model-new.html' : 'dataset-new.html') + '?clone=' + encodeURIComponent(job.id));
    const notes = $('#job_notes');
    if (notes && document.activeElement !== notes && !notes.dataset.dirty) notes.value = job.notes || '';
  }

  function renderHistory(job) {
    const tbody = clear($('#history tbody'));
    const h = job.status_history || [];
    for (let i = 0; i < h.length; i++) {
      const [status, at, msg] = h[i];
      const next = i + 1 < h.length ? h[i + 1][1] : (job.running ? Date.now() / 1000 : null);
      tbody.append(el('tr', {},
        el('td', {}, CD.badge(status)),
        el('td', {class: 'nowrap', text: CD.date(at)}),
        el('td', {class: 'num', text: next ? CD.duration(next - at) : ''}),
        el('td', {class: 'small', text: msg || ''})));
    }
  }

  function setJob(job) {
    state.job = job;
    state.loadedAt = Date.now() / 1000;
    renderHead(job);
    renderHistory(job);
  }

  /* Answers the job, or null when its reply was overtaken (a newer reload, or the
   * stream's `job` event: supersede) and must not be shown. */
  let reloads = 0;
  async function reload() {
    const mine = ++reloads;
    const job = await api('GET', '/' + kind + 's/' + encodeURIComponent(id) + '/json');
    if (mine !== reloads) return null;
    setJob(job);
    return job;
  }
  function supersede() { reloads++; }

  /* ---- log ------------------------------------------------------------------------------ */

  /* Lines come from two places: the stored log (loadLog, at load and each time the events
   * stream (re)opens) and the stream's log events. Both carry the stored row id, so each line
   * shows once, in the order it was stored, whichever came first. */
  const logSeen = new Set();

  function logLine(entry) {
    const key = entry.id !== undefined ? 'id' + entry.id : entry.time + entry.message;
    if (logSeen.has(key)) return;
    logSeen.add(key);
    const box = $('#log');
    box.querySelector('.log-empty')?.remove();
    const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    const t = entry.time ? CD.date(entry.time).slice(11) + ' ' : '';
    const span = el('span', {class: 'lv-' + (entry.level || 'info'), text: t + (entry.level && entry.level !== 'info' ? entry.level + ': ' : '') + entry.message + '\n'});
    let next = null;
    if (entry.id !== undefined) {
      span.dataset.id = entry.id;
      for (let c = box.lastElementChild; c && c.dataset.id !== undefined && Number(c.dataset.id) > entry.id; c = c.previousElementSibling) next = c;
    }
    box.insertBefore(span, next);
    if (atEnd) box.scrollTop = box.scrollHeight;
  }

  async function loadLog() {
    const box = $('#log');
    try {
      const d = await api('GET', '/jobs/' + encodeURIComponent(id) + '/log/json?n=500');
      box.querySelector('.log-error')?.remove();
      for (const e of d.log || []) logLine(e);
    } catch (e) {
      box.querySelector('.log-error')?.remove();
      box.append(el('span', {class: 'lv-error log-error', text: 'Cannot read the log: ' + e.message + '\n'}));
    }
    if (!box.firstElementChild) box.append(el('span', {class: 'lv-stderr log-empty', text: 'No log line yet.\n'}));
  }

  /* ---- actions ----------------------------------------------------------------------------- */

  async function abort() {
    const model = kind === 'model';
    if (!await CD.confirmDialog('Abort ' + state.job.name + '?', model
      ? 'Training stops after saving a snapshot; you can resume it later.'
      : 'The dataset is left incomplete; clone it to make it again.', 'Abort', true)) return;
    try {
      await api('POST', '/' + kind + 's/' + encodeURIComponent(id) + '/abort', {});
      CD.toast('Aborting ' + state.job.name);
    } catch (e) {
      CD.toast(CD.actionError(e), 'error');
    }
  }

  async function del() {
    if (!await CD.confirmDialog('Delete ' + state.job.name + '?', 'Its folder' +
      (kind === 'model' ? ', snapshots and metrics are' : ' and records are') + ' removed. This cannot be undone.', 'Delete', true)) return;
    try {
      await api('DELETE', '/' + kind + 's/' + encodeURIComponent(id), {});
      location.href = CD.url('');
    } catch (e) {
      CD.toast(CD.actionError(e), 'error');
    }
  }

  async function saveNotes(ev) {
    ev.preventDefault();
    const form = ev.target;
    CD.clearErrors(form);
    try {
      await api('PUT', '/jobs/' + encodeURIComponent(id), {job_notes: $('#job_notes').value});
      delete $('#job_notes').dataset.dirty;
      CD.setText('#notes-state', 'Saved');
      setTimeout(() => CD.setText('#notes-state', ''), 3000);
    } catch (e) {
      if (e.status === 401) e.message = 'Log in first to edit the notes.';
      CD.showErrors(form, e, {job_notes: 'job_notes'});
    }
  }

  /* The head and the cards of the page (see the top of this file). */
  function renderFrame() {
    const model = kind === 'model';
    const head = $('#job-head');
    const own = [...head.children];
    head.append(el('h1', {id: 'job-name', text: model ? 'Model' : 'Dataset'}), el('span', {id: 'job-status'}),
      el('div', {class: 'actions button-row'}, own,
        el('button', {type: 'button', id: 'abort', class: 'danger', hidden: true, text: 'Abort'}),
        el('a', {class: 'button', id: 'clone', href: CD.url(model ? 'model-new.html' : 'dataset-new.html'), text: 'Clone'}),
        el('button', {type: 'button', id: 'delete', class: 'danger', text: 'Delete'})));
    head.after(el('p', {class: 'subtitle', id: 'job-meta'}), el('div', {class: 'error-box', id: 'job-error', role: 'alert', hidden: true}));
    const card = (sel, titleId, ...body) => {
      const c = $(sel);
      c.setAttribute('aria-labelledby', titleId);
      c.append(...body);
    };
    const logTitle = model ? 'Training log' : 'Creation log';
    card('#log-card', 'log-title',
      el('header', {}, el('h2', {id: 'log-title', text: logTitle}),
        el('div', {class: 'tools'}, el('label', {class: 'check-line small'},
          el('input', {type: 'checkbox', id: 'show-stderr'}), ' Show the worker\'s standard error'))),
      el('pre', {class: 'log hide-stderr', id: 'log', tabindex: 0, 'aria-label': logTitle}));
    card('#history-card', 'history-title', el('h2', {id: 'history-title', text: 'Status history'}),
      el('div', {class: 'table-wrap'}, el('table', {id: 'history'},
        el('thead', {}, el('tr', {}, ['Status', 'At', 'For', 'Note'].map((h) => el('th', {class: h === 'For' ? 'num' : null, text: h})))),
        el('tbody'))));
    card('#notes-card', 'notes-title', el('h2', {id: 'notes-title', text: 'Notes'}),
      el('form', {id: 'notes-form'},
        el('div', {class: 'field'},
          el('label', {for: 'job_notes', class: 'visually-hidden', text: 'Notes'}),
          el('textarea', {id: 'job_notes', name: 'job_notes', class: 'notes',
            placeholder: model ? 'What this run tries, what came of it…' : 'What this dataset is for, where the images came from…'})),
        el('div', {class: 'form-error', role: 'alert'}),
        el('div', {class: 'button-row'}, el('button', {type: 'submit', text: 'Save notes'}),
          el('span', {class: 'small muted', id: 'notes-state', 'aria-live': 'polite'}))));
  }

  function tick() {
    if (!state.job) return;
    CD.setText('#elapsed', 'elapsed ' + CD.duration(elapsed()));
  }

  function init() {
    renderFrame();
    CD.initTopbar();
    $('#abort').addEventListener('click', abort);
    $('#delete').addEventListener('click', del);
    $('#notes-form').addEventListener('submit', saveNotes);
    $('#job_notes').addEventListener('input', () => { $('#job_notes').dataset.dirty = '1'; });
    const se = $('#show-stderr');
    se.addEventListener('change', () => $('#log').classList.toggle('hide-stderr', !se.checked));
    setInterval(tick, 1000);
  }

  /* A 404 for the job: say so instead of an empty page. */
  function notFound(e) {
    CD.setText('#job-name', (kind === 'model' ? 'Model ' : 'Dataset ') + id + ' not found');
    const err = $('#job-error');
    err.hidden = false;
    err.textContent = e.message + ' It may have been deleted.';
  }

  CD.jobpage = {id, kind, state, setJob, reload, supersede, loadLog, logLine, renderHistory, init, notFound, elapsed};
})();
