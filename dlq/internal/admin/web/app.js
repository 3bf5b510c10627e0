// The DLQ triage page. Every API call carries "Authorization: Bearer
// <token>"; the token lives in sessionStorage only (this tab, until it
// closes). Everything shown comes from webhook bodies and headers, so it is
// only ever put in the page as text (textContent), never as HTML.
'use strict';

const TOKEN = 'hookline.dlq.token';
const BY = 'hookline.dlq.by';
const PAGE = 50;
const state = { offset: 0, total: 0, current: null, seq: 0 };

const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function say(msg, kind) {
  const s = $('status');
  s.textContent = msg;
  s.className = kind || '';
}

async function api(method, path, body) {
  const opts = { method, headers: { Authorization: 'Bearer ' + (sessionStorage.getItem(TOKEN) || '') } };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  let data = null;
  try { data = await resp.json(); } catch (e) { /* not JSON */ }
  if (!resp.ok) {
    const err = new Error((data && data.message) || resp.statusText);
    err.status = resp.status;
    throw err;
  }
  return data;
}

function failed(err) {
  if (err.status === 401) {
    say('The admin token was refused: enter HOOKLINE_ADMIN_TOKEN above.', 'error');
    $('token').focus();
    return;
  }
  say(err.message, 'error');
}

function filters() {
  const f = new FormData($('filters'));
  const q = new URLSearchParams();
  for (const name of ['provider', 'route', 'reason', 'since', 'key']) {
    const v = (f.get(name) || '').trim();
    if (v) q.set(name, v);
  }
  if (f.get('unresolved')) q.set('unresolved', 'true');
  q.set('limit', PAGE);
  q.set('offset', state.offset);
  return q;
}

async function loadStats() {
  const st = await api('GET', '/dlq/stats');
  const box = $('stats');
  box.replaceChildren();
  const item = (label, value) => {
    const s = el('span', label + ' ');
    s.append(el('b', value));
    box.append(s);
  };
  item('entries', st.total);
  item('unresolved', st.unresolved);
  for (const [k, v] of Object.entries(st.by_resolution || {})) item(k.replace('_', ' '), v);
  const per = Object.entries(st.by_provider || {}).map(([k, v]) => k + ' ' + v.unresolved + '/' + v.total);
  if (per.length) item('unresolved/total by provider:', per.join(', '));
  const perRoute = Object.entries(st.by_route || {}).map(([k, v]) => k + ' ' + v.unresolved + '/' + v.total);
  if (perRoute.length > per.length) item('by route:', perRoute.join(', '));
  if (st.oldest_unresolved) item('oldest unresolved', st.oldest_unresolved.ref + ', ' + shortTime(st.oldest_unresolved.dead_at));
}

