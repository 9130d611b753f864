/* Login with a username, as DIGITS: POST /login sets the username cookie. */
'use strict';

(function () {
  const {$} = CD;
  const form = $('#login-form');

  function next() {
    const n = CD.param('next');
    /* only paths of this server */
    return n && n.startsWith('/') && !n.startsWith('//') ? n : CD.url('');
  }

  CD.initTopbar();
  CD.user().then((u) => {
    if (u) CD.setText('#login-state', 'You are logged in as ' + u + '; log in again to change user.');
  });

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    CD.clearErrors(form);
    const username = $('#username').value.trim();
    try {
      /* next=/login: the redirect ends on GET /login, which answers who is logged in */
      const d = await CD.api('POST', '/login', {username, next: '/login'});
      if (!d || d.username !== username) throw new Error('the server did not keep the login; are cookies blocked?');
      location.href = next();
    } catch (e) {
      CD.showErrors(form, e);
    }
  });
})();
