// The hookline console: an overview of GET /status (refreshed while it is
// shown), the dead letters (GET /dlq...), the events list (GET /events,
// filtered, paged by cursor), a key's trace (GET /events/{key}),
// what waits in the tiers and lanes (GET /status, GET /parked), and the
// pause, resume and drain of providers and routes (POST /providers/...,
// /routes/...). Every API call carries "Authorization: Bearer <token>"; the
// token lives in sessionStorage only (this tab, until it closes). A refused
// or missing token is said, in the view that asked and at the top, never
// passed over. Everything shown comes from the API (webhook keys, bodies,
// headers), so it is only ever put in the page as text (textContent), never
// as HTML.
'use strict';

const TOKEN = 'hookline.dlq.token';
const BY = 'hookline.dlq.by';
const PAGE = 50;
const REFRESH_MS = 5000;
const VIEWS = ['overview', 'dlq', 'events', 'trace', 'waiting'];
const state = { evCursor: '', evBack: [], evNext: '', evSeq: 0, offset: 0, total: 0, current: null, seq: 0, traceSeq: 0, view: 'overview', overviewBusy: false, refused: false, lastReport: null };

const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// line sets one of the page's message lines (#status for actions, a
// view's own for its loading).
function line(id, msg, kind) {
  const s = $(id);
  s.textContent = msg;
  s.className = (s.classList.contains('view-error') ? 'view-error ' : '') + (kind || '');
}

function say(msg, kind) {
  line('status', msg, kind);
}

async function api(method, path, body) {
  const opts = { method, headers: { Authorization: 'Bearer ' + (sessionStorage.getItem(TOKEN) || '') } };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, opts);
  } catch (e) {
    throw new Error('dlq serve did not answer (' + e.message + ')');
  }
  let data = null;
  try { data = await resp.json(); } catch (e) { /* not JSON */ }
  if (!resp.ok) {
    const err = new Error((data && data.message) || resp.status + ' ' + resp.statusText);
    err.status = resp.status;
    throw err;
  }
  state.refused = false;
  authState();
  return data;
}

// tokenProblem says why a request was answered 401: no token, or one
// dlq serve refused.
function tokenProblem() {
  return sessionStorage.getItem(TOKEN)
    ? 'Token refused: dlq serve did not accept this admin token. Enter HOOKLINE_ADMIN_TOKEN above.'
    : 'Token required: enter the admin token (HOOKLINE_ADMIN_TOKEN) above.';
}

// authState shows, at the top, whether a token is kept and whether dlq
// serve took it.
function authState() {
  const has = !!sessionStorage.getItem(TOKEN);
  if (state.refused || !has) {
    line('auth-state', tokenProblem(), 'error');
    return;
  }
  line('auth-state', 'Token kept for this tab' + (sessionStorage.getItem(BY) ? ', acting as ' + sessionStorage.getItem(BY) : ', enter your name to act') + '.', '');
}

