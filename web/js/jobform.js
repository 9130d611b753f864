/* What the new dataset and new model forms share: the note that says to log in, the card
 * that names the job (group, name, the form's errors and Create), the group names of
 * earlier jobs to choose from, and the submit that posts the form, shows the server's
 * errors next to their fields and opens the job it made.
 *
 *   CD.jobform.init({form, kind, path, collect, created, onErrors})
 *     kind      'dataset' or 'model': the name field is KIND_name
 *     path      where the form is posted (or a function that says it)
 *     collect() the body to post
 *     created(answer)  -> {text, href}: what the page says, and where it goes
 *     onErrors(error)  before the errors show (opens the tab of a field in error)
 *   CD.jobform.groups(lists)  offers the groups of a /completed_jobs/json answer
 *
 * The page holds an empty <section class="card" id="name-card"> where the card goes. */
'use strict';

(function () {
  const {el, $, api} = CD;

  function loginNote(form, kind) {
    const link = el('a', {id: 'login-link', href: CD.url('login.html'), text: 'Log in'});
    const note = el('p', {class: 'note', id: 'login-note', hidden: true},
      'You are not logged in. ', link, ' to create a ' + kind + '.');
    form.before(note);
    CD.user().then((u) => {
      if (!u) {
        link.href = CD.loginUrl();
        note.hidden = false;
      }
    });
    return note;
  }

  function nameCard(card, kind) {
    const title = kind === 'model' ? 'Model' : 'Dataset';
    const name = kind + '_name';
    card.setAttribute('aria-labelledby', 'name-title');
    card.append(el('h2', {id: 'name-title', text: title}),
      el('div', {class: 'field-row'},
        CD.field('Group name', el('input', {type: 'text', id: 'group_name', name: 'group_name', list: 'group-names', autocomplete: 'off'}),
          {help: 'Optional: jobs of a group are listed together on the home page.'}),
        CD.field(title + ' name', el('input', {type: 'text', id: name, name, required: true, autocomplete: 'off'}))),
      el('datalist', {id: 'group-names'}),
      el('div', {class: 'form-error', role: 'alert'}),
      el('div', {class: 'form-actions'},
        el('button', {type: 'submit', class: 'primary', id: 'create', text: 'Create'}),
        el('span', {class: 'muted small', id: 'create-state', 'aria-live': 'polite'})));
  }

  function groups(lists) {
    if (!lists) return;
    const names = new Set([].concat(lists.running, lists.datasets, lists.models).map((j) => j && j.group).filter(Boolean));
    $('#group-names').replaceChildren(...[...names].map((g) => el('option', {value: g})));
  }

  function init(o) {
    const {form, kind} = o;
    const note = loginNote(form, kind);
    nameCard($('#name-card'), kind);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      CD.clearErrors(form);
      const button = $('#create');
      button.disabled = true;
      CD.setText('#create-state', 'Creating…');
      try {
        const done = o.created(await api('POST', typeof o.path === 'function' ? o.path() : o.path, o.collect()));
        CD.setText('#create-state', done.text);
        location.href = done.href;
        return;
      } catch (e) {
        if (e.status === 401) {
          e.message = 'Log in first: only a logged-in user can create ' + kind + 's.';
          note.hidden = false;
        }
        if (e.fields && o.onErrors) o.onErrors(e);
        CD.showErrors(form, e);
        CD.setText('#create-state', '');
      }
      button.disabled = false;
    });
  }

  CD.jobform = {init, groups};
})();
