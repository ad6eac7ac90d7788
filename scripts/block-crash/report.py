#!/usr/bin/env python3
"""Writes the results table of every run under $BC_DIR/runs (markdown).
usage: report.py OUT.md [MATRIX_WALL_SECONDS]"""
import glob
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
w = os.environ.get('BC_DIR', os.path.join(here, '..', '..', 'target', 'block-crash'))
rows, shims, examples = [], [], []
for f in sorted(glob.glob(os.path.join(w, 'runs', '*', 'summary.json'))):
    j = json.load(open(f)); st = j['stats']
    control = st['variant'] in ('nodata', 'nodirsync')
    ok = bool(st['violating_points']) == control
    k = st['kinds']
    rows.append(f"| {st['fs']} | {st['workload']} | {st['variant']} | {st['order']} | "
                f"{st['acked']}/{st['ops']} | {st['log_entries']} | {st['flushes']} | "
                f"{st['points']} ({k.get('flush', 0)}/{k.get('ack', 0)}/{k.get('ack-cut', 0)}/{k.get('subset', 0)}) | "
                f"{st['images']} | {st['violating_points']} | {len(st['lost_paths'])} | {st['fsck_bad']} | "
                f"{st['boot_s']} | {st['replay_s']} | {'as expected' if ok else '**UNEXPECTED**'} |")
    if st['variant'] == 'observe':
        tot = {}
        for g in st['guest']:
            if g.startswith('SHIM:'):
                for kv in g[6:].split():
                    key, val = kv.split('=')
                    tot[key] = tot.get(key, 0) + int(val)
        n = sum(1 for g in st['guest'] if g.startswith('SHIM:'))
        shims.append(f"{st['fs']} {st['workload']}: {n} processes, "
                     + ' '.join(f'{k}={v}' for k, v in tot.items()))
    if j['losses']:
        l0 = j['losses'][0]
        examples.append(f"- {st['fs']} {st['workload']} {st['variant']} {st['order']}: first at log entry "
                        f"{l0['entry']} ({l0['point']}), acked through op {l0['acked_through']} "
                        f"({l0['op']}): {l0['violations'][0][:300]}")
out = ['| fs | workload | variant | order | acked/ops | log entries | flushes | points (flush/ack/ack-cut/subset) '
       '| images mounted | violating points | files lost or torn | fsck not clean | guest s | replay s | verdict |',
       '|' + '---|' * 15] + rows
if len(sys.argv) > 2:
    out.append(f'\nMatrix wall time: {sys.argv[2]} s.')
if shims:
    out += ['', 'Sync calls of all chipset processes in the observe runs (the shim passes every call through):', '']
    out += [f'    {s}' for s in shims]
if examples:
    out += ['', 'First violation of each run that had one:', ''] + examples
open(sys.argv[1], 'w').write('\n'.join(out) + '\n')