// failed says what went wrong in the line given (#status by default).
function failed(err, where) {
  if (err.status === 401) {
    state.refused = true;
    authState();
    line(where || 'status', tokenProblem(), 'error');
    $('token').focus();
    return;
  }
  line(where || 'status', err.message, 'error');
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

// emptyRow says, across a table's cols columns, that it has no rows.
function emptyRow(body, text, cols) {
  const tr = el('tr');
  const td = el('td', text, 'empty');
  td.colSpan = cols;
  tr.append(td);
  body.append(tr);
}

function tag(text, cls) {
  return text ? el('span', text, 'tag ' + (cls || text)) : el('span', '–');
}

async function loadList() {
  const page = await api('GET', '/dlq?' + filters().toString());
  state.total = page.total;
  const body = $('entries').tBodies[0];
  body.replaceChildren();
  if (page.entries.length === 0) emptyRow(body, 'No entries match.', 10);
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

// clock is the local time of day of t, to the second.
function clock(t) {
  return new Date(t).toLocaleTimeString([], { hour12: false });
}

// age says how long ago seconds is, roughly.
function age(seconds) {
  const s = Math.round(seconds);
  if (s < 120) return s + 's';
  if (s < 7200) return Math.round(s / 60) + 'm';
  if (s < 172800) return Math.round(s / 3600) + 'h';
  return Math.round(s / 86400) + 'd';
}

function ageSince(t) {
  return t ? age((Date.now() - new Date(t).getTime()) / 1000) : '–';
}

// cell is a table cell with its column's name, which the stacked rows of
// a narrow screen show before the value.
function cell(label, value, cls) {
  const td = el('td', value, cls);
  td.dataset.label = label;
  return td;
}

function fact(box, label, value, cls) {
  const s = el('span', label + ' ');
  s.append(el('b', value, cls));
  box.append(s);
}

// reasonsOf are the report's reasons about one provider ("stripe") or
// route ("stripe/default"): they start with its name.
function reasonsOf(rep, name, isProvider) {
  return (rep.reasons || []).filter((r) => r.startsWith(name + ': ') || (isProvider && r.startsWith(name + '/')));
}

// settingOf finds a provider's (route '') or a route's own setting.
function settingOf(views, provider, route) {
  return views.find((v) => v.provider === provider && (v.route || '') === route) || { state: 'running', text: 'running' };
}

// actionCell holds the Pause, Resume and Drain controls of a setting: own
// is the setting itself (a route's own, not what its provider's makes of
// it), path /providers/{name} or /routes/{provider}/{route}.
function actionCell(own, path, name) {
  const td = cell('Actions', null, 'actions-cell');
  const button = (verb, label) => {
    const b = el('button', label, verb);
    b.type = 'button';
    b.dataset.verb = verb;
    return b;
  };
  if (own.state !== 'paused') td.append(button('pause', 'Pause'));
  if (own.state !== 'running') td.append(button('resume', 'Resume'));
  const rate = el('input', null, 'rate');
  rate.type = 'number';
  rate.min = '0.01';
  rate.step = 'any';
  rate.placeholder = '/s';
  rate.setAttribute('aria-label', 'drain rate of ' + name + ', calls per second');
  td.append(rate, button('drain', 'Drain'));
  td.addEventListener('click', (ev) => {
    const verb = ev.target.dataset && ev.target.dataset.verb;
    if (!verb) return;
    if (verb === 'drain') {
      const r = Number(rate.value);
      if (!rate.value || !(r > 0)) {
        say(name + ': give the drain rate, in calls per second, beside Drain.', 'error');
        rate.focus();
        return;
      }
      setSetting(path, name, 'rate', r);
      return;
    }
    setSetting(path, name, verb);
  });
  return td;
}

function verdictCell(reasons) {
  const td = cell('Verdict');
  td.append(tag(reasons.length ? 'degraded' : 'healthy'));
  for (const r of reasons) td.append(el('div', r, 'reason'));
  return td;
}

function countCells(c, accepted) {
  return [
    cell('Accepted', accepted === undefined ? '–' : accepted),
    cell('Done', c.done),
    cell('Retrying', c.retrying),
    cell('Parked', c.parked),
    cell('DLQ unresolved', c.dlq_unresolved + (c.dlq_oldest_unresolved ? ' (oldest ' + age(c.dlq_oldest_unresolved.age_seconds) + ')' : '')),
  ];
}

// setBy says who set a setting, and when; and why, for a processor's
// auto-pause.
function setBy(v) {
  return v.by ? ' (by ' + v.by + (v.at ? ', ' + shortTime(v.at) : '') + (v.why ? ': ' + v.why : '') + ')' : '';
}

function renderOverview(rep, provs, routes) {
  const v = $('ov-verdict');
  v.textContent = rep.verdict;
  v.className = 'verdict ' + rep.verdict;
  const reasons = $('ov-reasons');
  reasons.replaceChildren(...(rep.reasons || []).map((r) => el('li', r)));
  const box = $('ov-totals');
  box.replaceChildren();
  const t = rep.totals;
  fact(box, 'accepted in ' + age(rep.window_seconds), t.accepted + ' (' + t.accepted_per_second.toFixed(2) + '/s)');
  fact(box, 'done', t.done);
  fact(box, 'retrying', t.retrying);
  fact(box, 'parked in lanes', t.parked);
  fact(box, 'DLQ unresolved', t.dlq_unresolved + (t.dlq_oldest_unresolved ? ', oldest ' + age(t.dlq_oldest_unresolved.age_seconds) : ''));
  fact(box, rep.raw.topic + ' lag', rep.raw.lag);
  fact(box, 'oldest unprocessed', rep.raw.oldest_unprocessed_at ? age(rep.raw.oldest_unprocessed_age_seconds) + ' old' : 'none');

  const body = $('ov-table').tBodies[0];
  body.replaceChildren();
  if (rep.providers.length === 0) emptyRow(body, 'No provider: nothing is in the providers file or the topics yet.', 10);
  for (const p of rep.providers) {
    const own = settingOf(provs, p.provider, '');
    const tr = el('tr', null, 'provider');
    tr.dataset.name = p.provider;
    const name = cell('Provider / route');
    name.append(el('b', p.provider));
    tr.append(name, verdictCell(reasonsOf(rep, p.provider, true)), cell('Deliveries', (own.text || p.state) + setBy(own)),
      cell('Breaker', p.breaker), ...countCells(p, p.accepted), actionCell(own, '/providers/' + encodeURIComponent(p.provider), p.provider));
    body.append(tr);
    for (const r of p.routes) {
      const rname = p.provider + '/' + r.route;
      const rown = settingOf(routes, p.provider, r.route);
      const rtr = el('tr', null, 'route');
      rtr.dataset.name = rname;
      let st = r.state + (r.state === 'draining' ? ' at ' + r.rate + '/s' : '');
      if (r.paused_by) st += ' (held by its ' + r.paused_by + ' setting)';
      st += heldText(r.held);
      if (r.concurrency_limit != null) st += ' · ' + r.concurrency_limit + ' of ' + r.max_inflight + ' calls at a time';
      if (r.answering_again) st += ' · answering again: a trial call was answered ' + shortTime(r.answering_again) + ', resume to drain';
      const nameCell = cell('Provider / route', '↳ ' + rname + ' · ' + r.priority);
      tr.classList.add('has-routes');
      rtr.append(nameCell, verdictCell(reasonsOf(rep, rname, false)), cell('Deliveries', st + setBy(rown)),
        cell('Breaker', r.breaker + (r.breaker_instance ? ' (' + r.breaker_instance + ')' : '')), ...countCells(r),
        actionCell(rown, '/routes/' + encodeURIComponent(p.provider) + '/' + encodeURIComponent(r.route), rname));
      body.append(rtr);
    }
  }
}

// heldText says what waits behind the heads of a route's ordered
// entities (issue 24): how many entities and records, and the entity held
// longest with the key it waits behind; '' when none.
function heldText(held) {
  if (!held || !held.entities) return '';
  const o = held.oldest[0];
  let s = ' · ' + held.entities + ' entit' + (held.entities === 1 ? 'y' : 'ies') + ' held, ' + held.waiting + ' records waiting';
  if (o) s += '; longest ' + o.entity + ' for ' + age(o.age_seconds) + (o.head ? ' behind ' + o.head + (o.dead ? ' (dead: replay it)' : '') : '');
  return s;
}

// refreshOverview reads GET /status, and the providers' and routes' own
// settings (who set them), and shows them. A failed refresh keeps the last
// report on the page and says when it was read.
async function refreshOverview() {
  if (state.overviewBusy) return;
  state.overviewBusy = true;
  $('ov-table').setAttribute('aria-busy', 'true');
  try {
    const [rep, provs, routes] = await Promise.all([api('GET', '/status'), api('GET', '/providers'), api('GET', '/routes')]);
    renderOverview(rep, provs.providers, routes.routes);
    state.lastReport = new Date();
    $('ov-refreshed').textContent = 'refreshed ' + clock(state.lastReport) + ' (report of ' + clock(rep.at) + ', every ' + REFRESH_MS / 1000 + 's)';
    line('ov-error', '', '');
  } catch (err) {
    failed(err, 'ov-error');
    const when = 'Refresh failed at ' + clock(new Date()) + ': ';
    $('ov-error').textContent = when + $('ov-error').textContent + (state.lastReport ? ' Showing the report read at ' + clock(state.lastReport) + '.' : '');
  } finally {
    $('ov-table').removeAttribute('aria-busy');
    state.overviewBusy = false;
  }
}

// setSetting pauses, resumes or drains (verb rate, at rate calls per
// second) a provider (path /providers/{name}) or a route
// (/routes/{provider}/{route}).
async function setSetting(path, name, verb, rate) {
  const by = sessionStorage.getItem(BY) || '';
  if (!by) {
    say('Enter your name above first: settings are recorded with it.', 'error');
    $('by').focus();
    return;
  }
  say(name + ': ' + verb + '…', '');
  let v;
  try {
    v = await api('POST', path + '/' + verb, verb === 'rate' ? { by, rate } : { by });
  } catch (err) {
    failed(err);
    $('status').textContent = name + ': ' + verb + ' not done. ' + $('status').textContent;
    return;
  }
  say(name + ': ' + v.text + ' (set by ' + v.by + ').', 'ok');
  await refreshOverview();
}

// waitingRows fills a table of status.Waiting rows.
function waitingRows(id, rows, key) {
  const body = $(id).tBodies[0];
  body.replaceChildren();
  if (rows.length === 0) emptyRow(body, 'Nothing waits.', 5);
  for (const w of rows) {
    const tr = el('tr');
    tr.append(cell(key === 'tier' ? 'Tier' : 'Priority', w[key]), cell('Records', w.records), cell('Due now', w.due_now),
      cell('Scheduled', w.scheduled), cell('Oldest parked', w.oldest ? shortTime(w.oldest) + ' (' + ageSince(w.oldest) + ' ago)' : '–', 'nowrap'));
    body.append(tr);
  }
}

// loadWaiting shows what waits in the retry tiers and the lanes: the
// counts by tier and priority (GET /status), by tier and route, and the
// next records (GET /parked).
async function loadWaiting() {
  const v = $('v-waiting');
  v.setAttribute('aria-busy', 'true');
  try {
    const [rep, pk] = await Promise.all([api('GET', '/status'), api('GET', '/parked?limit=100')]);
    waitingRows('w-tiers', rep.totals.by_tier, 'tier');
    waitingRows('w-prios', rep.totals.by_priority, 'priority');
    const cb = $('w-counts').tBodies[0];
    cb.replaceChildren();
    for (const c of pk.counts) {
      const tr = el('tr');
      tr.append(cell('Tier', c.tier), cell('Provider', c.provider), cell('Route', c.route, 'route'), cell('Records', c.records),
        cell('Oldest parked', shortTime(c.oldest) + ' (' + ageSince(c.oldest) + ' ago)', 'nowrap'));
      cb.append(tr);
    }
    $('w-records-title').textContent = 'Records, next due first (' + pk.records.length + ' of ' + pk.total + ')';
    const rb = $('w-records').tBodies[0];
    rb.replaceChildren();
    for (const r of pk.records) {
      const tr = el('tr');
      const key = cell('Key', r.key, 'key');
      key.append(' ', traceLink(r.key));
      tr.append(cell('Tier', r.tier), cell('Provider / route', r.provider + '/' + r.route), key, cell('Event', r.event_type || '–'),
        cell('Attempt', r.attempt), cell('Parked at', shortTime(r.parked_at), 'nowrap'), cell('Due at', r.due_at ? shortTime(r.due_at) : 'when there is room', 'nowrap'),
        cell('Last error', r.last_error || '–', 'err'));
      rb.append(tr);
    }
    line('waiting-error', (pk.incomplete || []).length ? 'Not read to the end: ' + pk.incomplete.join(', ') : '', 'error');
    v.dataset.loaded = clock(new Date());
  } catch (err) {
    failed(err, 'waiting-error');
  } finally {
    v.removeAttribute('aria-busy');
  }
}

// eventsQuery is the Events view's filters and the page's cursor.
function eventsQuery() {
  const f = new FormData($('events-form'));
  const q = new URLSearchParams();
  for (const name of ['provider', 'route', 'event_type', 'status', 'since', 'until']) {
    const v = (f.get(name) || '').trim();
    if (v) q.set(name, v);
  }
  q.set('limit', PAGE);
  if (state.evCursor) q.set('cursor', state.evCursor);
  return q;
}

// statusDetail says where an outcome sent its delivery, and its error.
function statusDetail(d) {
  return [d.tier ? 'to tier ' + d.tier : '', d.lane && d.status === 'parked' ? 'in ' + d.lane : '', d.reason || '', d.error || ''].filter(Boolean).join('; ');
}

// loadEvents shows one page of the events list (GET /events): one row per
// outcome, newest first, each linking to its key's trace.
async function loadEvents() {
  const seq = ++state.evSeq;
  const v = $('v-events');
  v.setAttribute('aria-busy', 'true');
  let page;
  try {
    page = await api('GET', '/events?' + eventsQuery().toString());
  } catch (err) {
    if (seq === state.evSeq) {
      failed(err, 'events-error');
      v.removeAttribute('aria-busy');
    }
    return;
  }
  if (seq !== state.evSeq) return; // other filters or another page were asked for since
  const body = $('ev-table').tBodies[0];
  body.replaceChildren();
  if (page.events.length === 0) emptyRow(body, page.next_cursor ? 'None on this stretch: older ones may match.' : 'No outcome matches.', 8);
  for (const d of page.events) {
    const tr = el('tr');
    tr.dataset.key = d.key;
    tr.dataset.status = d.status;
    const key = cell('Key', d.key, 'key');
    key.append(' ', traceLink(d.key));
    const st = cell('Status');
    st.append(tag(d.status));
    tr.append(cell('At', shortTime(d.at), 'nowrap'), key, cell('Provider / route', d.provider + (d.route ? '/' + d.route : '')),
      cell('Event', d.event_type || '–'), st, cell('Attempt', d.attempt || '–'), cell('Trace id', d.trace_id ? '' : '–', 'trace-id'),
      cell('Detail', statusDetail(d) || '–', 'err'));
    if (d.trace_id) tr.children[6].append(traceIDLink(d.trace_id, d.trace_id));
    body.append(tr);
  }
  state.evNext = page.next_cursor;
  $('ev-older').disabled = !page.next_cursor;
  $('ev-newer').disabled = state.evBack.length === 0;
  $('ev-page').textContent = 'page ' + (state.evBack.length + 1) + (page.events.length ? ', ' + page.events.length + (page.events.length === 1 ? ' row' : ' rows') : '');
  line('events-error', '', '');
  v.dataset.loaded = clock(new Date());
  v.removeAttribute('aria-busy');
}

function dlRow(dl, name, value) {
  dl.append(el('dt', name), el('dd', value === undefined || value === '' ? '–' : value));
}

// actions enables or disables the entry's buttons: they stay off while an
// entry loads, so they never act on the one shown before.
function actions(on) {
  for (const id of ['d-replay', 'd-resolve']) $(id).disabled = !on;
}

// traceLink is a link to the trace of key (GET /events/{key}), shown in
// the Trace view.
function traceLink(key) {
  const a = el('a', 'Trace', 'trace');
  a.href = '#trace=' + encodeURIComponent(key);
  a.dataset.key = key;
  a.addEventListener('click', (ev) => {
    ev.preventDefault();
    ev.stopPropagation();
    $('trace-key').value = key;
    showView('trace');
  });
  return a;
}

// nowText says where a key, or one route of it, stands.
function nowText(n) {
  switch (n.state) {
    case 'waiting': return 'waiting in retry tier ' + n.tier + ', due ' + shortTime(n.due_at) + ' (attempt ' + n.next_attempt + ')' + (n.retry_after ? '; the destination asked for no call before ' + shortTime(n.retry_after) + ' (Retry-After)' : '');
    case 'parked': return 'parked in ' + n.lane + ' until its destination has room';
    case 'dead': return 'dead, DLQ entry ' + n.ref + (n.resolution ? ' (' + n.resolution.resolution + ' by ' + n.resolution.by + ')' : '');
    case 'pending': return 'accepted, not processed yet';
    case 'done': return 'done at ' + shortTime(n.since);
    case 'unrouted': return 'unrouted: it matched no route, nothing was delivered';
    case 'suppressed': return 'suppressed as a replay of ' + n.replay_of + ': ingest produced nothing';
  }
  return n.state;
}

// stepDetail says what one step of a trace was.
function stepDetail(s) {
  if (s.kind === 'accepted' || s.kind === 'retried' || s.kind === 'replayed') {
    return 'request ' + (s.request_id || '–') + ', origin ' + s.origin + (s.replay_id ? ', replay ' + s.replay_id : '');
  }
  if (s.kind === 'outcome') {
    return [s.tier ? 'to tier ' + s.tier : '', s.lane && s.status === 'parked' ? 'in ' + s.lane : '', s.replay_of ? 'suppressed as a replay of ' + s.replay_of : '', s.error || ''].filter(Boolean).join('; ');
  }
  if (s.kind === 'waiting') return 'tier ' + s.tier + ', due ' + shortTime(s.due_at) + (s.retry_after ? '; Retry-After ' + shortTime(s.retry_after) : '');
  if (s.kind === 'dead_letter') {
    const r = s.resolution;
    return 'ref ' + s.ref + ', ' + s.reason + (r ? '; ' + r.resolution + ' by ' + r.by : '; unresolved');
  }
  return '';
}

// traceIDLink is a step's trace id (shown as text, default "trace <id>"), linked to the tracing backend when
// dlq serve has its URL (HOOKLINE_TRACE_URL, in the page's
// hookline-trace-url meta tag); null for a step without one.
function traceIDLink(id, text) {
  if (!id) return null;
  if (text === undefined) text = 'trace ' + id;
  const meta = document.querySelector('meta[name="hookline-trace-url"]');
  const url = meta ? meta.content : '';
  if (!url) return el('span', text, 'trace-id');
  const a = el('a', text, 'trace-id');
  a.href = url.replace('{trace_id}', encodeURIComponent(id));
  a.target = '_blank';
  a.rel = 'noopener noreferrer';
  return a;
}

// showTrace shows the key's whole path: where it stands, where each route
// stands with its latest outcome, then every step with its route.
async function showTrace(key) {
  const seq = ++state.traceSeq;
  line('trace-error', 'Tracing ' + key + '…', '');
  let t;
  try {
    t = await api('GET', '/events/' + encodeURIComponent(key));
  } catch (err) {
    if (seq !== state.traceSeq) return;
    $('trace').hidden = true;
    delete $('trace').dataset.key;
    if (err.status === 404) err.message = 'Nothing of ' + key + ' in the topics (yet): ' + err.message;
    failed(err, 'trace-error');
    return;
  }
  if (seq !== state.traceSeq) return; // another key was asked for since
  line('trace-error', '', '');
  const routes = t.routes || [];
  const on = t.now.route && routes.length > 1 ? ' (route ' + t.now.route + ')' : '';
  $('t-title').textContent = 'Trace of ' + t.key;
  $('t-now').textContent = 'Now: ' + nowText(t.now) + on + '. Accepted ' + t.accepted + ', attempts ' + t.attempts + ', duplicates ' + t.duplicates +
    (t.unrouted ? ', unrouted ' + t.unrouted : '') + (t.suppressed ? ', suppressed as replays ' + t.suppressed : '') + ', replays ' + t.replays + ', DLQ entries ' + t.dead_letters + '.';
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
    const link = traceIDLink(s.trace_id);
    if (link) tr.lastChild.append(' ', link);
    body.append(tr);
  }
  $('trace').dataset.key = key;
  $('trace').hidden = false;

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

// refresh reloads the dead letters' view.
async function refresh() {
  // aria-busy while the lists reload: their rows are replaced.
  $('entries').setAttribute('aria-busy', 'true');
  try {
    await Promise.all([loadStats(), loadList()]);
    line('dlq-error', '', '');
  } catch (err) {
    failed(err, 'dlq-error');
  } finally {
    $('entries').removeAttribute('aria-busy');
  }
}

// showView shows one view and loads it.
function showView(name) {
  state.view = name;
  for (const v of VIEWS) {
    $('v-' + v).hidden = v !== name;
    $('tab-' + v).setAttribute('aria-selected', String(v === name));
  }
  return reload();
}

// reload loads the view shown.
function reload() {
  switch (state.view) {
    case 'overview': return refreshOverview();
    case 'dlq': return refresh();
    case 'waiting': return loadWaiting();
    case 'events': return loadEvents();
    case 'trace': {
      const key = $('trace-key').value.trim();
      return key ? showTrace(key) : Promise.resolve();
    }
  }
  return Promise.resolve();
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
  if (sessionStorage.getItem(TOKEN)) $('token').placeholder = 'kept for this tab';
  $('auth').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('token').value.trim();
    if (t) sessionStorage.setItem(TOKEN, t);
    sessionStorage.setItem(BY, $('by').value.trim());
    $('token').value = '';
    if (sessionStorage.getItem(TOKEN)) $('token').placeholder = 'kept for this tab';
    state.refused = false;
    authState();
    say('', '');
    reload();
  });
  $('forget').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN);
    $('token').placeholder = '';
    state.refused = false;
    authState();
    say('Token forgotten: nothing is read or changed until one is entered.', '');
  });
  for (const v of VIEWS) $('tab-' + v).addEventListener('click', () => showView(v));
  $('filters').addEventListener('submit', (ev) => { ev.preventDefault(); state.offset = 0; refresh(); });
  $('newer').addEventListener('click', () => { state.offset = Math.max(0, state.offset - PAGE); refresh(); });
  $('older').addEventListener('click', () => { state.offset += PAGE; refresh(); });
  $('events-form').addEventListener('submit', (ev) => { ev.preventDefault(); state.evCursor = ''; state.evBack = []; loadEvents(); });
  $('ev-older').addEventListener('click', () => { state.evBack.push(state.evCursor); state.evCursor = state.evNext; loadEvents(); });
  $('ev-newer').addEventListener('click', () => { state.evCursor = state.evBack.pop() || ''; loadEvents(); });
  $('d-replay').addEventListener('click', () => { if (state.current) replay(state.current); });
  $('d-resolve').addEventListener('click', resolve);
  $('trace-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const key = $('trace-key').value.trim();
    if (!key) { line('trace-error', 'Enter a key (provider:id, as dlq list and the trace show it).', 'error'); return; }
    showTrace(key);
  });
  // The overview refreshes while it is shown in a visible tab, one
  // request at a time, and not with a token dlq serve refused (a new one
  // entered above refreshes it).
  setInterval(() => {
    if (state.view === 'overview' && !document.hidden && !state.refused && sessionStorage.getItem(TOKEN)) refreshOverview();
  }, REFRESH_MS);
  authState();
  showView('overview');
}

init();
