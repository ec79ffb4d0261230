"""The fleet report's page: one Jinja2 template with its style and script inline (no file, font
or script from anywhere else, so that it works offline and can be mailed or archived as is).

The template is rendered with autoescaping on (_fleet_report.render). What it marks safe:
``style`` and ``script``, constants of this file; the stamp's markers; and the bars and badges,
which _fleet_report._markup fills from the pieces below with every value escaped. The script filters the hypervisors by
name and state and counts ages from the absolute times the page carries; without it the page
still shows everything.
"""

from __future__ import annotations

STYLE = """
:root{--ink:#1d232b;--muted:#5d6875;--line:#d9dee4;--bg:#f6f7f9;--card:#fff;--use:#3a78c2;--rsv:#9aa5b1;
--over:#c8372d;--up:#2e8540;--stale:#b7791f;--down:#c8372d;--missing:#7b4fa3;--disabled:#5d6875}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);
background:var(--bg)}
header,main{max-width:1400px;margin:0 auto;padding:0 20px}
header{padding-top:14px}
h1{font-size:22px;margin:0 0 2px}
h2{font-size:17px;margin:22px 0 8px}
h3{font-size:13px;margin:0 0 6px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
nav a{margin-right:14px}
a{color:#1f5fa8}
.meta{color:var(--muted);margin:0 0 6px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(240px,1fr));gap:12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px}
.card.wide{grid-column:span 2}
.big{font-size:28px;font-weight:600;margin:0 0 6px}
.chips{list-style:none;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:6px}
.chip{font:inherit;border:1px solid var(--line);background:#fff;border-radius:14px;padding:2px 10px;cursor:pointer}
.chip b{margin-left:4px}
.b{display:inline-block;border-radius:4px;padding:0 7px;font-size:12px;font-weight:600;color:#fff;
background:var(--muted);margin-right:4px}
.s-up{background:var(--up)}.s-stale{background:var(--stale)}.s-down{background:var(--down)}
.s-missing{background:var(--missing)}.s-disabled{background:var(--disabled)}
.chip.s-up,.chip.s-stale,.chip.s-down,.chip.s-missing,.chip.s-disabled{color:#fff;border-color:transparent}
.o-claimed{background:var(--up)}.o-no_valid_host{background:var(--down)}.o-claim_conflict{background:var(--stale)}.o-refused{background:var(--down)}
.res{display:grid;grid-template-columns:44px 1fr 120px;align-items:center;gap:6px;font-size:12px}
.lbl{color:var(--muted)}
#most-full .res{grid-template-columns:1fr 120px}#most-full .lbl{display:none}
.track{position:relative;display:flex;height:12px;background:#e8ecf0;border-radius:3px;overflow:hidden}
.rsv{background:var(--rsv)}.use{background:var(--use)}
.over .use{background:var(--over)}.over .num{color:var(--over);font-weight:600}
.cap{position:absolute;top:0;bottom:0;width:2px;background:var(--ink);opacity:.55}
.num{white-space:nowrap;font-variant-numeric:tabular-nums}
.legend{color:var(--muted);font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin:0 3px 0 10px;vertical-align:-1px}
table{border-collapse:collapse;width:100%;background:var(--card)}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:12px;color:var(--muted);font-weight:600}
.filters{display:flex;flex-wrap:wrap;gap:14px;align-items:center;background:var(--card);border:1px solid var(--line);
border-radius:8px;padding:8px 12px;position:sticky;top:0;z-index:1}
.filters input{font:inherit;width:260px;padding:3px 6px}
.filters select{font:inherit;padding:2px 4px}
#shown{color:var(--muted)}
.hv{background:var(--card);border:1px solid var(--line);border-radius:6px;margin:6px 0;padding:8px 12px;
content-visibility:auto;contain-intrinsic-size:auto 70px}
.hv[hidden]{display:none}
.hd{display:grid;grid-template-columns:minmax(160px,1.3fr) repeat(3,minmax(190px,1fr)) 90px;gap:14px;align-items:center}
.name{font-weight:600;overflow-wrap:anywhere}
.where{display:block;color:var(--muted);font-size:12px;font-weight:400}
.count{color:var(--muted);font-size:12px;text-align:right}
.why{margin:6px 0 0;font-size:13px}
.why.s-text-down,.why.s-text-missing{color:var(--down)}.why.s-text-stale{color:#8a5a12}
details{margin-top:4px}
summary{cursor:pointer;color:var(--muted);font-size:12px}
.inst{list-style:none;margin:6px 0 0;padding:0;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:13px}
.inst small{color:var(--muted)}
.i-ERROR{color:var(--down)}.i-BUILDING{color:var(--stale)}
.mono{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
.decision{background:var(--card);border:1px solid var(--line);border-radius:6px;margin:6px 0;padding:8px 12px}
.decision>summary{color:var(--ink);font-size:14px}
.decision ul{margin:4px 0;padding-left:20px}
.empty{color:var(--muted)}
"""

