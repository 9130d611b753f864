/* A network definition (Caffe prototxt, one file for the train, val and deploy stages,
 * as DIGITS writes them): the layers of a stage with the shape of every top blob and the
 * parameter count of every layer, and a drawing of the graph. The figures come from the
 * engine (POST /models/visualize-network/json runs `cdigits-worker check-net --json`);
 * the reading in the browser follows the engine's rules and stands in when the server
 * cannot answer, and gives each layer its note (kernel, stride, pooling).
 *
 *   CD.net.parse(text)                         -> message tree, or throws SyntaxError
 *   CD.net.analyze(text, {input, classes, crop, stage}) -> {layers, params, blobs, errors}
 *   CD.net.fromEngine(answer, stage, text)     -> the same shape from the server's answer
 *   CD.net.draw(container, analysis)           -> draws the graph as SVG with a layer table
 *   CD.net.view(box, ...tools)                 -> writes a page's network view into box
 *   CD.net.show(network)                       -> shows a network in that view
 *
 * Shapes leave the batch out: [C, H, W] for images, [N] for vectors, [] for scalars. */
'use strict';

(function (root) {
  /* ---- protobuf text format ---------------------------------------------------------- */

  function tokenize(text) {
    const toks = [];
    const re = /\s+|#[^\n]*|"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([{}:;,<>\[\]])|([^\s{}:;,<>\[\]"'#]+)/gy;
    let m;
    let line = 1;
    re.lastIndex = 0;
    while (re.lastIndex < text.length) {
      const at = re.lastIndex;
      m = re.exec(text);
      if (!m) throw new SyntaxError('line ' + line + ': cannot read "' + text.slice(at, at + 20) + '"');
      if (m[1] !== undefined || m[2] !== undefined) toks.push({s: (m[1] !== undefined ? m[1] : m[2]).replace(/\\(.)/g, '$1'), str: true, line});
      else if (m[3]) toks.push({p: m[3], line});
      else if (m[4]) toks.push({w: m[4], line});
      line += (m[0].match(/\n/g) || []).length;
    }
    return toks;
  }

  /* A message is {field: [values]}; a value is a string, a number, a word (enum or
   * bool, kept as a string) or a message. */
  function parse(text) {
    const toks = tokenize(text);
    let i = 0;
    function message(close) {
      const msg = {};
      while (i < toks.length) {
        const t = toks[i];
        if (t.p === close) { i++; return msg; }
        if (t.p === ';' || t.p === ',') { i++; continue; }
        if (!t.w) throw new SyntaxError('line ' + t.line + ': expected a field name, found "' + (t.p || t.s) + '"');
        i++;
        let v;
        if (toks[i] && toks[i].p === ':') i++;
        const n = toks[i];
        if (!n) throw new SyntaxError('line ' + t.line + ': "' + t.w + '" has no value');
        if (n.p === '{' || n.p === '<') {
          i++;
          v = message(n.p === '{' ? '}' : '>');
        } else if (n.p === '[') {
          i++;
          const list = [];
          while (toks[i] && toks[i].p !== ']') {
            if (toks[i].p !== ',') list.push(scalar(toks[i]));
            i++;
          }
          i++;
          (msg[t.w] = msg[t.w] || []).push(...list);
          continue;
        } else if (n.str || n.w) {
          i++;
          v = scalar(n);
          /* adjacent strings concatenate */
          while (n.str && toks[i] && toks[i].str) v += toks[i++].s;
        } else {
          throw new SyntaxError('line ' + n.line + ': unexpected "' + n.p + '" after ' + t.w);
        }
        (msg[t.w] = msg[t.w] || []).push(v);
      }
      if (close) throw new SyntaxError('the file ends inside a { } block');
      return msg;
    }
    function scalar(t) {
      if (t.str) return t.s;
      const x = Number(t.w);
      return t.w !== '' && !isNaN(x) && /^[-+.\d]/.test(t.w) ? x : t.w;
    }
    return message(null);
  }

  const get = (m, k, d) => (m && m[k] && m[k].length ? m[k][0] : d);
  const all = (m, k) => (m && m[k] ? m[k] : []);

  /* ---- stages --------------------------------------------------------------------------- */

  function ruleMatches(rule, stage) {
    const phase = get(rule, 'phase');
    if (phase !== undefined && phase !== (stage === 'train' ? 'TRAIN' : 'TEST')) return false;
    const stages = all(rule, 'stage');
    if (stages.length && !stages.every((s) => s === stage)) return false;
    const not = all(rule, 'not_stage');
    if (not.includes(stage)) return false;
    return true;
  }

  function inStage(layer, stage) {
    const inc = all(layer, 'include'), exc = all(layer, 'exclude');
    if (inc.length) return inc.some((r) => ruleMatches(r, stage));
    return !exc.some((r) => ruleMatches(r, stage));
  }

  /* ---- shapes and parameters ------------------------------------------------------------------- */

  function dims2(p, name, def) {
    /* kernel_size / stride / pad: repeated, or _h and _w */
    const h = get(p, name.replace('_size', '') + '_h'), w = get(p, name.replace('_size', '') + '_w');
    const list = all(p, name);
    if (h !== undefined || w !== undefined) return [h !== undefined ? h : def, w !== undefined ? w : def];
    if (list.length === 1) return [list[0], list[0]];
    if (list.length >= 2) return [list[0], list[1]];
    return [def, def];
  }

  const prod = (a) => a.reduce((x, y) => x * y, 1);
  const same = (l, b) => ({tops: [b[0]], params: 0});

  /* Each entry: (layer, bottoms' shapes, context) -> {tops: [shapes], params, note}. */
  const SHAPES = {
    Data(l, b, ctx) {
      const tp = get(l, 'transform_param');
      const crop = ctx.crop || get(tp, 'crop_size');
      const [c, h, w] = ctx.input;
      return {tops: [[c, crop || h, crop || w], []], params: 0};
    },
    Input(l) {
      const shape = get(get(l, 'input_param'), 'shape');
      const d = all(shape, 'dim');
      return {tops: [d.slice(1)], params: 0};
    },
    Convolution(l, b) {
      const p = get(l, 'convolution_param') || {};
      const n = get(p, 'num_output');
      const [kh, kw] = dims2(p, 'kernel_size', 1);
      const [sh, sw] = dims2(p, 'stride', 1);
      const [ph, pw] = dims2(p, 'pad', 0);
      const dil = get(p, 'dilation', 1), group = get(p, 'group', 1);
      const [c, h, w] = b[0];
      const oh = Math.floor((h + 2 * ph - (dil * (kh - 1) + 1)) / sh) + 1;
      const ow = Math.floor((w + 2 * pw - (dil * (kw - 1) + 1)) / sw) + 1;
      const bias = get(p, 'bias_term', 'true') !== 'false';
      return {tops: [[n, oh, ow]], params: n * (c / group) * kh * kw + (bias ? n : 0),
        note: kh + '×' + kw + (sh > 1 ? ' /' + sh : '') + (group > 1 ? ' g' + group : '')};
    },
    Pooling(l, b) {
      const p = get(l, 'pooling_param') || {};
      const [c, h, w] = b[0];
      if (get(p, 'global_pooling') === 'true') return {tops: [[c, 1, 1]], params: 0, note: 'global ' + get(p, 'pool', 'MAX').toLowerCase()};
      const [kh, kw] = dims2(p, 'kernel_size', 1);
      const [sh, sw] = dims2(p, 'stride', 1);
      const [ph, pw] = dims2(p, 'pad', 0);
      const floorMode = get(p, 'round_mode', 'CEIL') === 'FLOOR';
      const out = (x, k, s, pd) => {
        if (floorMode) return Math.floor((x + 2 * pd - k) / s) + 1;
        let o = Math.ceil((x + 2 * pd - k) / s) + 1;
        if (pd > 0 && (o - 1) * s >= x + pd) o--;
        return o;
      };
      return {tops: [[c, out(h, kh, sh, ph), out(w, kw, sw, pw)]], params: 0,
        note: get(p, 'pool', 'MAX').toLowerCase() + ' ' + kh + '×' + kw + (sh > 1 ? ' /' + sh : '')};
    },
    InnerProduct(l, b, ctx) {
      const p = get(l, 'inner_product_param') || {};
      const n = get(p, 'num_output', ctx.classes);
      const bias = get(p, 'bias_term', 'true') !== 'false';
      const inputs = prod(b[0]);
      return {tops: [[n]], params: n * inputs + (bias ? n : 0),
        note: get(p, 'num_output') === undefined ? 'outputs = classes' : null};
    },
    ReLU: same, Sigmoid: same, TanH: same, Power: same, Dropout: same, LRN: same, Softmax: same,
    BatchNorm: (l, b) => ({tops: [b[0]], params: 0, note: 'stored statistics'}),
    Scale(l, b) {
      const p = get(l, 'scale_param') || {};
      const c = b[0].length ? b[0][0] : 1;
      return {tops: [b[0]], params: c + (get(p, 'bias_term') === 'true' ? c : 0)};
    },
    Bias: (l, b) => ({tops: [b[0]], params: b[0].length ? b[0][0] : 1}),
    SoftmaxWithLoss: () => ({tops: [[]], params: 0}),
    Accuracy: () => ({tops: [[], []], params: 0}),
    Concat(l, b) {
      const axis = get(get(l, 'concat_param'), 'axis', 1) - 1;
      const out = b[0].slice();
      out[axis] = b.reduce((a, s) => a + s[axis], 0);
      return {tops: [out], params: 0};
    },
    Flatten: (l, b) => ({tops: [[prod(b[0])]], params: 0}),
    Eltwise: (l, b) => ({tops: [b[0]], params: 0, note: String(get(get(l, 'eltwise_param'), 'operation', 'SUM')).toLowerCase()}),
    Split: (l, b) => ({tops: all(l, 'top').map(() => b[0]), params: 0}),
  };

  /* The layers of one stage with their top shapes; unknown shapes stay null. */
  function analyze(text, opts) {
    const net = typeof text === 'string' ? parse(text) : text;
    const stage = opts.stage || 'train';
    const ctx = {input: opts.input || [3, 256, 256], classes: opts.classes || 10, crop: opts.crop || 0};
    const blobs = {};
    const layers = [];
    const errors = [];
    const defs = all(net, 'layer').length ? all(net, 'layer') : all(net, 'layers');
    /* the deploy input is cropped as the Data layers crop */
    if (!ctx.crop) {
      for (const l of defs) {
        const c = get(get(l, 'transform_param'), 'crop_size');
        if (get(l, 'type') === 'Data' && c) ctx.deployCrop = c;
      }
    }
    let list = defs.filter((l) => inStage(l, stage));
    /* the deploy stage reads an Input blob where the others read Data */
    if (stage === 'deploy' && !list.some((l) => get(l, 'type') === 'Input' || get(l, 'type') === 'Data')) {
      const needs = new Set(list.flatMap((l) => all(l, 'bottom')));
      const made = new Set(list.flatMap((l) => all(l, 'top')));
      if (needs.has('data') && !made.has('data')) {
        list = [{name: ['data_input'], type: ['Input'], top: ['data'], synthetic: true}].concat(list);
      }
    }
    for (const l of list) {
      const type = get(l, 'type', '?');
      const name = get(l, 'name', type);
      const bottoms = all(l, 'bottom');
      const tops = all(l, 'top');
      const bshapes = bottoms.map((b) => (b in blobs ? blobs[b] : null));
      let r = null;
      if (l.synthetic) {
        const [c, h, w] = ctx.input;
        const crop = ctx.crop || ctx.deployCrop;
        r = {tops: [[c, crop || h, crop || w]], params: 0};
      } else if (!SHAPES[type]) {
        errors.push(name + ': layer type ' + type + ' is not one cdigits knows');
      } else if (bshapes.some((s) => s === null)) {
        const missing = bottoms.filter((b) => !(b in blobs));
        if (missing.length) errors.push(name + ': bottom "' + missing[0] + '" is not made by an earlier layer of the ' + stage + ' stage');
      } else {
        try {
          r = SHAPES[type](l, bshapes, ctx);
          for (const s of r.tops) if (s && s.some((x) => !(x > 0) || !Number.isFinite(x))) throw new Error('an output size is ' + s.join('×'));
        } catch (e) {
          errors.push(name + ': ' + e.message);
          r = null;
        }
      }
      const shapes = tops.map((t, k) => (r && r.tops[k] !== undefined ? r.tops[k] : null));
      tops.forEach((t, k) => { blobs[t] = shapes[k]; });
      layers.push({name, type, bottoms, tops, shapes, params: r ? r.params : null, note: r ? r.note : null,
        inplace: tops.length === 1 && bottoms.length >= 1 && tops[0] === bottoms[0]});
    }
    const params = layers.reduce((a, l) => a + (l.params || 0), 0);
    return {stage, layers, params, errors, name: get(net, 'name', '')};
  }

  /* The server's answer for one stage in analyze()'s shape: shapes without the batch,
   * the engine's parameter counts and messages, notes from the browser's reading of text.
   * A stage the engine could not build has no layers. */
  function fromEngine(d, stage, text) {
    const st = (d.stages || {})[stage];
    let local = null;
    try {
      local = analyze(text, {input: d.input, classes: d.classes, crop: d.crop, stage});
    } catch (e) { /* notes are a nicety */ }
    const notes = new Map(local ? local.layers.map((l) => [l.name, l.note]) : []);
    const layers = (st ? st.layers : []).map((l) => ({
      name: l.name, type: l.type, bottoms: l.bottoms,
      tops: l.tops.map((t) => t.name),
      shapes: l.tops.map((t) => t.shape.slice(1)),
      params: l.params, note: notes.get(l.name) || null,
      inplace: l.tops.length === 1 && l.bottoms.length >= 1 && l.tops[0].name === l.bottoms[0],
    }));
    return {stage, layers, params: st ? st.params : 0, errors: d.errors || [], name: local ? local.name : ''};
  }

  /* ---- drawing ---------------------------------------------------------------------------------- */

  function shapeText(s) {
    if (s === null || s === undefined) return '?';
    return s.length ? s.join('×') : 'scalar';
  }

  function paramText(n) {
    if (!n) return '';
    if (n >= 1e6) return (n / 1e6).toFixed(2) + 'M params';
    if (n >= 1e3) return (n / 1e3).toFixed(1) + 'k params';
    return n + ' params';
  }

  /* Nodes are layers; an in-place layer (ReLU, Dropout on its own input) is listed in the
   * node of the layer that made its blob. Ranks are longest paths from the inputs. */
  function layout(a) {
    const nodes = [];
    const producer = {};
    for (const l of a.layers) {
      if (l.type === 'Split') {
        const from = producer[l.bottoms[0]];
        for (const t of l.tops) producer[t] = from;
        continue;
      }
      if (l.inplace && producer[l.tops[0]]) {
        producer[l.tops[0]].extra.push(l);
        continue;
      }
      const n = {layer: l, extra: [], inputs: [], rank: 0};
      for (const b of l.bottoms) {
        const p = producer[b];
        if (p && !n.inputs.includes(p)) n.inputs.push(p);
      }
      n.rank = n.inputs.reduce((r, p) => Math.max(r, p.rank + 1), 0);
      for (const t of l.tops) producer[t] = n;
      nodes.push(n);
    }
    return nodes;
  }

  function draw(container, a) {
    const {el, svg, clear} = CD;
    clear(container);
    const nodes = layout(a);
    const W = 200, GAP_X = 18, GAP_Y = 34, LINE = 15;
    const ranks = [];
    for (const n of nodes) (ranks[n.rank] = ranks[n.rank] || []).push(n);
    for (const n of nodes) {
      n.lines = 2 + n.extra.length + (n.layer.params ? 1 : 0);
      n.h = 12 + n.lines * LINE;
    }
    const widest = Math.max(1, ...ranks.map((r) => (r ? r.length : 0)));
    const totalW = widest * (W + GAP_X) + GAP_X;
    let y = GAP_Y / 2;
    for (const r of ranks) {
      if (!r) continue;
      const h = Math.max(...r.map((n) => n.h));
      const rowW = r.length * (W + GAP_X) - GAP_X;
      let x = (totalW - rowW) / 2;
      for (const n of r) {
        n.x = x;
        n.y = y;
        x += W + GAP_X;
      }
      y += h + GAP_Y;
    }
    const g = svg('svg', {width: totalW, height: y, viewBox: '0 0 ' + totalW + ' ' + y, role: 'img',
      'aria-label': 'Graph of the ' + a.stage + ' stage: ' + nodes.length + ' layers'});
    for (const n of nodes) {
      for (const p of n.inputs) {
        const x1 = p.x + W / 2, y1 = p.y + p.h, x2 = n.x + W / 2, y2 = n.y;
        const my = (y1 + y2) / 2;
        g.append(svg('path', {class: 'edge', d: 'M' + x1 + ',' + y1 + ' C' + x1 + ',' + my + ' ' + x2 + ',' + my + ' ' + x2 + ',' + (y2 - 3)}));
        g.append(svg('path', {class: 'edge', d: 'M' + (x2 - 4) + ',' + (y2 - 7) + ' L' + x2 + ',' + (y2 - 1) + ' L' + (x2 + 4) + ',' + (y2 - 7)}));
      }
    }
    for (const n of nodes) {
      const l = n.layer;
      const kind = /Data|Input/.test(l.type) ? 'data' : /Loss|Accuracy|Softmax/.test(l.type) ? 'loss' : l.params ? 'param' : '';
      const node = svg('g', {class: 'node ' + kind, transform: 'translate(' + n.x + ',' + n.y + ')'});
      node.append(svg('title', {text: l.name + ' (' + l.type + ')' + (l.note ? ', ' + l.note : '')}));
      node.append(svg('rect', {width: W, height: n.h, rx: 5}));
      let ty = 6 + LINE - 3;
      const label = l.name.length > 26 ? l.name.slice(0, 25) + '…' : l.name;
      node.append(svg('text', {class: 't', x: 8, y: ty, text: label}));
      ty += LINE;
      const tops = l.tops.map((t, k) => shapeText(l.shapes[k])).join(', ');
      node.append(svg('text', {x: 8, y: ty, text: l.type + (l.note ? ' · ' + l.note : '')}));
      for (const e of n.extra) {
        ty += LINE;
        node.append(svg('text', {class: 's', x: 8, y: ty, text: '+ ' + e.type + ' (' + (e.name.length > 18 ? e.name.slice(0, 17) + '…' : e.name) + ')'}));
      }
      if (l.params) {
        ty += LINE;
        node.append(svg('text', {class: 's', x: 8, y: ty, text: paramText(l.params)}));
      }
      node.append(svg('text', {class: 's', x: W - 8, y: 6 + LINE - 3, 'text-anchor': 'end', text: '→ ' + tops}));
      g.append(node);
    }
    container.append(el('div', {class: 'net-graph'}, g));
    const rows = a.layers.filter((l) => l.type !== 'Split').map((l) => el('tr', {},
      el('td', {class: 'mono small', text: l.name}), el('td', {text: l.type}),
      el('td', {class: 'mono small', text: l.tops.map((t, k) => t + ' ' + shapeText(l.shapes[k])).join(', ')}),
      el('td', {class: 'num', text: l.params ? CD.count(l.params) : ''})));
    container.append(el('details', {},
      el('summary', {text: 'Layers as a table (' + rows.length + ')'}),
      el('div', {class: 'table-wrap'}, el('table', {},
        el('thead', {}, el('tr', {}, el('th', {text: 'Layer'}), el('th', {text: 'Type'}), el('th', {text: 'Output (per image)'}), el('th', {class: 'num', text: 'Parameters'}))),
        el('tbody', {}, rows)))));
  }

  /* The "cdigits-input: CxHxW" comment of a standard network, or null. */
  function intendedInput(text) {
    const m = /cdigits-input:\s*(\d+)x(\d+)x(\d+)/.exec(text || '');
    return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
  }

  /* ---- a page's network view ---------------------------------------------------------------- */

  /* Writes into box the stage to show, the summary line and any tools (a Hide button) in one
   * row, then the errors and the graph: #net-stage, #net-summary, #net-errors, #net-graph. */
  function view(box, ...tools) {
    const {el} = CD;
    box.append(
      el('div', {class: 'filters'},
        CD.field('Stage', el('select', {id: 'net-stage'}, ['train', 'val', 'deploy'].map((s) => el('option', {value: s, text: s})))),
        el('p', {class: 'small', id: 'net-summary'}), tools),
      el('div', {class: 'form-error', id: 'net-errors', role: 'alert'}),
      el('div', {id: 'net-graph'}));
  }

  /* The analysis of a network for a page: the engine's (POST
   * /models/visualize-network/json with body, the form fields that name the network), or,
   * when the server cannot answer, the browser's reading of text for the dataset's input
   * and classes (dataset: its detail, or null). A form error of the engine is thrown as
   * its messages. Returns {a, input, classes, source}. */
  async function check(n, stage) {
    try {
      const d = await CD.api('POST', '/models/visualize-network/json', n.body);
      return {a: fromEngine(d, stage, n.text), input: d.input, classes: d.classes, source: 'engine'};
    } catch (e) {
      if (e.status === 400 && e.fields) throw new Error(Object.values(e.fields).flat().join('\n'));
      const dims = n.dataset && n.dataset.image_dims;
      const input = (dims ? [dims[2], dims[0], dims[1]] : intendedInput(n.text)) || [3, 256, 256];
      const classes = n.dataset && n.dataset.labels ? n.dataset.labels.length : 10;
      const a = analyze(n.text, {input, classes, crop: n.crop, stage});
      a.errors.unshift('Read in the browser: the server could not check this network (' + e.message + ').');
      return {a, input, classes, source: 'browser'};
    }
  }

  let shown = 0;

  /* Shows in the view the network that network() resolves to, {text, body, crop, dataset}
   * as check() takes it, for the stage chosen; a newer call wins over an older one whose
   * answer comes later. */
  async function show(network) {
    const {$, clear, setText} = CD;
    const seq = ++shown;
    setText('#net-errors', '');
    const graph = clear($('#net-graph'));
    try {
      const n = await network();
      const stage = $('#net-stage').value;
      const {a, input, classes, source} = await check(n, stage);
      if (seq !== shown) return;
      $('#net-summary').dataset.source = source;
      setText('#net-summary', !a.layers.length ? 'The ' + stage + ' stage cannot be built:'
        : (a.name ? a.name + ': ' : '') + a.layers.filter((l) => l.type !== 'Split').length + ' layers, ' +
        CD.count(a.params) + ' parameters (' + stage + ' stage) for ' + input.join('×') + ' input' +
        (n.crop ? ' cropped to ' + n.crop : '') + ' and ' + classes + ' classes' + (n.dataset ? '' : ' (without a dataset)'));
      if (a.errors.length) setText('#net-errors', a.errors.join('\n'));
      if (a.layers.length) draw(graph, a);
    } catch (e) {
      if (seq !== shown) return;
      setText('#net-summary', '');
      setText('#net-errors', e.message);
    }
  }

  const api = {parse, analyze, fromEngine, draw, intendedInput, shapeText, paramText, get, all, view, check, show};
  root.CD = root.CD || {};
  root.CD.net = api;
  if (typeof module !== 'undefined') module.exports = api;
})(typeof window !== 'undefined' ? window : globalThis);
