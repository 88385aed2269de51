// Troupe's dashboard: one page, six views (queues, messages, one message, failed, schedules,
// nodes) over the dashboard's JSON API. Every text from the area goes into the page as text
// (never as HTML). The open view refreshes itself while the page is visible. A view's refresh
// reads what it shows, then returns the function that draws it: what was read for a view that is
// no longer open is never drawn.
'use strict';

const REFRESH_MS = 2000;
const COLORS = ['#2f5bd3', '#1f8a4c', '#c23a2b', '#a86400', '#7b3fbf', '#0f8a8a', '#b8327a', '#566'];
const STATUSES = ['pending', 'started', 'success', 'failure', 'skipped', 'cancelled'];
const SORTS = ['enqueued_at', 'started_at', 'finished_at', 'message_id', 'status', 'queue', 'task',
  'priority', 'attempts', 'progress'];

const app = {
  session: null,
  token: sessionStorage.getItem('troupe-token') || '',
  view: null,
  timer: null,
  busy: false,
  again: false, // a refresh was asked for while one ran
  generation: 0, // counts the views opened
};

// -- small helpers ---------------------------------------------------------------------------

/** An element: h('td', {class: 'num', dataset: {field: 'ready'}}, 'text', child, ...). */
function h(tag, attrs, ...children) {
  const svg = ['svg', 'polyline', 'line', 'text', 'g', 'circle'].includes(tag);
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag)
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'onclick') el.addEventListener('click', v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function cell(field, value, cls) {
  return h('td', {class: cls, dataset: {field}}, value);
}

function time(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return d.toLocaleString(undefined, {hour12: false});
}

function age(seconds) {
  if (!seconds) return '0s';
  if (seconds < 60) return seconds.toFixed(seconds < 10 ? 1 : 0) + 's';
  if (seconds < 3600) return Math.floor(seconds / 60) + 'm ' + Math.floor(seconds % 60) + 's';
  return Math.floor(seconds / 3600) + 'h ' + Math.floor((seconds % 3600) / 60) + 'm';
}

function notice(text, isError) {
  const n = document.getElementById('notice');
  n.textContent = text;
  n.className = isError ? 'error' : '';
  n.hidden = false;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '' || v === false) continue;
    if (Array.isArray(v)) v.forEach((x) => q.append(k, x));
    else q.append(k, v === true ? '' : v);
  }
  const s = q.toString();
  return s ? '?' + s : '';
}

async function api(path, params) {
  const res = await fetch('/api/' + path + query(params || {}), {cache: 'no-store'});
  const body = await res.json().catch(() => ({error: 'the dashboard answered ' + res.status}));
  if (!res.ok) throw new Error(body.error || ('the dashboard answered ' + res.status));
  return body;
}

/** An action: POST with the token; its outcome goes to the notice line. */
async function act(path, params, done) {
  try {
    const res = await fetch('/api/' + path + query(params), {
      method: 'POST',
      headers: {Authorization: 'Bearer ' + app.token},
    });
    const body = await res.json().catch(() => ({error: 'the dashboard answered ' + res.status}));
    if (!res.ok) {
      notice(path + ': ' + (body.error || res.status), true);
      return null;
    }
    if (done) notice(done(body));
    await refresh();
    return body;
  } catch (e) {
    notice(path + ': ' + e.message, true);
    return null;
  }
}

function canAct() {
  return app.session && app.session.actions === 'token' && app.token !== '';
}

function actionTitle() {
  if (!app.session) return '';
  if (app.session.actions === 'read-only') return 'the dashboard runs read-only';
  if (app.session.actions === 'off') return 'actions are off: the dashboard was started without a token';
  if (!app.token) return 'enter the token first';
  return '';
}

function button(label, attrs, onclick) {
  return h('button', Object.assign({type: 'button', disabled: !canAct(), title: actionTitle(),
    onclick}, attrs || {}), label);
}

