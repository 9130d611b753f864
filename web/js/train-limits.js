/* The model form's limits from the server's table of training settings
 * (GET /models/train-keys.json, the table the server checks the form against and the
 * worker reads train.json by): min and max on each number input named by a field of
 * the table (whole numbers for inputs that take whole numbers), and the default as the
 * placeholder of an input without a hint of its own. Inputs the page adds later (the
 * policy's fields) get theirs as they appear. The server checks every field anyway, so
 * a page that cannot read the table keeps the limits its HTML has. */
'use strict';

(function () {
  function limit(input, k) {
    if (input.type === 'number') {
      /* an input without step="any" takes whole numbers: the whole ones inside the bounds */
      const whole = input.step !== 'any';
      if (k.min !== null) input.min = String(whole ? Math.ceil(k.min) : k.min);
      if (k.max !== null) input.max = String(whole ? Math.floor(k.max) : k.max);
    }
    if ((input.type === 'number' || input.type === 'text') && k.default !== null && !input.placeholder)
      input.placeholder = String(k.default);
  }

  function apply(byField, root) {
    const inputs = root.matches && root.matches('input[name]') ? [root] : root.querySelectorAll('input[name]');
    for (const input of inputs) {
      const k = byField.get(input.name);
      if (k) limit(input, k);
    }
  }

  function start(keys) {
    const form = document.getElementById('model-form');
    if (!form) return;
    const byField = new Map(keys.filter((k) => k.field).map((k) => [k.field, k]));
    apply(byField, form);
    new MutationObserver((changes) => {
      for (const c of changes)
        for (const node of c.addedNodes)
          if (node.nodeType === Node.ELEMENT_NODE) apply(byField, node);
    }).observe(form, {childList: true, subtree: true});
  }

  function load() {
    CD.api('GET', '/models/train-keys.json')
      .then((d) => start((d && d.keys) || []))
      .catch(() => { /* the HTML's own limits stay; the server still checks every field */ });
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', load);
  else load();
})();