SCRIPT = """
(function () {
  "use strict";
  var rows = Array.prototype.slice.call(document.querySelectorAll("#hvs > .hv"));
  var names = rows.map(function (row) { return row.getAttribute("data-k"); });
  var states = rows.map(function (row) { return " " + row.getAttribute("data-s") + " "; });
  var query = document.getElementById("q");
  var state = document.getElementById("state");
  var shown = document.getElementById("shown");
  function apply() {
    var text = query.value.trim().toLowerCase();
    var wanted = state.value ? " " + state.value + " " : "";
    var count = 0;
    for (var i = 0; i < rows.length; i++) {
      var visible = (!text || names[i].indexOf(text) !== -1) && (!wanted || states[i].indexOf(wanted) !== -1);
      if (rows[i].hidden === visible) { rows[i].hidden = !visible; }
      if (visible) { count++; }
    }
    shown.textContent = count.toLocaleString("en-US") + " of " + rows.length.toLocaleString("en-US") + " shown";
  }
  query.addEventListener("input", apply);
  state.addEventListener("change", apply);
  Array.prototype.forEach.call(document.querySelectorAll("button[data-state]"), function (button) {
    button.addEventListener("click", function () {
      state.value = button.getAttribute("data-state");
      apply();
      document.getElementById("hypervisors").scrollIntoView();
    });
  });
  function ago(seconds) {
    if (seconds < 120) { return Math.round(seconds) + " s"; }
    if (seconds < 7200) { return Math.round(seconds / 60) + " min"; }
    if (seconds < 172800) { return Math.round(seconds / 3600) + " h"; }
    return Math.round(seconds / 86400) + " days";
  }
  var now = Date.now();
  Array.prototype.forEach.call(document.querySelectorAll("time.age"), function (node) {
    var then = Date.parse(node.getAttribute("datetime"));
    if (!isNaN(then)) { node.textContent += " (" + ago(Math.max(now - then, 0) / 1000) + " ago)"; }
  });
  apply();
}());
"""

# Pieces repeated on every hypervisor's row, filled by _fleet_report._markup (every value escaped)
# rather than by template macros: a macro call each took most of the rendering of a large fleet.
BADGE = '<span class="b s-{state}">{state}</span>'
# One resource bar (_fleet_report._bar).
BAR = ('<div class="res{over}" title="{title}"><span class="lbl">{label}</span><span class="track">{reserved}'
       '<span class="use" style="width:{claimed_pct}%"></span>{capacity}</span>'
       '<span class="num">{used} / {limit} {unit}</span></div>\n')
