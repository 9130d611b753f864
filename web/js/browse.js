/* A folder picker limited to the server's data roots, on GET /browse/json?path=DIR:
 *   {"path": "/abs/dir" | null, "parent": "/abs" | null, "roots": ["/data", ...],
 *    "dirs": [{"name": "cats", "path": "/abs/dir/cats"}, ...], "images": 12,
 *    "sample": "/abs/dir/first.png" | null}
 * (no path: the roots themselves as dirs). A folder the server refuses (typed outside
 * the roots, or gone) shows the roots with the server's message. A server without the
 * route answers 404 to the first Browse; the buttons are then hidden and folders are
 * typed. (The route is not probed at load: a 404 there would log an error in every
 * page's console.) init({onChoose(input, listing)}) gives each <input class="folder"> of
 * the page its Browse button and hears each choice with the chosen folder's listing;
 * the dialog is made then, when the page has such an input. */
'use strict';

(function () {
  const {el, $, $$, clear, api} = CD;
  let target = null;
  let current = null;
  let listing = null;
  let onChoose = null;

  async function show(path) {
    const list = clear($('#browse-list'));
    CD.setText('#browse-error', '');
    try {
      const d = await api('GET', '/browse/json' + (path ? '?path=' + encodeURIComponent(path) : ''));
      listing = d;
      current = d.path || null;
      CD.setText('#browse-path', current || 'Data roots');
      const info = [];
      if (typeof d.images === 'number') info.push(d.images + ' image' + (d.images === 1 ? '' : 's') + ' directly in this folder');
      if (d.dirs) info.push(d.dirs.length + ' folder' + (d.dirs.length === 1 ? '' : 's'));
      CD.setText('#browse-info', info.join(', '));
      if (current) {
        list.append(el('li', {}, el('button', {type: 'button', text: '⬑ ' + (d.parent ? 'Up to ' + d.parent : 'Data roots'),
          on: {click: () => show(d.parent || '')}})));
      }
      for (const dir of d.dirs || []) {
        list.append(el('li', {}, el('button', {type: 'button', text: '📁 ' + dir.name, on: {click: () => show(dir.path)}})));
      }
      $('#browse-choose').disabled = !current;
      const firstButton = $('#browse-list button');
      if (firstButton) firstButton.focus();
    } catch (e) {
      if (e.status === 404 && /requested URL/i.test(e.message)) {
        unsupported();
      } else if (path && e.status === 400) {
        await show('');
        CD.setText('#browse-error', e.message);
      } else {
        CD.setText('#browse-error', e.message);
      }
    }
  }

  function open(input) {
    target = input;
    const d = $('#browse-dialog');
    d.showModal();
    show(input.value.trim() || '');
  }

  /* The dialog, at the end of the page's body. */
  function dialog() {
    const d = el('dialog', {id: 'browse-dialog', 'aria-labelledby': 'browse-title'},
      el('h2', {id: 'browse-title', text: 'Choose a folder'}),
      el('p', {class: 'mono small', id: 'browse-path'}),
      el('p', {class: 'muted small', id: 'browse-info'}),
      el('ul', {class: 'folder-list', id: 'browse-list'}),
      el('p', {class: 'form-error', id: 'browse-error', role: 'alert'}),
      el('div', {class: 'dialog-actions'},
        el('button', {type: 'button', id: 'browse-cancel', text: 'Cancel'}),
        el('button', {type: 'button', id: 'browse-choose', class: 'primary', text: 'Choose this folder'})));
    document.body.append(d);
    return d;
  }

  function init(opts) {
    if (!$$('input.folder').length) return;
    const d = $('#browse-dialog') || dialog();
    onChoose = opts && opts.onChoose;
    $('#browse-cancel').addEventListener('click', () => d.close());
    $('#browse-choose').addEventListener('click', () => {
      if (target && current) {
        target.value = current;
        target.dispatchEvent(new Event('input', {bubbles: true}));
        target.focus();
        if (onChoose) onChoose(target, listing);
      }
      d.close();
    });
    const missing = sessionStorage.getItem('cd-browse-missing') === '1';
    for (const input of $$('input.folder')) {
      const box = el('div', {class: 'inline-input'});
      input.autocomplete = 'off';
      input.spellcheck = false;
      input.replaceWith(box);
      box.append(input, el('button', {type: 'button', class: 'browse', 'data-target': input.id, text: 'Browse…', hidden: missing,
        on: {click: () => open(input)}}));
    }
    if (missing) showTypeNote();
  }

  function showTypeNote() {
    const note = $('#browse-note');
    if (!note) return;
    note.textContent = 'Type each folder as an absolute path on the server. It must be inside one of the ' +
      'folders the server was started with (cdigits serve --data-root).';
    note.hidden = false;
  }

  /* A server without the route: say so once, then hide the buttons for this session. */
  function unsupported() {
    sessionStorage.setItem('cd-browse-missing', '1');
    CD.setText('#browse-path', '');
    CD.setText('#browse-info', '');
    CD.setText('#browse-error', 'This server cannot list its folders. Type the absolute path of a folder ' +
      'inside its data roots (cdigits serve --data-root) instead.');
    $('#browse-choose').disabled = true;
    for (const b of $$('button.browse')) b.hidden = true;
    showTypeNote();
  }

  CD.browse = {init, open};
})();
