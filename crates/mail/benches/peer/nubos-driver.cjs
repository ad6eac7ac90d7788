'use strict';
// The nubos-pilot side of `cargo bench -p chipset-mail --bench peer`: loads
// nubos-pilot's messaging library from NUBOS_PILOT_DIR (a checkout; none of
// its code is in this repository) and runs the commands the bench sends on
// stdin, one per line, answering each with the microseconds it took:
//
//   send <project> <n>   n sequential sends into <project> (created if missing)
//   requests <project> <n> <task>   n sequential requests (expecting a
//                        reply) from np-critic to np-executor for <task>
//   pending <project> <task>   pendingReplies of <task> (answers
//                        `<microseconds> <count>`)
//   notify <project>     one untimed send; answers its id
//   inbox <project> <agent>   inbox of <agent> (answers
//                        `<microseconds> <count>`)
//   archive <project> <id>   archive of <id>
//   replies <project> <n>   n requests from np-critic to np-executor, each
//                        answered by a response (untimed; answers `ok`)
//   answered <project>   one request and its response (untimed); answers
//                        the request's id
//
// The same message as the chipset side: a notify from np-critic to
// np-executor for task M005-S007-T0002, round 2, a one-line body.
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

const dir = process.env.NUBOS_PILOT_DIR;
if (!dir) {
  process.stderr.write('NUBOS_PILOT_DIR is not set\n');
  process.exit(2);
}
const messaging = require(path.join(dir, 'lib', 'messaging.cjs'));

let seq = 0;
function send(project, n) {
  fs.mkdirSync(path.join(project, '.nubos-pilot'), { recursive: true });
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    seq += 1;
    messaging.send({
      from: 'np-critic',
      to: 'np-executor',
      kind: 'notify',
      subject: 'weak-assertion',
      body: `finding ${seq}: the assertion in tests/foo.rs:42 cannot fail`,
      phase: 'M005-S007-T0002',
      round: 2,
    }, project);
  }
  return Number((process.hrtime.bigint() - start) / 1000n);
}

function requests(project, n, task) {
  fs.mkdirSync(path.join(project, '.nubos-pilot'), { recursive: true });
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    seq += 1;
    messaging.send({
      from: 'np-critic',
      to: 'np-executor',
      kind: 'request',
      subject: 'weak-assertion',
      body: `finding ${seq}: the assertion in tests/foo.rs:42 cannot fail`,
      phase: task,
      round: 2,
      expects_reply: true,
    }, project);
  }
  return Number((process.hrtime.bigint() - start) / 1000n);
}

function exchange(project, task) {
  fs.mkdirSync(path.join(project, '.nubos-pilot'), { recursive: true });
  seq += 1;
  const q = messaging.send({
    from: 'np-critic',
    to: 'np-executor',
    kind: 'request',
    subject: 'weak-assertion',
    body: `finding ${seq}: the assertion in tests/foo.rs:42 cannot fail`,
    phase: task,
    round: 2,
    expects_reply: true,
  }, project);
  messaging.send({
    from: 'np-executor',
    to: 'np-critic',
    kind: 'response',
    subject: 'weak-assertion',
    body: `fixed ${seq}`,
    phase: task,
    round: 2,
    in_reply_to: q.id,
  }, project);
  return q.id;
}

function timed(f) {
  const start = process.hrtime.bigint();
  const out = f();
  return [Number((process.hrtime.bigint() - start) / 1000n), out];
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const [cmd, project, n, arg] = line.trim().split(' ');
  if (cmd === 'send') {
    process.stdout.write(`${send(project, Number(n))}\n`);
  } else if (cmd === 'requests') {
    process.stdout.write(`${requests(project, Number(n), arg)}\n`);
  } else if (cmd === 'pending') {
    const [us, out] = timed(() => messaging.pendingReplies(n, project));
    process.stdout.write(`${us} ${out.length}\n`);
  } else if (cmd === 'notify') {
    fs.mkdirSync(path.join(project, '.nubos-pilot'), { recursive: true });
    seq += 1;
    const sent = messaging.send({
      from: 'np-critic',
      to: 'np-executor',
      kind: 'notify',
      subject: 'weak-assertion',
      body: `finding ${seq}: the assertion in tests/foo.rs:42 cannot fail`,
      phase: 'M005-S007-T0002',
      round: 2,
    }, project);
    process.stdout.write(`${sent.id}\n`);
  } else if (cmd === 'replies') {
    for (let i = 0; i < Number(n); i++) exchange(project, 'M005-S007-T0004');
    process.stdout.write('ok\n');
  } else if (cmd === 'answered') {
    process.stdout.write(`${exchange(project, 'M005-S007-T0004')}\n`);
  } else if (cmd === 'inbox') {
    const [us, out] = timed(() => messaging.inbox(n, {}, project));
    process.stdout.write(`${us} ${out.length}\n`);
  } else if (cmd === 'archive') {
    const [us] = timed(() => messaging.archive(n, project));
    process.stdout.write(`${us}\n`);
  } else {
    process.stdout.write(`error unknown command ${cmd}\n`);
  }
});