/** A button that asks once more before it acts (no dialogs: they block headless browsers). */
function confirmButton(label, confirmLabel, attrs, onconfirm) {
  const b = button(label, attrs, () => {
    if (b.dataset.armed) {
      delete b.dataset.armed;
      b.textContent = label;
      onconfirm();
    } else {
      b.dataset.armed = '1';
      b.textContent = confirmLabel;
    }
  });
  return b;
}

function table(headers, rows, empty) {
  if (!rows.length) return h('p', {class: 'muted', dataset: {empty: '1'}}, empty);
  return h('table', {},
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', {class: x.endsWith('#') ? 'num' : ''},
      x.replace(/#$/, ''))))),
    h('tbody', {}, rows));
}

function statusBadge(status) {
  const cls = {success: 'ok', failure: 'bad', cancelled: 'warn', skipped: 'warn'}[status] || '';
  return h('span', {class: 'badge ' + cls}, status);
}

// -- the throughput chart ----------------------------------------------------------------------

function chart(throughput) {
  const points = throughput.points || [];
  const queues = [...new Set(points.flatMap((p) => Object.keys(p.per_second)))].sort();
  const W = 800, H = 180, L = 48, B = 22;
  let max = 0;
  for (const p of points) for (const v of Object.values(p.per_second)) if (v !== null) max = Math.max(max, v);
  const top = max > 0 ? max : 1;
  max = top * 1.1;
  const t0 = points.length ? Date.parse(points[0].at) : 0;
  const t1 = points.length ? Date.parse(points[points.length - 1].at) : 1;
  const x = (t) => L + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - L - 8);
  const y = (v) => 8 + (1 - v / max) * (H - B - 8);
  const svg = h('svg', {viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img',
    'aria-label': 'finished messages per second'});
  svg.append(h('line', {class: 'axis', x1: L, y1: y(0), x2: W - 8, y2: y(0)}));
  svg.append(h('line', {class: 'axis', x1: L, y1: y(top), x2: W - 8, y2: y(top)}));
  svg.append(h('text', {x: 4, y: y(0) + 4}, '0'));
  svg.append(h('text', {x: 4, y: y(top) + 4}, top.toFixed(top < 10 ? 1 : 0) + '/s'));
  if (points.length) {
    const clock = (iso) => new Date(iso).toLocaleTimeString(undefined, {hour12: false});
    svg.append(h('text', {x: L, y: H - 4}, clock(points[0].at)));
    svg.append(h('text', {x: W - 8, y: H - 4, 'text-anchor': 'end'}, clock(points[points.length - 1].at)));
  }
  queues.forEach((q, i) => {
    let run = [];
    const color = COLORS[i % COLORS.length];
    const flush = () => {
      // A run of one point is a dot: a line needs two.
      if (run.length === 1) svg.append(h('circle', {cx: run[0][0], cy: run[0][1], r: 3,
        fill: color, dataset: {queue: q}}));
      else if (run.length) svg.append(h('polyline', {points: run.map((xy) => xy.join(',')).join(' '),
        fill: 'none', stroke: color, 'stroke-width': 2, dataset: {queue: q}}));
      run = [];
    };
    for (const p of points) {
      const v = p.per_second[q];
      if (v === null || v === undefined) flush();
      else run.push([x(Date.parse(p.at)).toFixed(1), y(v).toFixed(1)]);
    }
    flush();
  });
  const legend = h('div', {class: 'legend'}, queues.map((q, i) => {
    const s = h('span', {}, q);
    s.style.setProperty('--c', COLORS[i % COLORS.length]);
    return s;
  }));
  const intervalS = (throughput.interval_ms || 5000) / 1000;
  return h('div', {class: 'card chart'},
    h('h3', {}, 'Finished per second (sampled every ' + intervalS + ' s while the dashboard runs)'),
    points.length ? svg : h('p', {class: 'muted'}, 'The first rate shows after two samples.'),
    legend);
}

// -- views -----------------------------------------------------------------------------------

const views = {};