BAR_RESERVED = '<span class="rsv" style="width:{pct}%"></span>'
BAR_CAPACITY = '<span class="cap" style="left:{pct}%"></span>'

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; \
script-src 'sha256-{{ script_hash }}'">
<meta name="generator" content="berth.fleet.fleet_report">
<title>Berth fleet: {{ "{:,}".format(hosts | length) }} hypervisors</title>
<style>{{ style | safe }}</style>
</head>
<body>
<header>
<h1>Berth fleet</h1>
<p class="meta">Ledger <span class="mono">{{ ledger }}</span> · generated {{ stamp | safe }} UTC, \
rewritten only when what it shows changes · stale after {{ service_down_time }} s without a sync (service_down_time)</p>
<nav><a href="#summary">Summary</a><a href="#hypervisors">Hypervisors</a><a href="#groups">Server groups</a>\
<a href="#decisions">Decisions</a></nav>
</header>
<main>
<section id="summary">
<h2>Summary</h2>
<div class="cards">
<div class="card"><h3>Hypervisors</h3><p class="big">{{ "{:,}".format(hosts | length) }}</p>
<ul class="chips">{% for state, count in state_counts %}<li><button type="button" class="chip{{ ' s-' ~ state if count else '' }}" \
data-state="{{ state }}">{{ state }}<b>{{ "{:,}".format(count) }}</b></button></li>{% endfor %}</ul></div>
<div class="card"><h3>Instances</h3><p class="big">{{ "{:,}".format(instance_total) }}</p>
<ul class="chips">{% for state, count in instance_counts %}<li class="chip">{{ state }}<b>{{ "{:,}".format(count) }}</b></li>{% endfor %}</ul></div>
<div class="card wide" id="totals"><h3>Used of the limit, the {{ hosts_up }} hypervisors up</h3>
{% for b in totals %}{{ b.html | safe }}{% else %}<p class="empty">No hypervisor is up.</p>{% endfor %}
<p class="legend"><i style="background:var(--rsv)"></i>reserved<i style="background:var(--use)"></i>claimed \
(instances, and unmanaged domains: those Berth did not make)<i style="background:var(--ink);width:2px"></i>\
capacity; the bar is the limit (capacity × allocation ratio)</p></div>
</div>
<h2>Most full</h2>
{% if most_full %}
<table id="most-full"><thead><tr><th>hypervisor</th><th>state</th><th>vCPU</th><th>RAM</th><th>disk</th></tr></thead><tbody>
{% for h in most_full %}<tr><td><a href="#{{ h.anchor }}">{{ h.name }}</a></td><td>{{ h.badges | safe }}</td>\
{% for b in h.bars %}<td>{{ b.html | safe }}</td>{% endfor %}</tr>
{% endfor %}</tbody></table>
{% else %}<p class="empty">Nothing is used yet.</p>{% endif %}
{% if homeless %}
<h2>Instances on no hypervisor</h2>
<table><thead><tr><th>instance</th><th>state</th><th>why</th></tr></thead><tbody>
{% for i in homeless %}<tr><td>{{ i.name }}</td><td>{{ i.state }}</td><td>{{ i.failure_reason or "" }}</td></tr>
{% endfor %}</tbody></table>
{% endif %}
</section>
<section id="hypervisors">
<h2>Hypervisors</h2>
<div class="filters"><label>Name <input id="q" type="search" placeholder="hypervisor or instance name" \
autocomplete="off"></label>
<label>State <select id="state"><option value="">any</option>{% for state, count in state_counts %}\
<option value="{{ state }}">{{ state }}</option>{% endfor %}</select></label>
<span id="shown">{{ "{:,}".format(hosts | length) }} of {{ "{:,}".format(hosts | length) }} shown</span></div>
<div id="hvs">
{% for h in hosts %}
<div class="hv" id="{{ h.anchor }}" data-k="{{ h.search }}" data-s="{{ h.filter_states }}">
<div class="hd"><span class="name" title="UUID {{ h.uuid }}">{{ h.name }}<span class="where">{{ h.zone or "no zone" }}\
{% if h.aggregates %} · {{ h.aggregates | join(", ") }}{% endif %}</span></span>
{% for b in h.bars %}{{ b.html | safe }}{% endfor %}<span class="count">{{ h.badges | safe }}<br>{{ h.instances | length }} \
instance{{ '' if h.instances | length == 1 else 's' }}</span></div>
{% if h.why %}<p class="why s-text-{{ h.state }}">{{ h.state }}: {{ h.why }}; last sync \
<time class="age" datetime="{{ h.synced_at }}Z">{{ h.synced_at | replace("T", " ") }} UTC</time></p>{% endif %}
{% if h.disabled %}<p class="why">disabled: {{ h.disabled_reason or "no reason given" }}</p>{% endif %}
{% if h.failed_builds %}<p class="why">{{ h.failed_builds }} failed build{{ '' if h.failed_builds == 1 else 's' }} \
since its last successful one (BuildFailureWeigher weighs it down)</p>{% endif %}
{% if h.instances %}<ul class="inst">{% for i in h.instances %}<li class="i-{{ i.state }}">{{ i.name }} \
<small>{{ i.state }} · {{ i.flavor }}{% if i.server_group %} · group {{ i.server_group }}{% endif %}\
{% if i.failure_reason %} · {{ i.failure_reason }}{% endif %}</small></li>{% endfor %}</ul>{% endif %}
{% if h.unmanaged %}<details><summary>{{ h.unmanaged | length }} unmanaged domain\
{{ '' if h.unmanaged | length == 1 else 's' }}</summary><ul class="inst">\
{% for d in h.unmanaged %}<li>{{ d.name }} <small>{{ d.vcpus }} vCPU · {{ d.memory_mb }} MB</small></li>{% endfor %}\
</ul></details>{% endif %}
</div>
{% endfor %}
</div>
</section>
<section id="groups">
<h2>Server groups</h2>
{% if server_groups %}
<table><thead><tr><th>group</th><th>policy</th><th>members</th><th>hosts</th></tr></thead><tbody>
{% for g in server_groups %}<tr class="group"><td>{{ g.name }}</td><td>{{ g.policy }}\
{% if g.max_server_per_host %} (at most {{ g.max_server_per_host }} per host){% endif %}</td>\
<td>{% for m in g.members %}{{ m.name }} on {{ m.host or "no host" }}{{ ", " if not loop.last else "" }}\
{% else %}none{% endfor %}</td><td>{{ g.hosts | join(", ") }}</td></tr>
{% endfor %}</tbody></table>
{% else %}<p class="empty">No server groups.</p>{% endif %}
</section>
<section id="decisions">
<h2>Last decisions</h2>
{% for d in decisions %}
<details class="decision"{{ ' open' if loop.index <= 5 else '' }}><summary><span class="b o-{{ d.outcome }}">\
{{ d.outcome | replace("_", " ") }}</span> <b>{{ d.name }}</b> · {{ d.created_at }} UTC · {{ d.summary }}</summary>
<p>Asked for {{ d.count }} × {{ d.flavor }} ({{ d.sizes }}){% if d.server_group %}, server group {{ d.server_group }}\
{% endif %}{% if d.availability_zone %}, zone {{ d.availability_zone }}{% endif %}; \
{{ d.hosts_total }} hypervisor(s) considered.</p>
{% if d.placements %}<table><thead><tr><th>instance</th><th>placed on</th><th>weight</th><th>weighers (their part of the weight)</th>\
<th>alternates</th></tr></thead><tbody>
{% for p in d.placements %}<tr><td>{{ p.index }}</td><td>{{ p.host }}</td><td>{{ p.weight }}</td>\
<td>{{ p.weights | join(", ") or "all 0" }}</td><td>{{ p.alternates | join(", ") or "none" }}</td></tr>
{% endfor %}</tbody></table>{% endif %}
{% if d.reasons %}<p>Not available:</p><ul>{% for reason in d.reasons %}<li>{{ reason }}</li>{% endfor %}</ul>{% endif %}
{% if d.rejections %}<p>Rejected hypervisors:</p><ul>{% for host, message in d.rejections %}\
<li><b>{{ host }}</b>: {{ message }}</li>{% endfor %}{% if d.rejections_more %}<li>and {{ d.rejections_more }} more\
</li>{% endif %}</ul>{% endif %}
</details>
{% else %}<p class="empty">No decisions recorded yet.</p>{% endfor %}
</section>
</main>
<script>{{ script | safe }}</script>
</body>
</html>
"""
