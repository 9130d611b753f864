/* What every page shares: URLs relative to where the UI is served (so a --url-prefix
 * works), the JSON API with DIGITS's error shapes, form errors next to their fields,
 * the top bar (login, GPUs available), dialogs, toasts, formatting and live events.
 * Loaded first, without defer, by every page; exposes one global, CD. */
'use strict';

(function () {
  const here = document.currentScript ? document.currentScript.src : location.href;
  /* js/common.js sits one folder below the UI root, which is also the server root. */
  const base = new URL('..', here);

  function url(path) {
    return new URL(String(path).replace(/^\//, ''), base).href;
  }

  /* ---- DOM ------------------------------------------------------------------------ */

  /* el('a', {class: 'x', href: '...', text: 'hi', on: {click: f}}, child, ...) */
  function el(tag, props, ...children) {
    const node = tag === 'svg' || (props && props.svg)
      ? document.createElementNS('http://www.w3.org/2000/svg', tag)
      : document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false || k === 'svg') continue;
      if (k === 'text') node.textContent = v;
      else if (k === 'class') node.setAttribute('class', v);
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
      else if (k === 'dataset') Object.assign(node.dataset, v);
      else if (k === 'checked' || k === 'selected' || k === 'value' || k === 'disabled' || k === 'multiple') node[k] = v;
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) append(node, c);
      else node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    return el(tag, Object.assign({svg: true}, attrs), ...children);
  }

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $$(sel, root) { return Array.from((root || document).querySelectorAll(sel)); }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  function setText(sel, text) {
    const n = typeof sel === 'string' ? $(sel) : sel;
    if (n) n.textContent = text;
  }

  /* Every page's icon. The stylesheet stays a link in each page's HTML, so that the
   * first paint is already styled. */
  document.head.append(el('link', {rel: 'icon', href: url('favicon.svg'), type: 'image/svg+xml'}));

  /* A field of a form as the pages write it: <div class="field"> with a label for the
   * input (or select), the input, and a help line when there is one. opts: help (text or
   * nodes), and the div's class (after "field"), hidden and dataset. */
  function field(label, input, opts) {
    const o = opts || {};
    return el('div', {class: 'field' + (o.class ? ' ' + o.class : ''), hidden: o.hidden, dataset: o.dataset},
      el('label', {for: input.id, text: label}), input, o.help ? el('span', {class: 'help'}, o.help) : null);
  }

  /* A tab list: tab #tab-NAME shows panel #panel-NAME for each name of names; a click
   * selects a tab, ArrowRight and ArrowLeft the next and the previous one (focused).
   * onSelect(name) runs after each selection. Returns select(name, focus). */
  function tabs(names, onSelect) {
    function select(name, focus) {
      for (const t of names) {
        const tab = $('#tab-' + t), on = t === name;
        tab.setAttribute('aria-selected', String(on));
        tab.tabIndex = on ? 0 : -1;
        $('#panel-' + t).hidden = !on;
        if (on && focus) tab.focus();
      }
      if (onSelect) onSelect(name);
    }
    names.forEach((t, i) => {
      const tab = $('#tab-' + t);
      tab.addEventListener('click', () => select(t));
      tab.addEventListener('keydown', (ev) => {
        const step = {ArrowRight: 1, ArrowLeft: names.length - 1}[ev.key];
        if (step) select(names[(i + step) % names.length], true);
      });
    });
    return select;
  }

  /* ---- the API ------------------------------------------------------------------------ */

  class ApiError extends Error {
    constructor(status, data, text) {
      const e = data && data.error;
      const msg = (e && (e.description || e.message)) ||
        (data && data.errors ? 'Some fields need attention' : '') || text || ('HTTP ' + status);
      super(msg);
      this.status = status;
      this.fields = data && data.errors ? data.errors : null;
      this.data = data;
    }
  }

  /* method, path, and a body: a plain object is sent as JSON, FormData as multipart.
   * Resolves with the JSON (or text) answer; rejects with ApiError. */
  async function api(method, path, body, opts) {
    const init = {method, credentials: 'same-origin', headers: {Accept: 'application/json'}};
    if (body instanceof FormData) {
      init.body = body;
    } else if (body !== undefined && body !== null) {
      init.body = JSON.stringify(body);
      init.headers['Content-Type'] = 'application/json';
    }
    if (opts && opts.signal) init.signal = opts.signal;
    let res;
    try {
      res = await fetch(url(path), init);
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, null, 'The server did not answer (' + e.message + '); is cdigits still running?');
    }
    const text = await res.text();
    let data = null;
    if ((res.headers.get('Content-Type') || '').includes('json')) {
      try { data = JSON.parse(text); } catch (e) { data = null; }
    }
    if (!res.ok) throw new ApiError(res.status, data, text);
    return data !== null ? data : text;
  }

  /* The first data of a page, read before the page finishes loading, so that its first
   * paint (and whatever reads the DOM at the load event) shows the jobs and charts, as
   * DIGITS's server-rendered pages did. Everything after it is asynchronous. Returns
   * null when the request fails; the page then loads the data asynchronously. */
  function getInitial(path) {
    try {
      const x = new XMLHttpRequest();
      x.open('GET', url(path), false);
      x.setRequestHeader('Accept', 'application/json');
      x.send();
      if (x.status >= 200 && x.status < 300) return JSON.parse(x.responseText);
    } catch (e) { /* fall back to the asynchronous load */ }
    return null;
  }

  /* ---- form errors next to their fields ---------------------------------------------- */

  function errorSlot(form, name) {
    let slot = form.querySelector('.field-error[data-for="' + CSS.escape(name) + '"]');
    if (slot) return slot;
    const input = form.querySelector('[name="' + CSS.escape(name) + '"]');
    if (!input) return null;
    const field = input.closest('.field') || input.parentElement;
    slot = el('span', {class: 'field-error', 'data-for': name, role: 'alert'});
    field.appendChild(slot);
    return slot;
  }

  function clearErrors(form) {
    for (const s of $$('.field-error', form)) s.textContent = '';
    for (const i of $$('[aria-invalid="true"]', form)) i.removeAttribute('aria-invalid');
    const fe = $('.form-error', form);
    if (fe) fe.textContent = '';
  }

  /* Shows an ApiError on form: {errors: {field: [msg]}} next to each field (the form's
   * .form-error for fields it does not show), or the message in .form-error. Focuses
   * the first field in error. `alias` maps API field names to the form's. */
  function showErrors(form, err, alias) {
    clearErrors(form);
    const general = $('.form-error', form);
    const loose = [];
    let first = null;
    if (err && err.fields) {
      for (const [name0, msgs] of Object.entries(err.fields)) {
        const name = (alias && alias[name0]) || name0;
        const text = [].concat(msgs).join(' ');
        const slot = errorSlot(form, name);
        const input = form.querySelector('[name="' + CSS.escape(name) + '"]');
        if (slot && !(input && input.closest('[hidden]'))) {
          slot.textContent = text;
          if (input) {
            input.setAttribute('aria-invalid', 'true');
            if (!slot.id) slot.id = 'err-' + name.replace(/[^a-zA-Z0-9_-]/g, '_');
            input.setAttribute('aria-describedby', slot.id);
            /* the first in the page, not in the answer */
            if (!first || (first.compareDocumentPosition(input) & Node.DOCUMENT_POSITION_PRECEDING)) first = input;
          }
        } else {
          loose.push(text);
        }
      }
    } else if (err) {
      loose.push(err.message || String(err));
    }
    if (general) general.textContent = loose.join(' ');
    if (first) {
      /* a field inside a closed tab or details is opened before it is focused */
      const det = first.closest('details');
      if (det) det.open = true;
      first.focus();
    } else if (general && loose.length) {
      general.scrollIntoView({block: 'center'});
    }
  }

  /* ---- formatting ------------------------------------------------------------------------ */

  function duration(s) {
    if (s === null || s === undefined || !isFinite(s)) return '–';
    s = Math.max(0, Math.round(s));
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60), sec = s % 60;
    if (d) return d + 'd ' + h + 'h';
    if (h) return h + 'h ' + m + 'm';
    if (m) return m + 'm ' + sec + 's';
    return sec + 's';
  }

  function pad(n) { return n < 10 ? '0' + n : '' + n; }

  function date(ts) {
    if (!ts) return '–';
    const d = new Date(ts * 1000);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }

  function ago(ts) {
    if (!ts) return '–';
    const s = Date.now() / 1000 - ts;
    if (s < 60) return 'just now';
    return duration(s) + ' ago';
  }

  function bytes(n) {
    if (n === null || n === undefined || !isFinite(n)) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0) : n) + ' ' + u[i];
  }

  function num(v, digits) {
    if (v === null || v === undefined || !isFinite(v)) return '–';
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(digits === undefined ? 2 : Math.max(0, digits - 1));
    if (Number.isInteger(v)) return v.toLocaleString('en-US');
    return v.toPrecision(digits || 4).replace(/(\.\d*?)0+$/, '$1').replace(/\.$/, '');
  }

  function count(v) {
    return v === null || v === undefined ? '–' : Number(v).toLocaleString('en-US');
  }

  function statusClass(css) {
    return 'st-' + (['info', 'success', 'warning', 'danger'].includes(css) ? css : 'default');
  }

  function cssOf(status) {
    return {Running: 'info', Done: 'success', Waiting: 'warning', Initialized: 'warning', Aborted: 'warning',
      Error: 'danger'}[status] || 'default';
  }

  function badge(status, css) {
    return el('span', {class: 'badge ' + statusClass(css || cssOf(status)), text: status || '?'});
  }

  function progressBar(pct, done) {
    const span = el('span');
    span.style.width = Math.max(0, Math.min(100, pct || 0)) + '%';
    return el('div', {class: 'progress' + (done ? ' done' : ''), role: 'progressbar', 'aria-valuemin': 0,
      'aria-valuemax': 100, 'aria-valuenow': Math.round(pct || 0)}, span);
  }

  function setProgress(bar, pct) {
    if (!bar) return;
    const p = Math.max(0, Math.min(100, pct || 0));
    bar.firstChild.style.width = p + '%';
    bar.setAttribute('aria-valuenow', Math.round(p));
  }

  /* ---- dialogs and toasts ----------------------------------------------------------------- */

  function toast(message, kind) {
    let box = $('.toasts');
    if (!box) {
      box = el('div', {class: 'toasts', role: 'status', 'aria-live': 'polite'});
      document.body.appendChild(box);
    }
    const t = el('div', {class: 'toast' + (kind === 'error' ? ' error' : ''), text: message});
    box.appendChild(t);
    setTimeout(() => t.remove(), kind === 'error' ? 9000 : 4000);
  }

  /* A modal question; resolves true when confirmed. */
  function confirmDialog(title, message, okLabel, danger) {
    return new Promise((resolve) => {
      const ok = el('button', {type: 'submit', class: danger ? 'danger' : 'primary', value: 'ok', text: okLabel || 'OK'});
      const cancel = el('button', {type: 'submit', value: 'cancel', text: 'Cancel'});
      const d = el('dialog', {class: 'narrow', 'aria-labelledby': 'cd-confirm-title'},
        el('form', {method: 'dialog'},
          el('h2', {id: 'cd-confirm-title', text: title}),
          el('p', {text: message}),
          el('div', {class: 'dialog-actions'}, cancel, ok)));
      document.body.appendChild(d);
      d.addEventListener('close', () => {
        resolve(d.returnValue === 'ok');
        d.remove();
      });
      d.showModal();
      cancel.focus();
    });
  }

  /* ---- live events --------------------------------------------------------------------------- */

  /* Opens an SSE stream once the page has loaded; handlers maps event names to
   * functions of the parsed data. Returns a handle with close(). */
  function events(path, handlers) {
    const h = {es: null, closed: false, close() { this.closed = true; if (this.es) this.es.close(); }};
    const open = () => {
      if (h.closed) return;
      const es = new EventSource(url(path));
      h.es = es;
      for (const [name, fn] of Object.entries(handlers)) {
        if (name === 'open' || name === 'error') continue;
        es.addEventListener(name, (ev) => {
          let data = null;
          try { data = JSON.parse(ev.data); } catch (e) { return; }
          fn(data, ev);
        });
      }
      if (handlers.open) es.addEventListener('open', handlers.open);
      if (handlers.error) es.addEventListener('error', handlers.error);
    };
    if (document.readyState === 'complete') setTimeout(open, 0);
    else window.addEventListener('load', () => setTimeout(open, 0), {once: true});
    window.addEventListener('pagehide', () => h.close());
    return h;
  }

  /* ---- the top bar ------------------------------------------------------------------------------ */

  /* The links of the top bar: [page key, path under the UI root, text]. */
  const NAV = [['home', '', 'Home'], ['dataset-new', 'dataset-new.html', 'New dataset'], ['model-new', 'model-new.html', 'New model']];

  /* Fills each <header data-cd-header="KEY"> with the skip link (before it), the brand,
   * the links of NAV (KEY's marked aria-current="page"; KEY may be empty) and the GPU pill
   * and user box that initTopbar fills; data-pill is the pill's text until then. Runs when
   * parsing ends, before the deferred page scripts that look for #gpu-pill and #user-box. */
  function renderHeader() {
    for (const h of document.querySelectorAll('header[data-cd-header]')) {
      if (h.firstChild) continue;
      const current = h.dataset.cdHeader;
      h.classList.add('topbar');
      h.before(el('a', {class: 'skip-link', href: '#main', text: 'Skip to content'}));
      h.append(
        el('a', {class: 'brand', href: url('')}, el('span', {class: 'brand-mark', 'aria-hidden': 'true'}), 'cdigits'),
        el('nav', {class: 'topnav', 'aria-label': 'Main'},
          NAV.map(([key, path, text]) => el('a', {href: url(path), 'aria-current': key === current ? 'page' : null, text}))),
        el('div', {class: 'topbar-right'},
          el('span', {class: 'gpu-pill', id: 'gpu-pill', 'aria-live': 'polite', text: h.dataset.pill || ''}),
          el('span', {class: 'user', id: 'user-box'})));
    }
  }
  if (document.readyState !== 'loading') renderHeader();
  else document.addEventListener('readystatechange', renderHeader, {once: true});

  const state = {user: undefined, gpus: null};

  function renderUser() {
    const box = $('#user-box');
    if (!box) return;
    clear(box);
    if (state.user === undefined) return;
    const here = location.pathname + location.search;
    if (state.user) {
      box.append('Logged in as ', el('strong', {text: state.user}), ' ',
        el('button', {type: 'button', class: 'link small', id: 'logout', text: 'Log out', on: {click: logout}}));
    } else {
      box.append(el('a', {href: url('login.html') + '?next=' + encodeURIComponent(here), text: 'Log in'}));
    }
    document.dispatchEvent(new CustomEvent('cd:user', {detail: state.user}));
  }

  async function logout() {
    try {
      await api('POST', '/logout', {next: '/login'});
    } catch (e) { /* the cookie is cleared either way */ }
    state.user = null;
    renderUser();
    toast('Logged out');
  }

  function setGpus(total, free) {
    state.gpus = {total, free};
    const pill = $('#gpu-pill');
    if (!pill) return;
    if (!total) {
      pill.textContent = 'No GPU: training runs on the CPU';
      pill.classList.add('none');
    } else {
      pill.textContent = 'GPUs available ' + free + '/' + total;
      pill.classList.remove('none');
    }
  }

  async function loadUser() {
    try {
      const d = await api('GET', '/login');
      state.user = d && d.username ? d.username : null;
    } catch (e) {
      state.user = null;
    }
    renderUser();
    return state.user;
  }

  let userPromise = null;
  function user() {
    if (!userPromise) userPromise = loadUser();
    return userPromise;
  }

  /* Sends the browser to the login page (and back here after it) when no one is logged in. */
  async function requireLogin() {
    const u = await user();
    if (!u) location.href = url('login.html') + '?next=' + encodeURIComponent(location.pathname + location.search);
    return u;
  }

  function loginUrl() {
    return url('login.html') + '?next=' + encodeURIComponent(location.pathname + location.search);
  }

  /* The message of an action's error; a 401 says where to log in. */
  function actionError(e) {
    if (e && e.status === 401) return 'Log in first: only a logged-in user can change jobs.';
    return e && e.message ? e.message : String(e);
  }

  /* GET /hardware/json, read once per page and shared by whoever asks. */
  let hardwarePromise = null;
  function hardware() {
    if (!hardwarePromise) hardwarePromise = api('GET', '/hardware/json');
    return hardwarePromise;
  }

  /* Why the server watches no GPU (its "nvml" when not loaded), or '' when NVML is loaded. */
  function nvmlNote(hw) {
    const n = hw && hw.nvml;
    if (!n || n.loaded !== false) return '';
    return 'NVML is not loaded, so this server watches no GPU: ' + (n.reason || 'it gave no reason') +
      '. To train on GPUs, install the NVIDIA driver (or fix its libnvidia-ml.so.1) and restart the server.';
  }

  function initTopbar(opts) {
    const pill = $('#gpu-pill');
    if (pill && !(opts && opts.noGpus)) {
      hardware().then((hw) => {
        const g = hw && hw.resources && hw.resources.gpus;
        if (g && !state.gpus) setGpus(g.total || 0, g.free || 0);
        const note = nvmlNote(hw);
        if (note) pill.title = note;
      }).catch(() => { pill.textContent = ''; });
    }
    user();
  }

  function jobUrl(job) {
    return url((job.type === 'model' || job.dataset_id ? 'models/' : 'datasets/') + encodeURIComponent(job.id));
  }

  function param(name) {
    return new URLSearchParams(location.search).get(name);
  }

  /* Debounce: f runs once, ms after the last call. */
  function debounce(f, ms) {
    let t = null;
    return function (...a) {
      clearTimeout(t);
      t = setTimeout(() => f.apply(this, a), ms);
    };
  }

  /* Binary PGM/PPM (P5, P6), which browsers do not read, as an ImageData; null for
   * anything else. The server reads these (and the text forms) itself. */
  function netpbmImage(bytes) {
    if (bytes.length < 3 || bytes[0] !== 0x50 || (bytes[1] !== 0x35 && bytes[1] !== 0x36)) return null;
    const nums = [];
    let i = 2;
    while (nums.length < 3 && i < bytes.length) {
      const ch = bytes[i];
      if (ch === 0x23) { while (i < bytes.length && bytes[i] !== 0x0a) i++; continue; } /* # comment */
      if (ch >= 0x30 && ch <= 0x39) {
        let v = 0;
        while (i < bytes.length && bytes[i] >= 0x30 && bytes[i] <= 0x39) v = v * 10 + bytes[i++] - 0x30;
        nums.push(v);
        continue;
      }
      i++;
    }
    const [w, h, maxval] = nums;
    const c = bytes[1] === 0x36 ? 3 : 1, size = maxval > 255 ? 2 : 1;
    i++; /* the one white space after maxval */
    if (!w || !h || !maxval || w * h > (1 << 24) || bytes.length - i < w * h * c * size) return null;
    const img = new ImageData(w, h);
    for (let p = 0; p < w * h; p++) {
      for (let k = 0; k < 3; k++) {
        const at = i + (p * c + (c === 3 ? k : 0)) * size;
        const v = size === 2 ? (bytes[at] << 8) | bytes[at + 1] : bytes[at];
        img.data[4 * p + k] = Math.round(v * 255 / maxval);
      }
      img.data[4 * p + 3] = 255;
    }
    return img;
  }

  /* A picture from a file or a blob: what the browser reads, or binary PGM/PPM. */
  async function readPicture(blob) {
    try {
      return await createImageBitmap(blob);
    } catch (e) {
      const img = netpbmImage(new Uint8Array(await blob.arrayBuffer()));
      if (!img) throw e;
      return createImageBitmap(img);
    }
  }

  window.CD = {
    base: base.href, url, el, svg, append, $, $$, clear, setText, field, tabs, api, ApiError, getInitial, showErrors, clearErrors,
    duration, date, ago, bytes, num, count, badge, cssOf, statusClass, progressBar, setProgress, toast,
    confirmDialog, events, setGpus, user, requireLogin, loginUrl, actionError, initTopbar, hardware, nvmlNote, jobUrl,
    param, debounce, state, readPicture,
  };
})();