views.queues = {
  title: 'Queues',
  mount(root) {
    this.root = root;
  },
  async refresh() {
    const data = await api('queues');
    return () => this.draw(data);
  },
  draw(data) {
    const rows = data.queues.map((q) => h('tr', {dataset: {queue: q.queue}},
      h('td', {dataset: {field: 'queue'}},
        h('a', {href: '#/messages' + query({queue: q.queue})}, q.queue)),
      cell('queued', q.counts.queued, 'num'),
      cell('ready', q.ready, 'num'),
      cell('scheduled', q.scheduled, 'num'),
      cell('oldest_ready', age(q.oldest_ready_seconds), 'num'),
      cell('running', q.counts.running, 'num'),
      cell('done', q.counts.done, 'num'),
      h('td', {class: 'num', dataset: {field: 'failed'}},
        q.counts.failed ? h('a', {href: '#/failed' + query({queue: q.queue})}, q.counts.failed) : '0'),
      cell('failed_last_hour', q.failed_last_hour, 'num'),
      cell('cancelled', q.counts.cancelled, 'num'),
      h('td', {dataset: {field: 'paused'}},
        q.paused ? h('span', {class: 'badge warn'}, 'paused') : h('span', {class: 'badge ok'}, 'active')),
      h('td', {}, q.paused
        ? button('Resume', {dataset: {action: 'resume'}}, () => act('resume', {queue: q.queue},
          () => 'queue ' + q.queue + ' resumed'))
        : button('Pause', {dataset: {action: 'pause'}}, () => act('pause', {queue: q.queue},
          () => 'queue ' + q.queue + ' paused: nothing of it is claimed now')))));
    this.root.replaceChildren(
      h('h2', {}, 'Queues'),
      chart(data.throughput),
      data.sample_error ? h('p', {class: 'badge bad', dataset: {field: 'sample_error'}},
        'sampling failed: ' + data.sample_error) : '',
      h('div', {class: 'card'}, table(['Queue', 'Queued#', 'Ready#', 'Scheduled#', 'Oldest ready#',
        'Running#', 'Done#', 'Failed#', 'Failed 1h#', 'Cancelled#', 'State', ''], rows,
      'No queue has messages yet.')));
  },
};

