'use strict';
// The nubos-pilot side of `cargo bench -p chipset-mail --bench peer`: loads
// nubos-pilot's messaging library from NUBOS_PILOT_DIR (a checkout; none of
// its code is in this repository) and runs the commands the bench sends on
// stdin, one per line, answering each with the microseconds it took:
//
//   send <project> <n>   n sequential sends into <project> (created if missing)
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

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const [cmd, project, n] = line.trim().split(' ');
  if (cmd === 'send') {
    process.stdout.write(`${send(project, Number(n))}\n`);
  } else {
    process.stdout.write(`error unknown command ${cmd}\n`);
  }
});
