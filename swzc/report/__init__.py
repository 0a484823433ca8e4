"""Report: everything swzc prints or writes about a run, each output through its emitter, a pure function from
the pipeline's results to text.

One module per command's outputs, named as the command (swzc/commands/X.py prints what swzc/report/X.py
renders), because a command's records, its text and its JSON change together:

- rewrite: `swzc rewrite`'s summary, text and JSON
- analyze: `swzc analyze`'s per-kernel records, text and JSON
- suggest: `swzc suggest`'s suggestions, their exit code, text and JSON
- emitters: `swzc review`'s formats (patch, SARIF, rdjson, GitHub), over findings (rules, fixes, refusals)
- show: `swzc show`'s summary; picture: its picture and HTML page
- run_report: `rewrite --report` (JSON, Markdown, the HTML page)
- shared: what several of them print alike (syntax errors, candidate tables, an error as JSON)
"""