views.messages = {
  title: 'Messages',
  mount(root, params) {
    this.root = root;
    this.params = params;
    const p = params;
    const input = (name, label, placeholder) => h('label', {}, label,
      h('input', {name, value: p.get(name) || '', placeholder, size: 18}));
    const statusSelect = h('select', {name: 'status'}, h('option', {value: ''}, 'any'),
      STATUSES.map((s) => h('option', {value: s, selected: p.get('status') === s}, s)));
    const sortSelect = h('select', {name: 'sort'}, SORTS.map((s) => h('option',
      {value: s, selected: (p.get('sort') || 'enqueued_at') === s}, s)));
    const orderSelect = h('select', {name: 'order'},
      h('option', {value: 'desc', selected: !p.has('asc')}, 'newest first'),
      h('option', {value: 'asc', selected: p.has('asc')}, 'oldest first'));
    const limitSelect = h('select', {name: 'limit'}, [25, 50, 100, 200].map((n) =>
      h('option', {value: n, selected: String(p.get('limit') || 50) === String(n)}, n)));
    const form = h('form', {class: 'filters card', id: 'message-filters'},
      h('label', {}, 'Status', statusSelect), input('queue', 'Queue', 'any'),
      input('task', 'Task', 'any'),
      input('enqueued-from', 'Published from', '2026-12-01T00:00:00Z'),
      input('enqueued-to', 'Published to', 'now'),
      h('label', {}, 'Sort', sortSelect), h('label', {}, 'Order', orderSelect),
      h('label', {}, 'Page', limitSelect),
      h('button', {type: 'submit'}, 'Apply'));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const f = new FormData(form);
      const next = {};
      for (const k of ['status', 'queue', 'task', 'enqueued-from', 'enqueued-to', 'limit']) {
        const v = (f.get(k) || '').trim();
        if (v) next[k] = v;
      }
      if (f.get('sort') !== 'enqueued_at') next.sort = f.get('sort');
      if (f.get('order') === 'asc') next.asc = true;
      location.hash = '#/messages' + query(next);
    });
    this.results = h('div', {class: 'card', id: 'message-results'});
    root.replaceChildren(h('h2', {}, 'Messages'), form, this.results);
  },
  async refresh() {
    const p = this.params;
    const filter = {};
    for (const k of ['status', 'queue', 'task', 'enqueued-from', 'enqueued-to']) {
      if (p.get(k)) filter[k] = p.get(k);
    }
    const page = Object.assign({}, filter);
    for (const k of ['sort', 'limit', 'after', 'offset']) if (p.get(k)) page[k] = p.get(k);
    if (p.has('asc')) page.asc = true;
    // Counting reads every match: done when the filter changes, then at most every 30 s.
    const key = JSON.stringify(filter);
    const stale = this.counted === undefined || this.counted.key !== key ||
      Date.now() - this.counted.at > 30000;
    const [data, count] = await Promise.all([api('messages', page),
      stale ? api('messages', Object.assign({count: true}, filter)) : this.counted.count]);
    if (stale) this.counted = {key, at: Date.now(), count};
    return () => this.draw(data, count, filter, page);
  },
  draw(data, count, filter, page) {
    const p = this.params;
    const rows = data.items.map((m) => h('tr', {dataset: {id: m.message_id}},
      h('td', {class: 'mono', dataset: {field: 'id'}},
        h('a', {href: '#/message/' + m.message_id}, m.message_id)),
      h('td', {dataset: {field: 'status'}}, statusBadge(m.status)),
      cell('queue', m.queue), cell('task', m.task), cell('attempts', m.attempts, 'num'),
      cell('enqueued_at', time(m.enqueued_at)), cell('finished_at', time(m.finished_at)),
      cell('error', m.error ? m.error.type + ': ' + m.error.text : '', 'wrap'),
      h('td', {}, (m.state === 'queued' || m.state === 'running')
        ? button('Cancel', {class: 'danger', dataset: {action: 'cancel'}}, () => act('cancel',
          {id: m.message_id}, (r) => 'message ' + m.message_id + ': ' + r.status))
        : '')));
    const pager = h('div', {class: 'pager'},
      h('span', {class: 'muted', dataset: {field: 'count'}, title: 'counted at ' +
        new Date(this.counted.at).toLocaleTimeString(undefined, {hour12: false})},
      count.count + ' match'),
      p.get('after') || p.get('offset')
        ? h('a', {href: '#/messages' + query(Object.assign({}, page, {after: '', offset: ''}))}, 'First page') : '',
      data.next_after ? h('a', {href: '#/messages' + query(Object.assign({}, page, {after: data.next_after, offset: ''})),
        dataset: {action: 'next'}}, 'Next page') : '');
    // A bulk cancel takes the queue, the task and the state: offered only when the filter is
    // made of those alone, so that it cancels exactly the matches (of every page).
    const cancellable = {pending: 'queued', started: 'running'};
    const bulkState = filter.status ? cancellable[filter.status] : undefined;
    const bulk = (filter.queue || filter.task) && !filter['enqueued-from'] &&
      !filter['enqueued-to'] && (!filter.status || bulkState)
      ? confirmButton('Cancel every ' + (bulkState || 'queued or running') + ' match',
        'Click again to cancel them', {class: 'danger', dataset: {action: 'cancel-matching'}},
        () => act('cancel', {queue: filter.queue, task: filter.task, state: bulkState},
          (r) => r.cancelled + ' cancelled, ' + r.requested + ' cancel requested'))
      : '';
    this.results.replaceChildren(table(['Id', 'Status', 'Queue', 'Task', 'Attempts#', 'Published',
      'Finished', 'Failure', ''], rows, 'No message matches.'), pager, bulk);
  },
};

