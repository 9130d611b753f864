/* Login with a username, as DIGITS: POST /login sets the username cookie. A server
 * started with --auth password asks for a password too (GET /login says which). */
'use strict';

(function () {
  const {$} = CD;
  const form = $('#login-form');

  function next() {
    const n = CD.param('next');
    /* only paths of this server */
    return n && n.startsWith('/') && !n.startsWith('//') ? n : CD.url('');
  }

  let passwords = false;
  CD.initTopbar();
  CD.user().then((u) => {
    if (u) CD.setText('#login-state', 'You are logged in as ' + u + '; log in again to change user.');
  });
  CD.api('GET', '/login').then((d) => {
    passwords = !!(d && d.auth === 'password');
    if (!passwords) return;
    $('#password-field').hidden = false;
    CD.setText('#login-intro', 'Log in with your username and password. Your username marks the jobs you ' +
      'create, and only you (or an administrator) can abort, delete or change them.');
  }).catch(() => {});

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    CD.clearErrors(form);
    const username = $('#username').value.trim();
    try {
      /* next=/login: the redirect ends on GET /login, which answers who is logged in */
      const body = {username, next: '/login'};
      if (passwords) body.password = $('#password').value;
      const d = await CD.api('POST', '/login', body);
      if (!d || d.username !== username) throw new Error('the server did not keep the login; are cookies blocked?');
      location.href = next();
    } catch (e) {
      CD.showErrors(form, e);
    }
  });
})();
