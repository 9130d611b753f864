/* New generic dataset: the form of the data extension the URL names
 * (/datasets/generic/new/<extension_id>, or ?extension=), from its <template> in the
 * page (with the pieces it names by data-use, and the image options of image-fields.js),
 * posted to /datasets/generic/create/<extension_id>/json. A field shows only while
 * its data-show rule holds ("has_val_folder": the checkbox is checked; "method=folder":
 * the select has that value); hidden fields are not posted. ?clone=<id> fills the form
 * with the fields of another generic dataset. */
'use strict';

(function () {
  const {$, $$, api} = CD;
  const form = $('#dataset-form');
  const ext = CD.param('extension') || decodeURIComponent(location.pathname.split('/').filter(Boolean).pop() || '');
  const tpl = document.getElementById('ext-' + ext);

  for (const a of $$('#ext-nav a[data-ext]')) if (a.dataset.ext === ext) a.setAttribute('aria-current', 'page');
  if (!tpl) {
    const note = $('#ext-unknown');
    note.textContent = 'Unknown extension "' + ext + '": choose one of the data extensions above.';
    note.hidden = false;
    form.hidden = true;
    return;
  }
  document.title = 'New ' + tpl.dataset.title + ' Dataset · cdigits';
  $('#ext-title').textContent = 'New ' + tpl.dataset.title + ' Dataset';
  $('#ext-slot').append(tpl.content.cloneNode(true));
  for (const slot of $$('[data-use]', form)) slot.replaceWith(document.getElementById(slot.dataset.use).content.cloneNode(true));
  CD.imageFields.render(form);

  /* ---- fields that depend on others ------------------------------------------------------ */

  function holds(rule) {
    const [name, want] = rule.split('=');
    const input = form.querySelector('[name="' + CSS.escape(name) + '"]');
    if (!input) return false;
    return want === undefined ? input.checked : input.value === want;
  }

  function update() {
    for (const f of $$('[data-show]', form)) f.hidden = !holds(f.dataset.show);
  }
  form.addEventListener('change', update);
  update();

  /* ---- submit ------------------------------------------------------------------------------ */

  function collect() {
    const body = {};
    for (const input of $$('input, select, textarea', form)) {
      if (!input.name || input.disabled || input.closest('[hidden]')) continue;
      if (input.type === 'checkbox') {
        if (input.checked) body[input.name] = 'true';
      } else if (input.value.trim() !== '') {
        body[input.name] = input.value.trim();
      }
    }
    return body;
  }

  /* ---- clone ------------------------------------------------------------------------------- */

  async function fillFromClone(id) {
    try {
      const c = await api('GET', '/clone/' + encodeURIComponent(id) + '/json');
      for (const [k, v] of Object.entries(c.fields || {})) {
        const input = form.querySelector('[name="' + CSS.escape(k) + '"]');
        if (!input) continue;
        if (input.type === 'checkbox') input.checked = ['true', 'y', 'yes', 'on', '1'].includes(String(v).toLowerCase());
        else input.value = Array.isArray(v) ? v[0] : v;
      }
      update();
    } catch (e) {
      CD.toast('Cannot clone ' + id + ': ' + e.message, 'error');
    }
  }

  CD.jobform.init({form, kind: 'dataset', path: '/datasets/generic/create/' + encodeURIComponent(ext) + '/json', collect,
    created: (job) => ({text: 'Created ' + job.name, href: CD.url('datasets/' + encodeURIComponent(job.id))})});
  CD.browse.init({});
  api('GET', '/completed_jobs/json').then(CD.jobform.groups).catch(() => {});
  const clone = CD.param('clone');
  if (clone) fillFromClone(clone);
})();