views.message = {
  title: 'Message',
  mount(root, params, id) {
    this.root = root;
    this.id = id;
    this.payload = false;
  },
  async refresh() {
    const params = {id: this.id};
    if (this.payload) params.payload = true;
    const data = await api('message', params);
    return () => this.draw(data);
  },
  draw(data) {
    const m = data.state;
    const field = (name, value) => [h('dt', {}, name), h('dd', {dataset: {field: name}}, value)];
    const json = (v) => h('pre', {}, JSON.stringify(v, null, 2));
    const attempts = data.attempts
      ? table(['Attempt#', 'Outcome', 'Node#', 'Started', 'Finished', 'Duration ms#', 'Failure'],
        data.attempts.items.map((a) => h('tr', {},
          cell('attempt', a.attempt, 'num'), cell('outcome', a.outcome), cell('node', a.node_id, 'num'),
          cell('started_at', time(a.started_at)), cell('finished_at', time(a.finished_at)),
          cell('duration', a.duration_ms, 'num'),
          cell('error', a.error_type ? a.error_type + ': ' + a.error_text : '', 'wrap'))),
        'No attempt recorded yet.')
      : h('p', {class: 'muted'}, 'Attempt history is off for this area (troupe history enable).');
    const actions = h('div', {class: 'pager'},
      m.state === 'failed' ? button('Retry', {dataset: {action: 'retry'}}, () => act('retry',
        {id: m.message_id}, (r) => 'message ' + m.message_id + ': ' + r.status + ', now ' + r.state)) : '',
      (m.state === 'queued' || m.state === 'running') ? button('Cancel', {class: 'danger',
        dataset: {action: 'cancel'}}, () => act('cancel', {id: m.message_id},
        (r) => 'message ' + m.message_id + ': ' + r.status)) : '',
      this.payload ? '' : h('button', {type: 'button', dataset: {action: 'show-arguments'},
        onclick: () => { this.payload = true; refresh(); }}, 'Show arguments'));
    this.root.replaceChildren(
      h('h2', {}, 'Message ', h('span', {class: 'mono'}, m.message_id)),
      h('div', {class: 'card'}, h('dl', {class: 'fields'},
        field('status', statusBadge(m.status)), field('state', m.state), field('queue', m.queue),
        field('task', m.task), field('priority', m.priority), field('attempts', m.attempts),
        field('published', time(m.enqueued_at)), field('started', time(m.started_at)),
        field('finished', time(m.finished_at)),
        field('cancel requested', m.cancel_requested ? 'yes' : 'no'),
        m.progress !== null ? field('progress', json(m.progress)) : [],
        m.error ? field('failure', json(m.error)) : [],
        'result' in m ? field('result', json(m.result)) : [],
        'args' in m ? field('arguments', json(m.args)) : [],
        'options' in m ? field('options', json(m.options)) : []), actions),
      h('h3', {}, 'Attempts'), h('div', {class: 'card'}, attempts));
  },
};

