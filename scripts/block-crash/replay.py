#!/usr/bin/env python3
"""Replays a QEMU blklogwrites log (the dm-log-writes format) onto copies of
the base image at every crash point, mounts each copy through a loop device
(which recovers the journal or the XFS log), and checks what chipset
acknowledged against what the disk holds.

Crash points (a power cut may lose any write not followed by a flush):
  flush   every flush or FUA entry: every write before it applied
  ack     every ack mark (op n returned): every write before it applied
  ack-cut every ack mark, with the writes since the last flush dropped
  subset  with --subsets K, at each flush, up to K sampled subsets of the
          writes since the previous flush, on the image at that flush

The expectation comes from the guest itself: after each operation it printed
the md5 of every file under the state root (STATE n). At a crash point whose
last ack is op L, with A the next acknowledged op, every file under a real
name (no dot-name component: temps, locks and caches are dot-names) must
equal its content after one of the ops L..A (absent included): an
acknowledged change is whole and kept, an in-flight one is there whole or
not at all. Logs (*.jsonl) may end in a torn line from an in-flight append;
mail's manifest is appended without a sync by design (the doctor rebuilds
it), so it need only parse. Then `chipset doctor --json` and the listings
(hook list, every inbox, every bus queue) must succeed on the mounted root,
and e2fsck -fn / xfs_repair -n is recorded.

usage: replay.py --base IMG --log LOG --console TXT --fs ext4|xfs --mark OFF
                 --work DIR --chipset BIN [--subsets K] [--seed S] [--summary F]
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time

FLUSH, FUA, DISCARD, MARK = 1, 2, 4, 8
MAGIC = 0x6A736677736872


def parse_log(path):
    """Entries (index, sector, nsec, flags, data offset, data bytes)."""
    f = open(path, 'rb')
    magic, version, nr, ss = struct.unpack('<QQQI', f.read(28))
    assert magic == MAGIC and version == 1, (hex(magic), version)
    size = os.fstat(f.fileno()).st_size
    ents, off, idx = [], ss, 0
    # The header counts entries only up to the last flush: read on past it.
    while off + ss <= size:
        f.seek(off)
        sector, nsec, flags, dlen = struct.unpack('<QQQQ', f.read(32))
        if flags & ~0x1F or (idx >= nr and sector == nsec == flags == dlen == 0):
            break
        off += ss
        nbytes = dlen if flags & MARK else 0 if flags & DISCARD else nsec * ss
        ents.append((idx, sector, nsec, flags, off, nbytes))
        off += (nbytes + ss - 1) // ss * ss
        idx += 1
    return ss, ents


def parse_console(path):
    """(ops {n: (label, acked)}, states {n: {path: md5}}, guest lines)."""
    ops, states, guest, cur = {}, {0: {}}, [], None
    findings = {0: set()}
    for line in open(path, errors='replace'):
        line = line.rstrip('\r\n')
        w = line.split(' ')
        if w[0] == 'ACK':
            ops[int(w[1])] = (w[2], True)
        elif w[0] == 'FAIL':
            ops[int(w[1])] = (w[2], False)
            guest.append(line)
        elif w[0] == 'STATE':
            cur = int(w[1]); states[cur] = {}; findings[cur] = set()
        elif w[0] == 'F' and cur is not None and len(w) == 3:
            states[cur][w[2]] = w[1]
        elif w[0] == 'D' and cur is not None:
            try:
                findings[cur].add(json.loads('{' + line[2:].rstrip(',') + '}')['problem'])
            except ValueError:
                guest.append('unparsed doctor line: ' + line)
        elif w[0] == 'END':
            cur = None
        elif w[0] in ('GUEST:', 'SHIM:', 'OUT:'):
            guest.append(line)
    return ops, states, findings, guest


def hidden(rel):
    return any(part.startswith('.') for part in rel.split('/'))


def md5(data):
    return hashlib.md5(data).hexdigest()


def jsonl_ok(data, allow_torn_tail):
    """Whether every line is JSON; the last may be torn if allowed."""
    lines = data.split(b'\n')
    tail = lines.pop()
    for ln in lines:
        try:
            json.loads(ln)
        except ValueError:
            return False
    return tail == b'' or allow_torn_tail


class Checker:
    def __init__(self, a, ops, states, findings):
        self.a, self.ops, self.states, self.findings = a, ops, states, findings
        self.mnt = os.path.join(a.work, 'mnt')
        os.makedirs(self.mnt, exist_ok=True)
        self.snap = os.path.join(a.work, 'snap.img')
        self.cache = {}
        self.last_op = max(states)

    def observe(self, img):
        """Mounts img (a scratch copy) and reads every file, then the
        doctor and listings, then fsck. Returns an observation dict."""
        fstype = 'xfs' if self.a.fs == 'xfs' else 'ext4'      # ext4nj: ext4 without a journal
        if self.a.fs == 'ext4nj':
            # Without a journal nothing replays at mount: repair first, as
            # the boot's fsck would, or the operator after it (`-y`: preen
            # stops at the directory checksum errors a cut leaves here).
            subprocess.run(['e2fsck', '-fy', img], capture_output=True)
        r = subprocess.run(['mount', '-o', 'loop', '-t', fstype, img, self.mnt],
                           capture_output=True, text=True)
        if r.returncode:
            return {'mount': r.stderr.strip(), 'files': {}, 'tools': [], 'doctor': [], 'fsck': None}
        files, tools, doctor = {}, [], []
        try:
            root = os.path.join(self.mnt, 'state')
            walk_errors = []
            for d, _, names in os.walk(self.mnt, onerror=walk_errors.append):
                for n in names:
                    p = os.path.join(d, n)
                    rel = os.path.relpath(p, self.mnt)
                    if not rel.startswith('state/') or not os.path.isfile(p) or os.path.islink(p):
                        continue
                    try:
                        files[rel] = open(p, 'rb').read()
                    except OSError as e:
                        walk_errors.append(e)
            if os.path.isdir(root):
                try:
                    tools, doctor = self.run_tools(root)
                except OSError as e:
                    walk_errors.append(e)
            tools += [f'unreadable: {os.path.relpath(e.filename, self.mnt)}: {e.strerror}'
                      for e in walk_errors]
        finally:
            subprocess.run(['umount', self.mnt], check=True)
        fsck = ['xfs_repair', '-n', img] if self.a.fs == 'xfs' else ['e2fsck', '-fn', img]
        rc = subprocess.run(fsck, capture_output=True).returncode
        return {'mount': None, 'files': files, 'tools': tools, 'doctor': doctor, 'fsck': rc}

    def run_tools(self, root):
        """The doctor and every listing, read-only; returns failures."""
        env = dict(os.environ, CHIPSET_ROOT=root, NO_COLOR='1')
        r = subprocess.run([self.a.chipset, 'doctor', '--json'], env=env,
                           capture_output=True, text=True)
        try:
            findings = [f"{f['area']}: {f['problem']}" for f in json.loads(r.stdout)['findings']]
        except (ValueError, KeyError, TypeError):
            findings = None
        bad = []
        if findings is None or r.returncode not in (0, 1):
            bad.append(f'doctor: rc={r.returncode} {(r.stderr.strip() or r.stdout.strip())[:400]}')
        cmds = [['hook', 'list', '--json']]
        inbox = os.path.join(root, 'mail', 'inbox')
        if os.path.isdir(inbox):
            cmds += [['mail', 'inbox', ag, '--json'] for ag in sorted(os.listdir(inbox))
                     if not ag.startswith('.')]
        bus = os.path.join(root, 'bus')
        for ag in sorted(os.listdir(bus)) if os.path.isdir(bus) else []:
            if not ag.startswith('.') and os.path.isdir(os.path.join(bus, ag)):
                cmds.append(['bus', 'pending', ag, '--json'])
        for c in cmds:
            r = subprocess.run([self.a.chipset] + c, env=env, capture_output=True, text=True)
            if r.returncode:
                bad.append(f"{' '.join(c[:3])}: rc={r.returncode} "
                           f"{(r.stderr.strip() or r.stdout.strip())[:400]}")
        return bad, findings or []

    def window(self, last_ack):
        """Ops whose state a crash after the ack of last_ack may show."""
        nxt = next((n for n in sorted(self.ops) if n > last_ack and self.ops[n][1]), self.last_op)
        return list(range(last_ack, min(nxt, self.last_op) + 1))

    def last_synced_manifest(self, p, last_ack):
        """The last acked op <= last_ack that appended to the manifest p
        with a sync, if any."""
        for k in range(last_ack, 0, -1):
            if (self.ops.get(k, ('', False))[1] and self.ops[k][0] in SYNCED_MANIFEST_OPS
                    and self.states[k].get(p) != self.states.get(k - 1, {}).get(p)):
                return k
        return None

    def changed_ids(self, win):
        """Message and event ids whose files the ops in flight change."""
        ids = set()
        for j in win[1:]:
            before, after = self.states.get(j - 1, {}), self.states.get(j, {})
            for p in set(before) | set(after):
                if before.get(p) != after.get(p):
                    ids.update(IDS.findall(p))
                    ids.update(m.group(0) for m in SWEPT.finditer(p))
        return ids

    def judge(self, obs, last_ack):
        """Violations of the acknowledged state, and notes."""
        if obs['mount']:
            return [f'mount failed: {obs["mount"]}'], []
        win = self.window(last_ack)
        acked = self.states[last_ack]
        viol, notes = [], []
        paths = set(obs['files'])
        for j in win:
            paths |= set(self.states.get(j, {}))
        for p in sorted(paths):
            if hidden(p):
                continue
            data = obs['files'].get(p)
            got = None if data is None else md5(data)
            allowed = {self.states.get(j, {}).get(p) for j in win}
            if got in allowed:
                continue
            if p.endswith('manifest.jsonl'):
                # `sent` events are appended without a sync by design (the
                # doctor rebuilds them): lines may be lost or torn at the end,
                # but never the records of a synced append that was acked.
                k = self.last_synced_manifest(p, last_ack)
                base = self.states[k].get(p) if k else None
                cuts = [0] + [i + 1 for i, b in enumerate(data or b'') if b == 0x0A]
                if base and (data is None or not any(md5(data[:c]) == base for c in cuts)):
                    viol.append(f'{p}: lost records of the synced append of op {k} '
                                f'({label(self.ops, k)}): {describe(data)}')
                else:
                    notes.append(f'{p}: manifest not at an acknowledged state '
                                 f'({describe(data)})')
                continue
            if p.endswith('.jsonl') and data is not None and jsonl_ok(data, True):
                # A synced log: the acknowledged content, then whole records
                # or a torn tail of the in-flight append.
                base = acked.get(p)
                cuts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
                if base is None or any(md5(data[:c]) == base for c in cuts):
                    continue
            older = [j for j in range(last_ack) if self.states.get(j, {}).get(p) == got]
            what = (f'STALE (its content after op {older[-1]}, {label(self.ops, older[-1])})'
                    if older and got else describe(data))
            viol.append(f'{p}: {what}, expected one of '
                        f'{sorted("absent" if m is None else m[:8] for m in allowed)} '
                        f'(acked through op {last_ack}: {label(self.ops, last_ack)})')
        for t in obs['tools']:
            viol.append('tool failed: ' + t)
        seen = set().union(*(self.findings.get(j, set()) for j in win))
        moving = self.changed_ids(win)
        for f in obs['doctor']:
            if f in seen:
                continue            # the guest's own state shows it: not the crash
            if any(k in f for k in BY_DESIGN) or SENT_IN_FLIGHT.search(f):
                notes.append('doctor (by design): ' + f)
            elif (set(IDS.findall(f)) | set(SWEPT.findall(f))) & moving:
                notes.append('doctor (follow-up of the op in flight): ' + f)
            else:
                viol.append('doctor finding: ' + f)
        if obs['fsck']:
            notes.append(f'fsck rc={obs["fsck"]}')
        return viol, notes


# Doctor findings a power cut leaves by design, whatever was acknowledged:
# temps of interrupted writes, and `sent` events, which mail appends to the
# manifest without a sync (mail's Durability docs). Any other finding must
# either be in the guest's own doctor output for a state the crash point
# may show, or name an id whose files the op in flight changes (a follow-up
# that mail's doctor completes); else it is a violation.
# A torn manifest is by design too (a `sent` event's unsynced append; the
# manifest check in judge() makes sure no synced record was lost).
BY_DESIGN = ('temp', 'missing-sent-event', 'torn-manifest')
# For its first 10 s (`MailConfig::in_flight_grace`) an inbox message
# without its `sent` event is reported "in flight" instead, with the same
# cause: a crash point checked that soon after the guest's send shows that
# finding. Only an inbox message's: in `archive/` the event awaited may be
# a synced `archived`, and a by-task folder's is its synced `task-swept`.
SENT_IN_FLIGHT = re.compile(r'message `[^`]+` in inbox/\S+ has no `sent` event yet')
SWEPT = re.compile(r'archive/by-task/[\w.-]+')
# Ops whose manifest append is synced before they return (mail's Durability
# docs: a response's events, `archived`, `task-swept`): once one is acked,
# the manifest as it was then must stay a prefix of the manifest.
SYNCED_MANIFEST_OPS = ('send-response', 'mail-archive', 'sweep')
IDS = re.compile(r'\d{10,}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')


def label(ops, n):
    return ops.get(n, ('start', True))[0]


def describe(data):
    if data is None:
        return 'MISSING'
    if len(data) == 0:
        return 'EMPTY (0 bytes)'
    if data.count(0) == len(data):
        return f'ZEROS ({len(data)} bytes)'
    if b'\n' in data.rstrip(b'\n'):                     # a log: say how its records end
        whole = jsonl_ok(data, False)
        return f'{len(data)} bytes, ' + ('whole records' if whole else
                                           f'{data.count(0)} NUL bytes' if b'\0' in data
                                           else 'a torn last record')
    if b'\0' in data:
        return f'TORN ({len(data)} bytes, {data.count(0)} of them NUL)'
    try:
        json.loads(data)
        return f'a whole JSON file of {len(data)} bytes that no acknowledged state holds ({md5(data)[:8]})'
    except ValueError:
        return f'TORN ({len(data)} bytes, not JSON)'


def main():
    ap = argparse.ArgumentParser()
    for k in ('base', 'log', 'console', 'fs', 'work', 'chipset'):
        ap.add_argument('--' + k, required=True)
    ap.add_argument('--mark', type=int, required=True)
    ap.add_argument('--subsets', type=int, default=0)
    ap.add_argument('--seed', type=int, default=31)
    ap.add_argument('--summary')
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    ops, states, findings, guest = parse_console(a.console)
    ss, ents = parse_log(a.log)
    ck = Checker(a, ops, states, findings)
    rnd = random.Random(a.seed)
    marksec = a.mark // ss
    cur = os.path.join(a.work, 'cur.img'); shutil.copyfile(a.base, cur)
    at_flush = os.path.join(a.work, 'flush.img'); shutil.copyfile(a.base, at_flush)
    lf, df = open(a.log, 'rb'), open(cur, 'r+b')
    nwrites = sum(1 for e in ents if not e[3] & (FLUSH | FUA | MARK | DISCARD) and e[5] and e[1] < marksec)
    print(f'log: entries={len(ents)} flushes={sum(1 for e in ents if e[3] & FLUSH)} '
          f'fua={sum(1 for e in ents if e[3] & FUA)} fs-writes={nwrites} '
          f'ops={len(ops)} acked={sum(1 for o in ops.values() if o[1])}')
    t0 = time.time()
    stats = {'points': 0, 'images': 0, 'violating_points': 0, 'violations': 0, 'fsck_bad': 0,
             'kinds': {}}
    losses = []
    w = 0            # fs writes applied to cur
    w_flush = 0      # fs writes applied when the last flush completed
    epoch = []       # fs writes since the last flush: (sector, data offset, nbytes)
    last_ack = 0

    def image_at(nw):
        """Observation of the prefix image with nw fs writes applied (cached)."""
        if nw not in ck.cache:
            df.flush()
            src = cur if nw == w else at_flush
            assert nw in (w, w_flush)
            shutil.copyfile(src, ck.snap)
            ck.cache[nw] = ck.observe(ck.snap)
            stats['images'] += 1
            if ck.cache[nw]['fsck']:
                stats['fsck_bad'] += 1
        return ck.cache[nw]

    def check(kind, where, obs, la):
        viol, notes = ck.judge(obs, la)
        stats['points'] += 1
        stats['kinds'][kind] = stats['kinds'].get(kind, 0) + 1
        if viol:
            stats['violating_points'] += 1
            stats['violations'] += len(viol)
            losses.append({'point': kind, 'entry': where, 'acked_through': la,
                           'op': label(ops, la), 'violations': viol})
        print(f'entry {where:6} {kind:7} acked-through={la:3} ({label(ops, la)})'
              + (f' notes={len(notes)}' if notes else '')
              + ''.join(f'\n    VIOLATION {v}' for v in viol)
              + ''.join(f'\n    note {n}' for n in notes if not n.startswith('fsck')))

    for (idx, sector, nsec, flags, doff, nbytes) in ents:
        is_mark = sector >= marksec and nbytes and not flags
        if flags & DISCARD:
            df.seek(sector * ss); df.write(b'\0' * nsec * ss)
        elif not flags & MARK and nbytes and not is_mark:
            lf.seek(doff); data = lf.read(nbytes)
            df.seek(sector * ss); df.write(data)
            w += 1
            epoch.append((sector, doff, nbytes))
        if is_mark:
            last_ack = max(last_ack, (sector - marksec) * ss // 4096)
            check('ack', idx, image_at(w), last_ack)
            if w != w_flush:
                check('ack-cut', idx, image_at(w_flush), last_ack)
        if flags & (FLUSH | FUA):
            if a.subsets and len(epoch) >= 2:
                explore(ck, a, rnd, lf, at_flush, epoch, ss, last_ack, idx, check, stats)
            check('flush', idx, image_at(w), last_ack)
            df.flush(); shutil.copyfile(cur, at_flush)
            ck.cache = {w: ck.cache[w]} if w in ck.cache else {}
            w_flush, epoch = w, []
    dt = time.time() - t0
    stats['seconds'] = round(dt, 1)
    stats['log_entries'] = len(ents)
    stats['fs_writes'] = nwrites
    stats['flushes'] = sum(1 for e in ents if e[3] & (FLUSH | FUA))
    stats['lost_paths'] = sorted({v.split(':')[0] for l in losses for v in l['violations']
                                  if v.startswith('state/')})
    stats['ops'] = len(ops)
    stats['acked'] = sum(1 for o in ops.values() if o[1])
    stats['failed_ops'] = [f'{n} {ops[n][0]}' for n in sorted(ops) if not ops[n][1]]
    stats['guest'] = [g for g in guest if not g.startswith('OUT:')]
    print(f'points={stats["points"]} images={stats["images"]} violating_points={stats["violating_points"]} '
          f'violations={stats["violations"]} fsck_bad={stats["fsck_bad"]} seconds={dt:.1f}')
    if a.summary:
        json.dump({'stats': stats, 'losses': losses}, open(a.summary, 'w'), indent=1)


def explore(ck, a, rnd, lf, at_flush, epoch, ss, last_ack, idx, check, stats):
    """Up to a.subsets states: the image at the previous flush plus a proper,
    non-empty subset of the writes since (kept in log order)."""
    n = len(epoch)
    cands = set()
    if n <= 4:
        cands = {tuple(j for j in range(n) if m >> j & 1) for m in range(1, 2 ** n - 1)}
    else:
        tries = 0
        while len(cands) < a.subsets and tries < 20 * a.subsets:
            tries += 1
            r = rnd.random()
            if r < 0.3:
                k = rnd.randrange(n); s = tuple(j for j in range(n) if j != k)   # drop one
            elif r < 0.5:
                k = rnd.randrange(1, n); s = tuple(range(k))                     # a prefix
            else:
                s = tuple(j for j in range(n) if rnd.random() < 0.5)
            if 0 < len(s) < n:
                cands.add(s)
    cands = sorted(cands)
    rnd.shuffle(cands)
    for s in cands[:a.subsets]:
        shutil.copyfile(at_flush, ck.snap)
        with open(ck.snap, 'r+b') as sf:
            for j in s:
                sector, doff, nbytes = epoch[j]
                lf.seek(doff); sf.seek(sector * ss); sf.write(lf.read(nbytes))
        obs = ck.observe(ck.snap)
        stats['images'] += 1
        if obs['fsck']:
            stats['fsck_bad'] += 1
        check('subset', f'{idx}/{len(s)}of{n}', obs, last_ack)


if __name__ == '__main__':
    sys.exit(main())
