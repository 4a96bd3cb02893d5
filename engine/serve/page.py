"""The small HTML query page served at ``/`` (self-contained: no CDN, works offline)."""

from __future__ import annotations

import html

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kgengine SPARQL</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}
textarea{width:100%;height:12em;font-family:monospace}
table{border-collapse:collapse;margin-top:1em}td,th{border:1px solid #ccc;padding:.2em .5em;
font-family:monospace;font-size:90%;text-align:left}#status{margin:.5em 0;color:#555}
pre{background:#f6f6f6;padding:1em;overflow:auto}</style></head>
<body><h1>kgengine SPARQL endpoint</h1>
<p>Endpoint: <code>__ENDPOINT__</code> (SPARQL 1.1 Protocol; GET or POST).
Graphs are named <code>http://kgengine.org/graph/NAME</code>; without <code>FROM</code> or
<code>default-graph-uri</code> the default graph is the union of all graphs (a fact in two
loaded variants comes back twice); <code>/graph/NAME/sparql</code> serves one graph (its labels
in <code>GRAPH labels: { }</code>). Predeclared prefixes: <code>e:</code> entities,
<code>r:</code> relations (ids percent-encoded: <code>r:%2Ffilm%2Ffilm%2Fgenre</code>),
<code>g:</code> graphs, <code>kg:</code>, <code>rdf:</code>, <code>rdfs:</code>, <code>xsd:</code>.
Limits: __LIMITS__.</p>
<form id="f"><textarea id="q" name="query">SELECT ?g (COUNT(*) AS ?triples)
WHERE { GRAPH ?g { ?s ?p ?o } }
GROUP BY ?g ORDER BY DESC(?triples)</textarea><br>
<button type="submit">Run</button></form>
<div id="status"></div><div id="out"></div>
<script>
const form = document.getElementById("f"), out = document.getElementById("out"),
      status = document.getElementById("status");
function cell(t){ if(!t) return ""; if(t.type==="literal"){ let s=JSON.stringify(t.value);
  if(t["xml:lang"]) s+="@"+t["xml:lang"]; else if(t.datatype) s+="^^<"+t.datatype+">"; return s;}
  if(t.type==="uri") return "<"+t.value+">"; if(t.type==="bnode") return "_:"+t.value;
  return JSON.stringify(t.value); }
form.addEventListener("submit", async (e) => {
  e.preventDefault(); out.textContent = ""; status.textContent = "running…";
  const started = performance.now();
  try {
    const r = await fetch("/sparql", {method: "POST",
      headers: {"Content-Type": "application/sparql-query",
                "Accept": "application/sparql-results+json, text/turtle;q=0.9"},
      body: document.getElementById("q").value});
    const ms = Math.round(performance.now() - started), type = r.headers.get("content-type") || "";
    const cut = r.headers.get("x-sparql-truncated");
    status.textContent = r.status + " in " + ms + " ms" + (cut ? " — TRUNCATED (" + cut + ")" : "");
    if (!r.ok || !type.includes("json")) { const pre = document.createElement("pre");
      pre.textContent = await r.text(); out.appendChild(pre); return; }
    const data = await r.json();
    if ("boolean" in data) { out.textContent = String(data.boolean); return; }
    const table = document.createElement("table"), head = table.insertRow();
    for (const v of data.head.vars) { const th = document.createElement("th");
      th.textContent = "?" + v; head.appendChild(th); }
    for (const b of data.results.bindings) { const row = table.insertRow();
      for (const v of data.head.vars) row.insertCell().textContent = cell(b[v]); }
    out.appendChild(table);
    status.textContent += " — " + data.results.bindings.length + " row(s)";
  } catch (err) { status.textContent = "error: " + err; }
});
</script></body></html>
"""


def render(endpoint: str, limits: str) -> str:
    # textContent/JSON are used for all result data above; only these two values are pasted
    return _PAGE.replace("__ENDPOINT__", html.escape(endpoint)).replace("__LIMITS__", html.escape(limits))