views.failed = {
  title: 'Failed',
  mount(root, params) {
    this.root = root;
    this.params = params;
    this.retried = new Map(); // shown with their new state until the view is left
    const form = h('form', {class: 'filters card'},
      h('label', {}, 'Queue', h('input', {name: 'queue', value: params.get('queue') || '', placeholder: 'any'})),
      h('label', {}, 'Task', h('input', {name: 'task', value: params.get('task') || '', placeholder: 'any'})),
      h('button', {type: 'submit'}, 'Apply'));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const f = new FormData(form);
      location.hash = '#/failed' + query({queue: f.get('queue').trim(), task: f.get('task').trim()});
    });
    this.results = h('div', {class: 'card', id: 'failed-results'});
    root.replaceChildren(h('h2', {}, 'Failed messages'), form, this.results);
  },
  async refresh() {
    const p = this.params;
    const filter = {queue: p.get('queue') || '', task: p.get('task') || ''};
    const data = await api('failed', Object.assign({limit: 100, after: p.get('after')}, filter));
    return () => this.draw(data, filter);
  },
  draw(data, filter) {
    const p = this.params;
    const row = (m, retried) => h('tr', {dataset: {id: m.message_id}},
      h('td', {class: 'mono', dataset: {field: 'id'}},
        h('a', {href: '#/message/' + m.message_id}, m.message_id)),
      cell('queue', m.queue), cell('task', m.task), cell('attempts', m.attempts, 'num'),
      cell('error', m.error ? m.error.type + ': ' + m.error.text : '', 'wrap'),
      cell('finished_at', time(m.finished_at)),
      h('td', {dataset: {field: 'state'}}, retried ? h('span', {class: 'badge ok'}, retried)
        : h('span', {class: 'badge bad'}, 'failed')),
      h('td', {}, retried ? '' : button('Retry', {dataset: {action: 'retry'}}, async () => {
        const r = await act('retry', {id: m.message_id},
          (x) => 'message ' + m.message_id + ': ' + x.status + ', now ' + x.state);
        if (r) {
          this.retried.set(m.message_id, {m, state: r.state});
          refresh();
        }
      })));
    const listed = new Set(data.items.map((m) => m.message_id));
    const rows = [...[...this.retried.values()].filter((x) => !listed.has(x.m.message_id))
      .map((x) => row(x.m, x.state)), ...data.items.map((m) => row(m))];
    const pager = h('div', {class: 'pager'},
      p.get('after') ? h('a', {href: '#/failed' + query(filter)}, 'First page') : '',
      data.next_after ? h('a', {href: '#/failed' + query(Object.assign({}, filter, {after: data.next_after}))}, 'Next page') : '',
      (filter.queue || filter.task) && data.items.length
        ? confirmButton('Retry every failed match', 'Click again to retry them all',
          {dataset: {action: 'retry-matching'}}, () => act('retry', filter, (r) => r.retried + ' retried'))
        : h('span', {class: 'muted'}, 'Filter by queue or task to retry many at once.'));
    this.results.replaceChildren(table(['Id', 'Queue', 'Task', 'Attempts#', 'Failure', 'Failed at',
      'State', ''], rows, 'No failed message.'), pager);
  },
};

views.schedules = {
  title: 'Schedules',
  mount(root) {
    this.root = root;
  },
  async refresh() {
    const data = await api('schedules');
    return () => this.draw(data);
  },
  draw(data) {
    const rows = data.items.map((s) => h('tr', {dataset: {name: s.name}},
      cell('name', s.name), cell('task', s.task), cell('queue', s.queue),
      cell('when', s.cron ? s.cron + ' (' + s.time_zone + ')' : 'every ' + age(s.interval_ms / 1000)),
      h('td', {dataset: {field: 'enabled'}}, s.enabled ? h('span', {class: 'badge ok'}, 'enabled')
        : h('span', {class: 'badge warn'}, 'disabled')),
      h('td', {dataset: {field: 'next_runs'}}, s.next_runs.map((t) => h('div', {}, time(t)))),
      cell('last_outcome', s.last_outcome ? s.last_outcome + (s.last_error ? ': ' + s.last_error : '') : '', 'wrap'),
      cell('published', s.published, 'num'),
      h('td', {dataset: {field: 'registered'}}, s.registered_by.length ? s.registered_by.join(', ')
        : h('span', {class: 'badge bad', title: 'no registered node runs this task: its messages stay queued'}, 'no node runs ' + s.task)),
      h('td', {}, s.enabled
        ? button('Disable', {dataset: {action: 'disable'}}, () => act('schedule/disable', {name: s.name},
          () => 'schedule ' + s.name + ' disabled'))
        : button('Enable', {dataset: {action: 'enable'}}, () => act('schedule/enable', {name: s.name},
          () => 'schedule ' + s.name + ' enabled')))));
    this.root.replaceChildren(h('h2', {}, 'Schedules'), h('div', {class: 'card'},
      table(['Name', 'Task', 'Queue', 'When', 'State', 'Next runs', 'Last occurrence', 'Published#',
        'Run by', ''], rows, 'No schedule (troupe schedule create).')));
  },
};

