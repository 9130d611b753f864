/* Line charts on uPlot (web/vendor/uplot, installed from npm by scripts/web-setup.sh):
 * several series against one x axis, a left and an optional right scale, resized with
 * their container, redrawn at most once a frame however often points arrive.
 *
 *   const c = CD.chart(container, {title, x: 'Epoch', y: 'Loss', y2: 'Accuracy (%)',
 *                                  series: [{label, color, right, points, dash}], log, height,
 *                                  xrange, y2range});   // [min, max] or uPlot's (u, min, max) => [min, max]
 *   c.set([[x, y], ...] per series)   // points need not share x values
 */
'use strict';

(function () {
  const COLORS = {blue: '#1d6fd1', orange: '#e8590c', green: '#2f9e44', purple: '#7048e8', teal: '#0c8599',
    red: '#c92a2a', gray: '#868e96', lime: '#66a80f'};

  /* Union of the x values; each series gets null where it has no point. */
  function align(lists) {
    const xs = Array.from(new Set(lists.flatMap((l) => l.map((p) => p[0])))).sort((a, b) => a - b);
    const index = new Map(xs.map((x, i) => [x, i]));
    const ys = lists.map((l) => {
      const y = new Array(xs.length).fill(null);
      for (const [x, v] of l) y[index.get(x)] = v;
      return y;
    });
    return [xs].concat(ys);
  }

  function newest(ys) {
    if (!ys) return null;
    for (let i = ys.length - 1; i >= 0; i--) if (ys[i] !== null && ys[i] !== undefined) return ys[i];
    return null;
  }

  function fmt(v) {
    if (v === null || v === undefined) return '–';
    return CD.num(v, 4);
  }

  function chart(container, o) {
    const height = o.height || 240;
    const series = [{label: o.x || 'x', value: (u, v) => (v === null || v === undefined ? '–' : CD.num(v, 4))}].concat(o.series.map((s) => ({
      label: s.label,
      scale: s.right ? 'right' : 'y',
      stroke: COLORS[s.color] || s.color || COLORS.blue,
      width: s.width || 1.6,
      dash: s.dash,
      spanGaps: true,
      points: {show: s.points === undefined ? 'auto' : s.points, size: 5},
      /* away from the cursor the legend shows each series' newest value */
      value: (u, v, si, idx) => {
        if (idx === null || idx === undefined) v = newest(u.data[si]);
        return v === null || v === undefined ? '–' : (s.right && o.y2pct ? v.toFixed(2) + '%' : fmt(v));
      },
    })));
    const axes = [
      {label: o.x, labelSize: 18, size: 36},
      {label: o.y, labelSize: 18, size: 56, scale: 'y', values: (u, vals) => vals.map((v) => CD.num(v, 3))},
    ];
    const scales = {x: o.xrange ? {time: false, range: o.xrange} : {time: false}, y: o.log ? {distr: 3} : {}};
    if (o.series.some((s) => s.right)) {
      axes.push({label: o.y2, labelSize: 18, size: 56, side: 1, scale: 'right', grid: {show: false},
        values: (u, vals) => vals.map((v) => CD.num(v, 3))});
      scales.right = o.y2range ? {range: o.y2range} : {};
    }
    /* data-points: how many points the chart holds (the browser tests read it) */
    const box = CD.el('div', {class: 'chart', role: 'img', 'aria-label': o.title || o.y, dataset: {points: 0}});
    container.append(box);
    const width = Math.max(260, container.clientWidth || 600);
    const empty = [[]].concat(o.series.map(() => []));
    const u = new uPlot({
      title: o.title, width, height, series, axes, scales,
      cursor: {drag: {x: true, y: false}},
      legend: {live: true},
    }, empty, box);
    let pending = null;
    const api = {
      uplot: u,
      lists: o.series.map(() => []),
      set(lists) {
        this.lists = lists;
        if (pending) return;
        pending = requestAnimationFrame(() => {
          pending = null;
          u.setData(align(this.lists));
          box.dataset.points = this.points();
          box.setAttribute('aria-label', (o.title || o.y) + ': ' + o.series.map((s, i) => s.label + ' ' +
            (this.lists[i].length ? fmt(this.lists[i][this.lists[i].length - 1][1]) : 'no data')).join(', '));
        });
      },
      /* synchronous, for the first data of a page */
      setNow(lists) {
        this.lists = lists;
        u.setData(align(lists));
        box.dataset.points = this.points();
      },
      points() { return this.lists.reduce((a, l) => a + l.length, 0); },
    };
    if (typeof ResizeObserver !== 'undefined') {
      let last = width;
      new ResizeObserver(() => {
        const w = Math.max(260, container.clientWidth);
        if (Math.abs(w - last) > 2) {
          last = w;
          u.setSize({width: w, height});
        }
      }).observe(container);
    }
    return api;
  }

  CD.chart = chart;
  CD.chart.colors = COLORS;
})();