// shortTime turns 2026-03-01T12:00:05.123Z into 2026-03-01 12:00:05Z.
function shortTime(t) {
  return (t || '').replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

function tag(text, cls) {
  return text ? el('span', text, 'tag ' + (cls || text)) : el('span', '–');
}

async function loadList() {
  const page = await api('GET', '/dlq?' + filters().toString());
  state.total = page.total;
  const body = $('entries').tBodies[0];
  body.replaceChildren();
  if (page.entries.length === 0) {
    const tr = el('tr');
    const td = el('td', 'No entries match.', 'empty');
    td.colSpan = 10;
    tr.append(td);
    body.append(tr);
  }
  for (const e of page.entries) {
    const tr = el('tr');
    tr.dataset.ref = e.ref;
    if (state.current === e.ref) tr.classList.add('selected');
    const res = e.resolution ? e.resolution.resolution : '';
    const cells = [
      el('td', e.ref, 'nowrap'), el('td', shortTime(e.dead_at), 'nowrap'), el('td', e.provider), el('td', e.route, 'route'),
      el('td', e.event_type || '–'), el('td', e.key, 'key'), el('td'), el('td'), el('td', e.last_error, 'err'), el('td'),
    ];
    cells[6].append(tag(e.reason));
    cells[7].append(tag(res));
    const btn = el('button', 'Replay');
    btn.type = 'button';
    btn.className = 'replay';
    btn.dataset.ref = e.ref;
    btn.addEventListener('click', (ev) => { ev.stopPropagation(); replay(e.ref); });
    cells[9].append(btn, ' ', traceLink(e.key));
    tr.append(...cells);
    tr.addEventListener('click', () => show(e.ref));
    body.append(tr);
  }
  const last = Math.min(state.offset + page.entries.length, page.total);
  $('page').textContent = page.total === 0 ? '' : (state.offset + 1) + '–' + last + ' of ' + page.total;
  $('newer').disabled = state.offset === 0;
  $('older').disabled = last >= page.total;
}

// settingButtons are the Pause and Resume buttons of a setting: Pause
// where it runs or drains, Resume where it is held or drained.
function settingButtons(v, path, name) {
  const act = el('td', null, 'nowrap');
  for (const [verb, label, show] of [['pause', 'Pause', v.state !== 'paused'], ['resume', 'Resume', v.state !== 'running']]) {
    if (!show) continue;
    const btn = el('button', label, verb);
    btn.type = 'button';
    btn.addEventListener('click', () => setSetting(path, name, verb));
    act.append(btn);
  }
  return act;
}

// loadProviders shows each provider's provider-wide setting
// (webhooks.control), and loadRoutes each route's own, with their buttons.
async function loadProviders() {
  const ans = await api('GET', '/providers');
  const body = $('provider-table').tBodies[0];
  body.replaceChildren();
  $('providers').hidden = ans.providers.length === 0;
  for (const p of ans.providers) {
    const tr = el('tr');
    tr.dataset.provider = p.provider;
    const st = el('td');
    st.append(tag(p.text, p.state));
    const path = '/providers/' + encodeURIComponent(p.provider);
    tr.append(el('td', p.provider), st, el('td', p.by || '–'), el('td', p.at ? shortTime(p.at) : '–', 'nowrap'), settingButtons(p, path, p.provider));
    body.append(tr);
  }
}

async function loadRoutes() {
  const ans = await api('GET', '/routes');
  const body = $('route-table').tBodies[0];
  body.replaceChildren();
  // Only the route default of each provider, none set: the providers'
  // table says it all, so the routes' stays out of the way.
  $('routes').hidden = !ans.routes.some((r) => r.route !== 'default' || r.at);
  for (const r of ans.routes) {
    const name = r.provider + '/' + r.route;
    const tr = el('tr');
    tr.dataset.route = name;
    const st = el('td');
    st.append(tag(r.text, r.state));
    const path = '/routes/' + encodeURIComponent(r.provider) + '/' + encodeURIComponent(r.route);
    tr.append(el('td', r.provider), el('td', r.route, 'route'), st, el('td', r.by || '–'), el('td', r.at ? shortTime(r.at) : '–', 'nowrap'), settingButtons(r, path, name));
    body.append(tr);
  }
}

// setSetting pauses or resumes a provider (path /providers/{name}) or a
// route (/routes/{provider}/{route}).
async function setSetting(path, name, verb) {
  const by = sessionStorage.getItem(BY) || '';
  if (!by) {
    say('Enter your name above first: settings are recorded with it.', 'error');
    $('by').focus();
    return;
  }
  let v;
  try {
    v = await api('POST', path + '/' + verb, { by });
  } catch (err) {
    failed(err);
    return;
  }
  await refresh();
  say(name + ': ' + v.text + ' (set by ' + v.by + ').', 'ok');
}

async function refresh() {
  if (!sessionStorage.getItem(TOKEN)) {
    say('Enter the admin token (HOOKLINE_ADMIN_TOKEN) and your name above.', '');
    $('token').focus();
    return;
  }
  // aria-busy while the lists reload: their rows are replaced.
  $('entries').setAttribute('aria-busy', 'true');
  try {
    await Promise.all([loadStats(), loadProviders(), loadRoutes(), loadList()]);
  } catch (err) {
    failed(err);
  } finally {
    $('entries').removeAttribute('aria-busy');
  }
}

function dlRow(dl, name, value) {
  dl.append(el('dt', name), el('dd', value === undefined || value === '' ? '–' : value));
}

// actions enables or disables the entry's buttons: they stay off while an
// entry loads, so they never act on the one shown before.
function actions(on) {
  for (const id of ['d-replay', 'd-resolve']) $(id).disabled = !on;
}

// traceLink is a link to the trace of key (GET /events/{key}), shown
// below the list.
function traceLink(key) {
  const a = el('a', 'Trace', 'trace');
  a.href = '#trace=' + encodeURIComponent(key);
  a.dataset.key = key;
  a.addEventListener('click', (ev) => { ev.preventDefault(); ev.stopPropagation(); showTrace(key); });
  return a;
}

// nowText says where a key, or one route of it, stands.
function nowText(n) {
  switch (n.state) {
    case 'waiting': return 'waiting in retry tier ' + n.tier + ', due ' + shortTime(n.due_at) + ' (attempt ' + n.next_attempt + ')';
    case 'parked': return 'parked in ' + n.lane + ' until its destination has room';
    case 'dead': return 'dead, DLQ entry ' + n.ref + (n.resolution ? ' (' + n.resolution.resolution + ' by ' + n.resolution.by + ')' : '');
    case 'pending': return 'accepted, not processed yet';
    case 'done': return 'done at ' + shortTime(n.since);
    case 'unrouted': return 'unrouted: it matched no route, nothing was delivered';
  }
  return n.state;
}

// stepDetail says what one step of a trace was.
function stepDetail(s) {
  if (s.kind === 'accepted' || s.kind === 'retried' || s.kind === 'replayed') {
    return 'request ' + (s.request_id || '–') + ', origin ' + s.origin + (s.replay_id ? ', replay ' + s.replay_id : '');
  }
  if (s.kind === 'outcome') {
    return [s.tier ? 'to tier ' + s.tier : '', s.lane && s.status === 'parked' ? 'in ' + s.lane : '', s.error || ''].filter(Boolean).join('; ');
  }
  if (s.kind === 'waiting') return 'tier ' + s.tier + ', due ' + shortTime(s.due_at);
  if (s.kind === 'dead_letter') {
    const r = s.resolution;
    return 'ref ' + s.ref + ', ' + s.reason + (r ? '; ' + r.resolution + ' by ' + r.by : '; unresolved');
  }
  return '';
}

// showTrace shows the key's whole path: where it stands, where each route
// stands with its latest outcome, then every step with its route.
async function showTrace(key) {
  let t;
  try {
    t = await api('GET', '/events/' + encodeURIComponent(key));
  } catch (err) {
    failed(err);
    return;
  }
  const routes = t.routes || [];
  const on = t.now.route && routes.length > 1 ? ' (route ' + t.now.route + ')' : '';
  $('t-title').textContent = 'Trace of ' + t.key;
  $('t-now').textContent = 'Now: ' + nowText(t.now) + on + '. Accepted ' + t.accepted + ', attempts ' + t.attempts + ', duplicates ' + t.duplicates +
    (t.unrouted ? ', unrouted ' + t.unrouted : '') + ', replays ' + t.replays + ', DLQ entries ' + t.dead_letters + '.';
  const rb = $('t-routes').tBodies[0];
  rb.replaceChildren();
  $('t-routes').hidden = routes.length === 0;
  for (const r of routes) {
    const o = r.last_outcome;
    const tr = el('tr');
    tr.dataset.route = r.route;
    tr.append(el('td', r.route, 'route'), el('td', nowText(r.now)),
      el('td', o ? o.status + ' at ' + shortTime(o.at) + (o.error ? ': ' + o.error : '') : '–', 'err'), el('td', r.attempts), el('td', r.dead_letters));
    rb.append(tr);
  }
  const body = $('t-steps').tBodies[0];
  body.replaceChildren();
  for (const s of t.steps) {
    const tr = el('tr');
    tr.append(el('td', shortTime(s.at), 'nowrap'), el('td', s.route || 'every route', s.route ? 'route' : 'quiet'),
      el('td', s.kind === 'outcome' ? s.status : s.kind), el('td', s.attempt || '–'), el('td', stepDetail(s), 'err'));
    body.append(tr);
  }
  $('trace').dataset.key = key;
  $('trace').hidden = false;
  $('trace').scrollIntoView({ block: 'nearest' });
}

async function show(ref) {
  const seq = ++state.seq;
  actions(false);
  let d;
  try {
    d = await api('GET', '/dlq/' + encodeURIComponent(ref));
  } catch (err) {
    if (seq === state.seq) actions(state.current !== null);
    failed(err);
    return;
  }
  if (seq !== state.seq) return; // another entry was asked for since
  state.current = ref;
  for (const tr of $('entries').tBodies[0].rows) tr.classList.toggle('selected', tr.dataset.ref === ref);
  $('detail').hidden = false;
  $('d-title').textContent = 'Entry ' + d.ref;
  const dl = $('d-summary');
  dl.replaceChildren();
  dlRow(dl, 'Key', d.key);
  dlRow(dl, 'Provider', d.provider);
  dlRow(dl, 'Route', d.route);
  dlRow(dl, 'Event type', d.event_type);
  dlRow(dl, 'Reason', d.reason);
  dlRow(dl, 'Dead at', shortTime(d.dead_at));
  dlRow(dl, 'First seen', shortTime(d.first_seen_at));
  dlRow(dl, 'Origin', d.origin + ' (attempt ' + d.attempt + ')');
  if (d.replay_id) dlRow(dl, 'Replay of', d.replay_id);
  const r = d.resolution;
  dlRow(dl, 'Resolution', r ? r.resolution + ' by ' + r.by + ' at ' + shortTime(r.at) + (r.note ? ': ' + r.note : '') : 'unresolved');
  dl.lastChild.id = 'd-resolution-text';

  const eb = $('d-errors').tBodies[0];
  eb.replaceChildren();
  if (d.errors.length === 0) {
    const tr = el('tr');
    const td = el('td', d.errors_invalid ? 'unreadable: ' + d.errors_invalid : 'none recorded', 'empty');
    td.colSpan = 4;
    tr.append(td);
    eb.append(tr);
  }
  for (const x of d.errors) {
    const tr = el('tr');
    tr.append(el('td', x.attempt), el('td', shortTime(x.at), 'nowrap'), el('td', x.retryable ? 'yes' : 'no'), el('td', x.error, 'err'));
    eb.append(tr);
  }
  const hb = $('d-headers').tBodies[0];
  hb.replaceChildren();
  for (const h of d.headers) {
    const tr = el('tr');
    tr.append(el('td', h.name), el('td', h.value));
    hb.append(tr);
  }
  let body = d.body;
  let kind = 'text';
  if (d.body_json && d.body_pretty) { body = d.body_pretty; kind = 'JSON'; }
  if (d.body_base64) { body = d.body_base64; kind = 'not UTF-8, base64'; }
  $('d-body-title').textContent = 'Body (' + d.body_bytes + ' bytes, ' + kind + ')';
  $('d-body').textContent = body;
  $('d-trace').replaceChildren(traceLink(d.key));
  $('detail').dataset.ref = ref;
  actions(true);
}

async function replay(ref) {
  const by = sessionStorage.getItem(BY) || '';
  if (!by) {
    say('Enter your name above first: replays are recorded with it.', 'error');
    $('by').focus();
    return;
  }
  say('Replaying ' + ref + '…', '');
  let r;
  try {
    const ans = await api('POST', '/dlq/replay', { refs: [ref], by });
    r = ans.results[0];
  } catch (err) {
    failed(err);
    return;
  }
  await refresh();
  if (state.current === ref) await show(ref);
  if (!r || !r.sent) {
    say('Replay of ' + ref + ' failed: ' + (r ? r.error : 'no result'), 'error');
    return;
  }
  say('Replayed ' + ref + ': sent as ' + r.replay_id + ' to ' + r.topic + ' ' + r.partition + ':' + r.offset +
    (r.error ? ' (warning: ' + r.error + ')' : '') + '. The outcome is on webhooks.outcomes.', r.error ? 'error' : 'ok');
}

async function resolve() {
  const ref = state.current;
  const by = sessionStorage.getItem(BY) || '';
  const note = $('d-note').value.trim();
  if (!ref) return;
  if (!by) { say('Enter your name above first.', 'error'); $('by').focus(); return; }
  if (!note) { say('Say why in the note.', 'error'); $('d-note').focus(); return; }
  let rs;
  try {
    rs = await api('POST', '/dlq/' + encodeURIComponent(ref) + '/resolve', { resolution: $('d-resolution').value, note, by });
  } catch (err) {
    failed(err);
    return;
  }
  $('d-note').value = '';
  await refresh();
  await show(ref);
  say('Resolved ' + ref + ' as ' + rs.resolution + '.', 'ok');
}

function init() {
  // A #token=... fragment (never sent to the server) is taken once, then
  // removed from the address bar and the history.
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(TOKEN, decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  $('by').value = sessionStorage.getItem(BY) || '';
  if (sessionStorage.getItem(TOKEN)) $('token').placeholder = 'saved for this tab';
  $('auth').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('token').value.trim();
    if (t) sessionStorage.setItem(TOKEN, t);
    sessionStorage.setItem(BY, $('by').value.trim());
    $('token').value = '';
    $('token').placeholder = 'saved for this tab';
    say('', '');
    refresh();
  });
  $('forget').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.removeItem(BY);
    $('by').value = '';
    $('token').placeholder = '';
    say('Token forgotten.', '');
  });
  $('filters').addEventListener('submit', (ev) => { ev.preventDefault(); state.offset = 0; refresh(); });
  $('newer').addEventListener('click', () => { state.offset = Math.max(0, state.offset - PAGE); refresh(); });
  $('older').addEventListener('click', () => { state.offset += PAGE; refresh(); });
  $('d-replay').addEventListener('click', () => { if (state.current) replay(state.current); });
  $('d-resolve').addEventListener('click', resolve);
  refresh();
}

init();