views.nodes = {
  title: 'Nodes',
  mount(root) {
    this.root = root;
  },
  async refresh() {
    const data = await api('nodes');
    return () => this.draw(data);
  },
  draw(data) {
    const rows = data.nodes.map((n) => h('tr', {dataset: {node: n.node_id}},
      cell('node_id', n.node_id, 'num'), cell('name', n.name), cell('host', n.host),
      cell('pid', n.pid, 'num'), cell('queues', n.queues.join(', '), 'wrap'),
      cell('started_at', time(n.started_at)),
      h('td', {dataset: {field: 'alive'}}, n.alive ? h('span', {class: 'badge ok'}, 'live')
        : h('span', {class: 'badge bad'}, 'not live')),
      cell('running', n.running, 'num'), cell('prefetched', n.prefetched, 'num')));
    this.root.replaceChildren(h('h2', {}, 'Nodes'), h('div', {class: 'card'},
      table(['Id#', 'Name', 'Host', 'Pid#', 'Queues', 'Started', 'Liveness', 'Running#',
        'Prefetched#'], rows, 'No node is registered.')));
  },
};

// -- routing and refresh -----------------------------------------------------------------------

function route() {
  const hash = location.hash.replace(/^#\/?/, '') || 'queues';
  const [path, search] = hash.split('?');
  const parts = path.split('/');
  const params = new URLSearchParams(search || '');
  if (parts[0] === 'message' && parts[1]) {
    let id = parts[1];
    try {
      id = decodeURIComponent(id);
    } catch (e) {
      // a malformed escape: the id as written, which the dashboard refuses by name
    }
    return {name: 'message', params, id};
  }
  return {name: views[parts[0]] ? parts[0] : 'queues', params};
}

async function refresh() {
  if (!app.view) return;
  if (app.busy) {
    app.again = true; // once this one ends
    return;
  }
  app.busy = true;
  app.again = false;
  const view = app.view;
  const generation = app.generation;
  try {
    const draw = await view.refresh();
    if (generation === app.generation) {
      draw();
      document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString(undefined, {hour12: false});
      document.body.dataset.loaded = view.name;
    }
  } catch (e) {
    if (generation === app.generation) notice(e.message, true);
  } finally {
    app.busy = false;
    if (app.again || generation !== app.generation) refresh();
  }
}

function show() {
  const r = route();
  const root = document.getElementById('view');
  app.generation += 1;
  app.view = Object.assign(views[r.name], {name: r.name});
  delete document.body.dataset.loaded;
  document.getElementById('notice').hidden = true;
  for (const a of document.querySelectorAll('#tabs a')) {
    a.classList.toggle('active', a.dataset.tab === (r.name === 'message' ? 'messages' : r.name));
  }
  document.title = 'Troupe · ' + app.view.title;
  root.replaceChildren();
  app.view.mount(root, r.params, r.id);
  refresh();
}

function showSession() {
  const s = app.session;
  document.getElementById('area').textContent = s.area + ' · Troupe ' + s.version;
  const form = document.getElementById('token-form');
  form.hidden = s.actions !== 'token';
  const state = document.getElementById('actions-state');
  state.textContent = s.actions === 'read-only' ? 'read-only'
    : s.actions === 'off' ? 'actions off (no token configured)'
      : app.token ? 'actions on' : 'enter the token to act';
  state.dataset.actions = s.actions;
}

async function start() {
  try {
    app.session = await api('session');
  } catch (e) {
    notice('cannot reach the dashboard: ' + e.message, true);
    return;
  }
  showSession();
  document.getElementById('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    app.token = document.getElementById('token').value.trim();
    sessionStorage.setItem('troupe-token', app.token);
    document.getElementById('token').value = '';
    showSession();
    show();
  });
  window.addEventListener('hashchange', show);
  show();
  app.timer = setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
}

start();
